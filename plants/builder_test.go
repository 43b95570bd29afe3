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

func TestBuilderRules(t *testing.T) {
	aloe := plants.Plant{ID: "a", Name: "Aloe", Readers: []string{"*"}}
	mint := plants.Plant{ID: "m", Name: "Mint", Readers: []string{"*"}}
	tests := []struct {
		name   string
		plants []plants.Plant
		want   string // the ids in the catalog's order, or the error
	}{
		{"in order", []plants.Plant{aloe, mint}, "a m"},
		{"out of order by name", []plants.Plant{mint, aloe}, "a m"},
		{"ties by id", []plants.Plant{{ID: "z", Name: "Mint", Readers: []string{"*"}}, mint}, "m z"},
		{"lower case after upper case", []plants.Plant{{ID: "1", Name: "mint", Readers: []string{"*"}}, {ID: "2", Name: "Mint", Readers: []string{"*"}}}, "2 1"},
		{"repeated readers count once", []plants.Plant{{ID: "a", Name: "Aloe", Readers: []string{"*", "*"}}}, "a"},
		{"empty catalog", nil, ""},
		{"same name and id", []plants.Plant{mint, mint}, `error: entry 2: id "m" is also the id of entry 1`},
		{"same id, other name", []plants.Plant{mint, {ID: "m", Name: "Aloe", Readers: []string{"*"}}}, `error: entry 2: id "m" is also the id of entry 1`},
		{"empty id", []plants.Plant{aloe, {Name: "Mint", Readers: []string{"*"}}}, `error: "id" is empty`},
		{"empty name", []plants.Plant{{ID: "m", Readers: []string{"*"}}}, `error: "name" is empty`},
		{"no readers", []plants.Plant{{ID: "m", Name: "Mint"}}, `error: "readers" is empty`},
		{"bad reader", []plants.Plant{{ID: "m", Name: "Mint", Readers: []string{"*", "admins"}}}, `error: "readers" item 2 is not`},
		{"bad reader after it was seen good", []plants.Plant{aloe, {ID: "m", Name: "Mint", Readers: []string{"*", "user:"}}}, `error: "readers" item 2 is not`},
		{"NUL in an id", []plants.Plant{{ID: "m\x00", Name: "Mint", Readers: []string{"*"}}}, `error: "id" contains U+0000`},
		{"NUL in a name", []plants.Plant{{ID: "m", Name: "Mi\x00nt", Readers: []string{"*"}}}, `error: "name" contains U+0000`},
		{"invalid UTF-8 in a tag", []plants.Plant{{ID: "m", Name: "Mint", Tag: "\xff", Readers: []string{"*"}}}, `error: "tag" is not valid UTF-8`},
		{"NUL in a reader", []plants.Plant{{ID: "m", Name: "Mint", Readers: []string{"user:a\x00"}}}, `error: "readers" contains U+0000`},
		{"invalid UTF-8 in a reader", []plants.Plant{{ID: "m", Name: "Mint", Readers: []string{"group:\xff"}}}, `error: "readers" is not valid UTF-8`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := build(tt.plants)
			got := ""
			if err != nil {
				got = "error: " + err.Error()
			} else {
				var ids []string
				for _, p := range c.Plants() {
					ids = append(ids, p.ID)
				}
				got = strings.Join(ids, " ")
			}
			if tt.want == got || strings.HasPrefix(tt.want, "error: ") && strings.HasPrefix(got, tt.want) {
				return
			}
			t.Errorf("build(%v) = %q; want %q", tt.plants, got, tt.want)
		})
	}
}

// TestBuilderGeneratedIDs adds plants without ids: each gets the id of its
// position, generated ids sort by position among equal names, and an id
// given to a later plant that a generated one has is refused as such.
func TestBuilderGeneratedIDs(t *testing.T) {
	b := plants.NewCatalogBuilder(0, 0)
	star := [][]byte{[]byte("*")}
	for _, name := range []string{"b", "a", "b"} {
		if err := b.AddWithoutID([]byte(name), nil, star); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Add([]byte("x"), []byte("a"), nil, star); err != nil {
		t.Fatal(err)
	}
	c, err := b.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range c.Plants() {
		got = append(got, p.Name+"/"+p.ID)
	}
	if want := []string{"a/0000000001", "a/x", "b/0000000000", "b/0000000002"}; !slices.Equal(got, want) {
		t.Errorf("catalog = %q; want %q", got, want)
	}

	for _, tt := range []struct {
		name string
		add  func(b *plants.CatalogBuilder) error
		want string
	}{
		{"generated after given", func(b *plants.CatalogBuilder) error {
			b.Add([]byte(plants.GeneratedID(1)), []byte("a"), nil, star)
			return b.AddWithoutID([]byte("b"), nil, star)
		}, `entry 2: generated id "0000000001" is the id of entry 1`},
		{"given after generated", func(b *plants.CatalogBuilder) error {
			b.AddWithoutID([]byte("a"), nil, star)
			return b.Add([]byte(plants.GeneratedID(0)), []byte("b"), nil, star)
		}, `entry 2: id "0000000000" is also the id of entry 1`},
	} {
		b := plants.NewCatalogBuilder(0, 0)
		if err := tt.add(b); err != nil {
			t.Fatalf("%s: Add = %v; want nil (ids are checked by Catalog)", tt.name, err)
		}
		_, err := b.Catalog()
		var ce *plants.CatalogError
		if !errors.As(err, &ce) || ce.Index != 1 || err.Error() != tt.want {
			t.Errorf("%s: Catalog = %v; want a *CatalogError %q", tt.name, err, tt.want)
		}
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
	refused := b.Add([]byte("a"), nil, nil, [][]byte{[]byte("*")})
	if refused == nil {
		t.Fatal("Add without a name = nil; want an error")
	}
	if err := b.Add([]byte("c"), []byte("C"), nil, [][]byte{[]byte("*")}); err != refused {
		t.Errorf("Add after a refusal = %v; want the first error %v", err, refused)
	}
	if err := b.AddWithoutID([]byte("C"), nil, [][]byte{[]byte("*")}); err != refused {
		t.Errorf("AddWithoutID after a refusal = %v; want the first error %v", err, refused)
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

// TestBuilderManyReaderLists builds a catalog of fifty thousand plants
// none of which shares its readers with another, and lists it for two
// callers.
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
