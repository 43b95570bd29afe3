package plants

import (
	"errors"
	"math"
	"slices"
	"strings"
)

// The in-memory form of a Catalog holds no pointer per plant: the ids and
// names are spans of one string, and the tags and reader sets indexes into
// small tables of the distinct values. The garbage collector then marks a
// catalog of a million plants in a handful of objects instead of rescanning
// four pointers per plant on every cycle, which cost the service about 8 %
// of its CPU under load with a 1,000,000-plant catalog.

// span is a part of Catalog.text.
type span struct{ off, len uint32 }

// entry is one plant of a Catalog.
type entry struct {
	id, name span
	tag      uint32 // index in Catalog.tags; tags[0] is "", no tag
	readers  uint32 // index in Catalog.readerSets
}

// errCatalogTooLarge: the spans are 32-bit.
var errCatalogTooLarge = errors.New("catalog too large: over 2^31-1 plants, or ids and names over 4 GiB in all")

// compactCatalog returns the Catalog of ps, which are valid and have ids;
// it sorts ps in the contract's order first.
func compactCatalog(ps []Plant) (*Catalog, error) {
	if len(ps) > math.MaxInt32 {
		return nil, errCatalogTooLarge
	}
	slices.SortFunc(ps, comparePlants)
	size := 0
	for i := range ps {
		size += len(ps[i].ID) + len(ps[i].Name)
	}
	if uint64(size) > math.MaxUint32 {
		return nil, errCatalogTooLarge
	}
	var text strings.Builder
	text.Grow(size)
	add := func(s string) span {
		sp := span{uint32(text.Len()), uint32(len(s))}
		text.WriteString(s)
		return sp
	}
	c := &Catalog{entries: make([]entry, len(ps)), tags: []string{""}}
	tagIndex := map[string]uint32{"": 0}
	// Plants parsed from one file share the slice of equal reader lists,
	// so a list is known by its storage.
	type setKey struct {
		first *string
		n     int
	}
	setIndex := make(map[setKey]uint32)
	for i := range ps {
		p := &ps[i]
		tag, ok := tagIndex[p.Tag]
		if !ok {
			tag = uint32(len(c.tags))
			c.tags = append(c.tags, p.Tag)
			tagIndex[p.Tag] = tag
		}
		k := setKey{&p.Readers[0], len(p.Readers)} // valid plants have readers
		set, ok := setIndex[k]
		if !ok {
			set = uint32(len(c.readerSets))
			c.readerSets = append(c.readerSets, p.Readers)
			setIndex[k] = set
		}
		c.entries[i] = entry{id: add(p.ID), name: add(p.Name), tag: tag, readers: set}
	}
	c.text = text.String()
	return c, nil
}

// at returns plant i. Its strings are parts of c's and its Readers are
// shared with other plants: they must not be modified.
func (c *Catalog) at(i int) Plant {
	e := &c.entries[i]
	return Plant{
		ID:      c.text[e.id.off : e.id.off+e.id.len],
		Name:    c.text[e.name.off : e.name.off+e.name.len],
		Tag:     c.tags[e.tag],
		Readers: c.readerSets[e.readers],
	}
}
