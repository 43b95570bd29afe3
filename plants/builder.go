package plants

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// A CatalogBuilder makes a [Catalog] from plants given one at a time in
// the contract's order, the way a database returns them sorted. Each plant
// goes straight into the catalog's compact form: no slice of the whole
// catalog's plants exists at any time, so building a catalog costs little
// more memory than the catalog itself.
//
// A CatalogBuilder is made by [NewCatalogBuilder] and is not safe for
// concurrent use.
type CatalogBuilder struct {
	c    *Catalog
	text strings.Builder
	// tags and principals intern the tags and readers seen so far: equal
	// values share one string.
	tags       map[string]uint32
	principals map[string]string
	// sets remembers recent reader lists by a hash of their content, so
	// that plants with equal readers share one list. It is cleared when it
	// reaches maxRememberedSets: a catalog in which every plant has its own
	// readers must not cost a map as large as the catalog. When fewer than
	// one plant in sixteen found its list there, the catalog is of that
	// kind, and sets is dropped (nil) for the rest of the build.
	sets map[uint64]uint32
	hits int
	seed maphash.Seed
	key  []byte   // scratch for the hashed content
	set  []string // scratch for the readers of one plant
	// arena is where new reader lists are carved from, a few thousand
	// strings at a time rather than one allocation per plant.
	arena            []string
	prevName, prevID []byte
	err              error
}

// arenaStrings is the size of each arena of reader lists.
const arenaStrings = 1 << 12

// maxRememberedSets bounds CatalogBuilder.sets.
const maxRememberedSets = 1 << 14

// NewCatalogBuilder returns a builder for a catalog of about n plants
// holding about textBytes bytes of ids and names in all. Both are hints
// for the first allocations; 0 means unknown.
func NewCatalogBuilder(n, textBytes int) *CatalogBuilder {
	b := &CatalogBuilder{
		// As many reader lists as plants at most; Catalog gives back what
		// is not used.
		c:          &Catalog{entries: make([]entry, 0, max(n, 0)), readerSets: make([][]string, 0, max(n, 0)), tags: []string{""}},
		tags:       map[string]uint32{"": 0},
		principals: make(map[string]string),
		sets:       make(map[uint64]uint32),
		seed:       maphash.MakeSeed(),
	}
	b.text.Grow(max(textBytes, 0))
	return b
}

// Add adds the plant with the given id, name, tag (empty for none) and
// readers. It must sort after the plant added before it: by name, then
// by id, both in byte order. Add checks the plant by the rules of
// [ParseCatalog] (repeated readers count once) and its order; it does not
// check that ids are unique beyond that order, which the source must
// ensure (the database does with its primary key). The builder copies what
// it keeps: the slices may be reused once Add returns.
//
// The error names the plant by its id. After an error, every call returns
// that error.
func (b *CatalogBuilder) Add(id, name, tag []byte, readers [][]byte) error {
	if b.err != nil {
		return b.err
	}
	if err := b.add(id, name, tag, readers); err != nil {
		b.err = fmt.Errorf("plant %q: %w", id, err)
	}
	return b.err
}

func (b *CatalogBuilder) add(id, name, tag []byte, readers [][]byte) error {
	switch {
	case len(id) == 0:
		return errors.New(`"id" is empty`)
	case len(name) == 0:
		return errors.New(`"name" is empty`)
	case len(readers) == 0:
		return errors.New(`"readers" is empty`)
	}
	for _, f := range []struct {
		field string
		v     []byte
	}{{"id", id}, {"name", name}, {"tag", tag}} {
		if !utf8.Valid(f.v) {
			return fmt.Errorf("%q is not valid UTF-8", f.field)
		}
		if bytes.IndexByte(f.v, 0) >= 0 {
			return fmt.Errorf("%q contains U+0000", f.field)
		}
	}
	if n := len(b.c.entries); n > 0 {
		c := bytes.Compare(name, b.prevName)
		if c == 0 {
			c = bytes.Compare(id, b.prevID)
		}
		if c <= 0 {
			return fmt.Errorf("out of order: after the plant named %q with id %q; want name, then id, ascending in byte order", b.prevName, b.prevID)
		}
	}
	if len(b.c.entries) == math.MaxInt32 || uint64(b.text.Len())+uint64(len(id))+uint64(len(name)) > math.MaxUint32 {
		return errCatalogTooLarge
	}
	set, err := b.readerSet(readers)
	if err != nil {
		return err
	}
	t, ok := b.tags[string(tag)]
	if !ok {
		t = uint32(len(b.c.tags))
		s := string(tag)
		b.c.tags = append(b.c.tags, s)
		b.tags[s] = t
	}
	e := entry{tag: t, readers: set}
	e.id = span{uint32(b.text.Len()), uint32(len(id))}
	b.text.Write(id)
	e.name = span{uint32(b.text.Len()), uint32(len(name))}
	b.text.Write(name)
	b.c.entries = append(b.c.entries, e)
	b.prevName = append(b.prevName[:0], name...)
	b.prevID = append(b.prevID[:0], id...)
	return nil
}

// readerSet returns the index in the catalog's readerSets of a list equal
// to readers without repeats, adding one when no recent plant had it.
func (b *CatalogBuilder) readerSet(readers [][]byte) (uint32, error) {
	var h uint64
	if b.sets != nil {
		// Each reader length-prefixed: no two different lists share a
		// key, whatever bytes they hold.
		b.key = b.key[:0]
		for _, r := range readers {
			b.key = binary.AppendUvarint(b.key, uint64(len(r)))
			b.key = append(b.key, r...)
		}
		h = maphash.Bytes(b.seed, b.key)
		if i, ok := b.sets[h]; ok && sameReaders(b.c.readerSets[i], readers) {
			b.hits++
			return i, nil
		}
	}
	b.set = b.set[:0]
	for i, r := range readers {
		p, ok := b.principals[string(r)]
		if !ok {
			p = string(r)
			if err := checkReader(i, p); err != nil {
				return 0, err
			}
			b.principals[p] = p
		}
		if !slices.Contains(b.set, p) {
			b.set = append(b.set, p)
		}
	}
	if len(b.c.readerSets) == math.MaxUint32 {
		return 0, errCatalogTooLarge
	}
	if n := len(b.set); cap(b.arena)-len(b.arena) < n {
		b.arena = make([]string, 0, max(arenaStrings, n))
	}
	start := len(b.arena)
	b.arena = append(b.arena, b.set...)
	i := uint32(len(b.c.readerSets))
	b.c.readerSets = append(b.c.readerSets, b.arena[start:len(b.arena):len(b.arena)])
	switch {
	case b.sets == nil:
	case len(b.sets) == maxRememberedSets && b.hits < maxRememberedSets/16:
		b.sets = nil
	case len(b.sets) == maxRememberedSets:
		clear(b.sets)
		b.hits = 0
		fallthrough
	default:
		b.sets[h] = i
	}
	return i, nil
}

// sameReaders reports whether the list set holds exactly readers, in
// order. A list given with repeats never matches: it gets a list of its
// own, which is only less sharing.
func sameReaders(set []string, readers [][]byte) bool {
	if len(set) != len(readers) {
		return false
	}
	for i, r := range readers {
		if set[i] != string(r) {
			return false
		}
	}
	return true
}

// Catalog returns the catalog of the plants added, or the error of the
// first Add that failed. The builder must not be used afterwards.
func (b *CatalogBuilder) Catalog() (*Catalog, error) {
	if b.err != nil {
		return nil, b.err
	}
	c := b.c
	c.text = b.text.String()
	// Where the size hint was far too large, keep only what is used.
	if n := len(c.entries); cap(c.entries)-n > n/8+1024 {
		c.entries = append(make([]entry, 0, n), c.entries...)
	}
	if n := len(c.readerSets); cap(c.readerSets)-n > n/8+1024 {
		c.readerSets = append(make([][]string, 0, n), c.readerSets...)
	}
	*b = CatalogBuilder{err: errors.New("plants: CatalogBuilder used after Catalog")}
	return c, nil
}
