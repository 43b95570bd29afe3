package postgres

import (
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestTextArray decodes arrays that pgx encodes in the binary format, and
// refuses what a reader list cannot be.
func TestTextArray(t *testing.T) {
	t.Parallel()
	m := pgtype.NewMap()
	encode := func(v any) []byte {
		t.Helper()
		b, err := m.Encode(pgtype.TextArrayOID, pgtype.BinaryFormatCode, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// '{{a},{b}}': two dimensions of lengths 2 and 1, lower bounds 1.
	twoDimensions := []byte{0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 25, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1,
		0, 0, 0, 1, 'a', 0, 0, 0, 1, 'b'}
	tests := []struct {
		name    string
		src     []byte
		want    []string
		wantErr string
	}{
		{"one", encode([]string{"*"}), []string{"*"}, ""},
		{"several", encode([]string{"user:a", "group:ü", "", strings.Repeat("x", 300)}), []string{"user:a", "group:ü", "", strings.Repeat("x", 300)}, ""},
		{"empty", encode([]string{}), nil, ""},
		{"a NULL", encode([]*string{nil}), nil, "NULL"},
		{"two dimensions", twoDimensions, nil, "dimensions"},
		{"cut short", encode([]string{"user:a"})[:25], nil, "malformed"},
		{"header cut short", encode([]string{"user:a"})[:15], nil, "malformed"},
		{"nothing", nil, nil, "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := textArray(nil, tt.src)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("textArray(%x) = %q, %v; want an error containing %q", tt.src, got, err, tt.wantErr)
				}
				return
			}
			var s []string
			for _, b := range got {
				s = append(s, string(b))
			}
			if err != nil || !slices.Equal(s, tt.want) {
				t.Errorf("textArray(%x) = %q, %v; want %q", tt.src, s, err, tt.want)
			}
		})
	}
}
