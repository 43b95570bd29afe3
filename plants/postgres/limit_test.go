package postgres_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/plants/postgres"
	"github.com/plantstore/plantstore/plants/storetest"
)

// TestImportMaxBytes: an import that would leave the catalog over the
// limit (bytes of ids, names, tags and readers; firstCatalog holds 31) is
// refused and changes nothing; without replace the stored plants count.
func TestImportMaxBytes(t *testing.T) {
	t.Parallel()
	const ivy = `[{"id": "ivy", "name": "Ivy", "readers": ["*"]}]` // 7 bytes
	tests := []struct {
		name    string
		mode    postgres.ImportMode
		limit   int64
		want    []string
		wantErr *postgres.SizeError // nil: no error
	}{
		{"replace within the limit", postgres.Replace, 7, []string{"Ivy"}, nil},
		{"replace over the limit", postgres.Replace, 6, []string{"Fern", "Rose"}, &postgres.SizeError{Bytes: 7, Limit: 6}},
		{"add within the limit", postgres.Add, 38, []string{"Fern", "Ivy", "Rose"}, nil},
		{"add: the stored plants count", postgres.Add, 37, []string{"Fern", "Rose"}, &postgres.SizeError{Bytes: 38, Limit: 37}},
		{"upsert: the stored plants count", postgres.Upsert, 37, []string{"Fern", "Rose"}, &postgres.SizeError{Bytes: 38, Limit: 37}},
		{"add: the file alone over the limit", postgres.Add, 6, []string{"Fern", "Rose"}, &postgres.SizeError{Bytes: 7, Limit: 6}},
		{"upsert within the limit", postgres.Upsert, 38, []string{"Fern", "Ivy", "Rose"}, nil},
		{"no limit", postgres.Add, 0, []string{"Fern", "Ivy", "Rose"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dsn := seeded(t)
			_, err := postgres.ImportWith(t.Context(), dsn, storetest.Catalog(t, ivy), postgres.ImportOptions{Mode: tt.mode, MaxBytes: tt.limit})
			var se *postgres.SizeError
			switch {
			case tt.wantErr == nil && err != nil:
				t.Errorf("ImportWith(%v, MaxBytes %d) = %v, want no error", tt.mode, tt.limit, err)
			case tt.wantErr != nil && (!errors.As(err, &se) || *se != *tt.wantErr):
				t.Errorf("ImportWith(%v, MaxBytes %d) = %v, want %v", tt.mode, tt.limit, err, tt.wantErr)
			case tt.wantErr != nil && !strings.Contains(err.Error(), "-max-catalog-bytes"):
				t.Errorf("ImportWith(%v, MaxBytes %d) = %v, want it to name -max-catalog-bytes", tt.mode, tt.limit, err)
			}
			got, err := collect(t, openStore(t, dsn, postgres.Options{}), everyone)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if !slices.Equal(storetest.Names(got), tt.want) {
				t.Errorf("after ImportWith(%v, MaxBytes %d): List = %q, want %q", tt.mode, tt.limit, storetest.Names(got), tt.want)
			}
		})
	}
}
