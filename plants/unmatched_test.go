package plants_test

import (
	"slices"
	"testing"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/storetest"
)

// TestCatalogUnmatched finds the readers no configured issuer can match,
// on a parsed catalog and on the same catalog built as a snapshot is.
func TestCatalogUnmatched(t *testing.T) {
	const catalog = `[
		{"id": "a", "name": "Aloe", "readers": ["*"]},
		{"id": "b", "name": "Basil", "readers": ["group:gardeners"]},
		{"id": "c", "name": "Cress", "readers": ["user:bob", "group@staff:botanists"]},
		{"id": "d", "name": "Dill", "readers": ["*@partners", "user:bob"]},
		{"id": "e", "name": "Endive", "readers": ["group:gardeners"]},
		{"id": "f", "name": "Fig", "readers": ["user:x@staff"]}
	]`
	tests := []struct {
		name    string
		issuers []string
		want    plants.Unmatched
	}{
		{"the unnamed issuer alone", []string{""}, plants.Unmatched{Readers: 2, Examples: []string{"group@staff:botanists", "*@partners"}, Plants: 2}},
		{"named issuers only", []string{"staff", "partners"}, plants.Unmatched{Readers: 3, Examples: []string{"group:gardeners", "user:bob", "user:x@staff"}, Plants: 5, Hidden: 3}},
		{"one named issuer", []string{"staff"}, plants.Unmatched{Readers: 4, Examples: []string{"group:gardeners", "user:bob", "*@partners"}, Plants: 5, Hidden: 4}},
		{"every issuer", []string{"", "staff", "partners"}, plants.Unmatched{}},
		{"no issuer", nil, plants.Unmatched{Readers: 5, Examples: []string{"group:gardeners", "user:bob", "group@staff:botanists"}, Plants: 5, Hidden: 5}},
	}
	c := storetest.Catalog(t, catalog)
	built, err := build(c.Plants())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		for name, c := range map[string]*plants.Catalog{"parsed": c, "built": built} {
			got := c.Unmatched(tt.issuers)
			if got.Readers != tt.want.Readers || got.Plants != tt.want.Plants || got.Hidden != tt.want.Hidden || !slices.Equal(got.Examples, tt.want.Examples) {
				t.Errorf("%s, %s: Unmatched(%q) = %+v; want %+v", tt.name, name, tt.issuers, got, tt.want)
			}
		}
	}
}

// TestSampleCatalogMatchesTheUnnamedIssuer: -dev serves the sample catalog
// with the unnamed issuer, and warns of nothing.
func TestSampleCatalogMatchesTheUnnamedIssuer(t *testing.T) {
	if u := plants.SampleCatalog().Unmatched([]string{""}); u.Readers != 0 {
		t.Errorf("the sample catalog has readers the unnamed issuer cannot match: %+v", u)
	}
}
