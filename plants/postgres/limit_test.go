package postgres_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/plants/postgres"
	"github.com/plantstore/plantstore/plants/storetest"
)

// TestImportLimited: an import that would leave the catalog over the limit
// (bytes of ids, names, tags and readers; firstCatalog holds 31) is
// refused and changes nothing; without replace the stored plants count.
func TestImportLimited(t *testing.T) {
	t.Parallel()
	const ivy = `[{"id": "ivy", "name": "Ivy", "readers": ["*"]}]` // 7 bytes
	tests := []struct {
		name    string
		replace bool
		limit   int64
		want    []string
		wantErr *postgres.SizeError // nil: no error
	}{
		{"replace within the limit", true, 7, []string{"Ivy"}, nil},
		{"replace over the limit", true, 6, []string{"Fern", "Rose"}, &postgres.SizeError{Bytes: 7, Limit: 6}},
		{"add within the limit", false, 38, []string{"Fern", "Ivy", "Rose"}, nil},
		{"add: the stored plants count", false, 37, []string{"Fern", "Rose"}, &postgres.SizeError{Bytes: 38, Limit: 37}},
		{"no limit", false, 0, []string{"Fern", "Ivy", "Rose"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dsn := seeded(t)
			err := postgres.ImportLimited(t.Context(), dsn, storetest.Catalog(t, ivy), tt.replace, tt.limit)
			var se *postgres.SizeError
			switch {
			case tt.wantErr == nil && err != nil:
				t.Errorf("ImportLimited(replace=%v, limit=%d) = %v, want no error", tt.replace, tt.limit, err)
			case tt.wantErr != nil && (!errors.As(err, &se) || *se != *tt.wantErr):
				t.Errorf("ImportLimited(replace=%v, limit=%d) = %v, want %v", tt.replace, tt.limit, err, tt.wantErr)
			case tt.wantErr != nil && !strings.Contains(err.Error(), "-max-catalog-bytes"):
				t.Errorf("ImportLimited(replace=%v, limit=%d) = %v, want it to name -max-catalog-bytes", tt.replace, tt.limit, err)
			}
			got, err := collect(t, openStore(t, dsn, postgres.Options{}), everyone)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if !slices.Equal(storetest.Names(got), tt.want) {
				t.Errorf("after ImportLimited(replace=%v, limit=%d): List = %q, want %q", tt.replace, tt.limit, storetest.Names(got), tt.want)
			}
		})
	}
}
