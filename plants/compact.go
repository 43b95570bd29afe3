package plants

import "errors"

// The in-memory form of a Catalog holds no pointer per plant: the ids and
// names are spans of one string, and the tags and reader sets indexes into
// small tables of the distinct values. The garbage collector then marks a
// catalog of a million plants in a handful of objects instead of rescanning
// four pointers per plant on every cycle (docs/performance.md has the
// figures). A [CatalogBuilder] makes it.

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

// str returns the part of c.text that s spans.
func (c *Catalog) str(s span) string { return c.text[s.off : s.off+s.len] }

// keyOf returns the sort key of the plant of e.
func (c *Catalog) keyOf(e entry) Key { return Key{Name: c.str(e.name), ID: c.str(e.id)} }

// at returns plant i. Its strings are parts of c's and its Readers are
// shared with other plants: they must not be modified.
func (c *Catalog) at(i int) Plant {
	e := &c.entries[i]
	return Plant{
		ID:      c.str(e.id),
		Name:    c.str(e.name),
		Tag:     c.tags[e.tag],
		Readers: c.readerSets[e.readers],
	}
}
