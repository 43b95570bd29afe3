package plants_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/storetest"
)

// build adds ps to a new builder in their order and returns the catalog or
// the first error.
func build(ps []plants.Plant) (*plants.Catalog, error) {
	b := plants.NewCatalogBuilder(len(ps), 0)
	var readers [][]byte
	for _, p := range ps {
		readers = readers[:0]
		for _, r := range p.Readers {
			readers = append(readers, []byte(r))
		}
		if err := b.Add([]byte(p.ID), []byte(p.Name), []byte(p.Tag), readers); err != nil {
			return nil, err
		}
	}
	return b.Catalog()
}

// TestBuilderConformance serves catalogs rebuilt plant by plant through a
// CatalogBuilder: they must list exactly as the parsed ones.
func TestBuilderConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, c *plants.Catalog) plants.Store {
		built, err := build(c.Plants())
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		return plants.NewMemoryStore(built, nil)
	})
}

func TestBuilderSameCatalog(t *testing.T) {
	c := plants.SampleCatalog()
	built, err := build(c.Plants())
	if err != nil {
		t.Fatal(err)
	}
	got, want := built.Plants(), c.Plants()
	if !slices.EqualFunc(got, want, func(a, b plants.Plant) bool {
		return a.ID == b.ID && a.Name == b.Name && a.Tag == b.Tag && slices.Equal(a.Readers, b.Readers)
	}) {
		t.Errorf("built catalog:\n%v\nwant the parsed one:\n%v", got, want)
	}
}

func TestBuilderRefuses(t *testing.T) {
	ok := plants.Plant{ID: "m", Name: "Mint", Readers: []string{"*"}}
	tests := []struct {
		name   string
		plants []plants.Plant
		want   string // in the error; "" for none
	}{
		{"valid", []plants.Plant{{ID: "a", Name: "Aloe", Readers: []string{"*"}}, ok}, ""},
		{"ties by id", []plants.Plant{{ID: "a", Name: "Mint", Readers: []string{"*"}}, ok}, ""},
		{"repeated readers count once", []plants.Plant{{ID: "a", Name: "Aloe", Readers: []string{"*", "*"}}}, ""},
		{"empty catalog", nil, ""},
		{"out of order by name", []plants.Plant{ok, {ID: "a", Name: "Aloe", Readers: []string{"*"}}}, "out of order"},
		{"out of order by id", []plants.Plant{ok, {ID: "b", Name: "Mint", Readers: []string{"*"}}}, "out of order"},
		{"same name and id", []plants.Plant{ok, ok}, "out of order"},
		{"lower case after upper case", []plants.Plant{{ID: "1", Name: "mint", Readers: []string{"*"}}, {ID: "2", Name: "Mint", Readers: []string{"*"}}}, "out of order"},
		{"empty id", []plants.Plant{{Name: "Mint", Readers: []string{"*"}}}, `"id" is empty`},
		{"empty name", []plants.Plant{{ID: "m", Readers: []string{"*"}}}, `"name" is empty`},
		{"no readers", []plants.Plant{{ID: "m", Name: "Mint"}}, `"readers" is empty`},
		{"bad reader", []plants.Plant{{ID: "m", Name: "Mint", Readers: []string{"*", "admins"}}}, `"readers" item 2`},
		{"NUL in a name", []plants.Plant{{ID: "m", Name: "Mi\x00nt", Readers: []string{"*"}}}, "U+0000"},
		{"invalid UTF-8 in a tag", []plants.Plant{{ID: "m", Name: "Mint", Tag: "\xff", Readers: []string{"*"}}}, "UTF-8"},
		{"NUL in a reader", []plants.Plant{{ID: "m", Name: "Mint", Readers: []string{"user:a\x00"}}}, "U+0000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := build(tt.plants)
			if tt.want == "" {
				if err != nil || c.Len() != len(tt.plants) {
					t.Fatalf("build(%v) = %v; want a catalog of %d plants", tt.plants, err, len(tt.plants))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("build(%v) = %v; want an error containing %q", tt.plants, err, tt.want)
			}
			last := tt.plants[len(tt.plants)-1]
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", last.ID)) {
				t.Errorf("error %q does not name the plant's id %q", err, last.ID)
			}
		})
	}
}

// TestBuilderKeepsFirstError checks that a builder that refused a plant
// refuses everything after it, Catalog included.
func TestBuilderKeepsFirstError(t *testing.T) {
	b := plants.NewCatalogBuilder(0, 0)
	first := b.Add([]byte("b"), []byte("B"), nil, [][]byte{[]byte("*")})
	if first != nil {
		t.Fatal(first)
	}
	refused := b.Add([]byte("a"), []byte("A"), nil, [][]byte{[]byte("*")})
	if refused == nil {
		t.Fatal("Add out of order = nil; want an error")
	}
	if err := b.Add([]byte("c"), []byte("C"), nil, [][]byte{[]byte("*")}); !errors.Is(err, refused) && err != refused {
		t.Errorf("Add after a refusal = %v; want the first error %v", err, refused)
	}
	if c, err := b.Catalog(); c != nil || err != refused {
		t.Errorf("Catalog after a refusal = %v, %v; want nil, %v", c, err, refused)
	}
}

// TestBuilderCopies reuses the argument slices between calls: the catalog
// must hold what was given at each call.
func TestBuilderCopies(t *testing.T) {
	b := plants.NewCatalogBuilder(2, 0)
	id, name, tag, reader := []byte("1"), []byte("Aloe"), []byte("green"), []byte("group:g1")
	if err := b.Add(id, name, tag, [][]byte{reader}); err != nil {
		t.Fatal(err)
	}
	copy(id, "2")
	copy(name, "Bean")
	copy(tag, "brown")
	copy(reader, "group:g2")
	if err := b.Add(id, name, tag, [][]byte{reader}); err != nil {
		t.Fatal(err)
	}
	c, err := b.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	want := []plants.Plant{
		{ID: "1", Name: "Aloe", Tag: "green", Readers: []string{"group:g1"}},
		{ID: "2", Name: "Bean", Tag: "brown", Readers: []string{"group:g2"}},
	}
	if got := c.Plants(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("catalog = %v; want %v", got, want)
	}
}

// TestBuilderManyReaderLists builds a catalog whose plants have more
// distinct reader lists than the builder remembers, so that it forgets
// some and meets them again.
func TestBuilderManyReaderLists(t *testing.T) {
	const n = 50_000
	ps := make([]plants.Plant, n)
	for i := range ps {
		ps[i] = plants.Plant{
			ID:      plants.GeneratedID(i),
			Name:    fmt.Sprintf("plant %06d", i),
			Readers: []string{fmt.Sprintf("user:u%d", i%20_000), fmt.Sprintf("group:g%d", i%7)},
		}
	}
	c, err := build(ps)
	if err != nil {
		t.Fatal(err)
	}
	s := plants.NewMemoryStore(c, nil)
	for _, caller := range []plants.Caller{{Subject: "u3"}, {Subject: "x", Groups: []string{"g2"}}} {
		var want []string
		for _, p := range ps {
			if plants.Readable(p.Readers, caller) {
				want = append(want, p.Name)
			}
		}
		var got []string
		for p, err := range s.List(t.Context(), plants.Query{Caller: caller, Limit: plants.NoLimit}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p.Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("caller %+v: %d plants; want %d", caller, len(got), len(want))
		}
	}
}
