package plants

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A CatalogBuilder makes a [Catalog] from plants given one at a time. It is
// the one way a catalog is made: [ParseCatalog] gives it the entries of a
// file, the PostgreSQL snapshot the rows of the database in order, and
// [NewCatalog] a slice. It holds the catalog rules:
//
//   - an id is non-empty, or generated from the plant's position
//     ([CatalogBuilder.AddWithoutID]), and no two plants share one;
//   - a name is non-empty;
//   - readers is non-empty, and each is "*", "user:<x>" or "group:<x>",
//     possibly qualified by an issuer ([ValidReader]); repeated readers
//     count once;
//   - ids, names, tags and readers are valid UTF-8 without U+0000 (which
//     PostgreSQL text cannot hold), so both stores hold the same catalogs.
//
// Each plant goes straight into the catalog's compact form (compact.go):
// no slice of the whole catalog's plants exists at any time. Equal tags and
// readers share one string, and plants with equal readers share one list.
// The plants are sorted in the contract's order once all are added, unless
// they came in it (as from the database).
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
	// sets finds the reader lists already made by a hash of their content,
	// so that plants with equal readers share one list; hits counts the
	// plants that found theirs there. When the catalog proves to be one
	// where few plants share (fewer hits than one for sixteen lists, when
	// sets holds maxRememberedSets lists or any power of two above), sets
	// is dropped for the rest of the build: a map as large as the catalog
	// would buy nothing.
	sets  map[uint64]uint32
	hits  int
	seed  maphash.Seed
	key   []byte   // scratch for the hashed content
	set   []string // scratch for the readers of one plant
	arena []string // where reader lists are carved from, a few thousand strings at a time
	// generated tells, by position, which plants got a generated id; nil
	// until one does.
	generated        []bool
	uniqueIDs        bool // the source guarantees them: Catalog does not check
	sorted           bool // the plants so far came in the contract's order
	prevName, prevID []byte
	err              error
}

// arenaStrings is the size of each arena of reader lists.
const arenaStrings = 1 << 12

// maxRememberedSets is the number of reader lists after which a builder
// that found few of them again stops looking.
const maxRememberedSets = 1 << 17

// NewCatalogBuilder returns a builder for a catalog of about n plants
// holding about textBytes bytes of ids and names in all. Both are hints
// for the first allocations; 0 means unknown.
func NewCatalogBuilder(n, textBytes int) *CatalogBuilder {
	n = max(n, 0)
	b := &CatalogBuilder{
		// As many reader lists as plants at most; Catalog gives back what
		// is not used.
		c:          &Catalog{entries: make([]entry, 0, n), readerSets: make([][]string, 0, n), tags: []string{""}},
		tags:       map[string]uint32{"": 0},
		principals: make(map[string]string),
		sets:       make(map[uint64]uint32),
		seed:       maphash.MakeSeed(),
		sorted:     true,
	}
	b.text.Grow(max(textBytes, 0))
	return b
}

// AssumeUniqueIDs tells b that its source never gives two plants the same
// id, as a primary key ensures: [CatalogBuilder.Catalog] then does not
// check it, which costs a map as large as the catalog.
func (b *CatalogBuilder) AssumeUniqueIDs() { b.uniqueIDs = true }

// Add adds the plant with the given id, name, tag (empty for none) and
// readers, in any order. It returns the first rule of [CatalogBuilder] the
// plant breaks. The builder copies what it keeps: the slices may be reused
// once Add returns. After an error, every call returns that error.
func (b *CatalogBuilder) Add(id, name, tag []byte, readers [][]byte) error {
	if b.err == nil {
		b.err = b.add(id, false, name, tag, readers)
	}
	return b.err
}

// AddWithoutID is Add for a plant without an id of its own, as a catalog
// file's entry may be: the plant gets [GeneratedID] of its position, the
// number of plants added before it.
func (b *CatalogBuilder) AddWithoutID(name, tag []byte, readers [][]byte) error {
	if b.err == nil {
		b.err = b.add(nil, true, name, tag, readers)
	}
	return b.err
}

func (b *CatalogBuilder) add(id []byte, generate bool, name, tag []byte, readers [][]byte) error {
	if !generate {
		if len(id) == 0 {
			return errors.New(`"id" is empty`)
		}
		if err := checkText("id", id); err != nil {
			return err
		}
	}
	if err := checkText("name", name); err != nil {
		return err
	}
	if err := checkText("tag", tag); err != nil {
		return err
	}
	switch {
	case len(name) == 0:
		return errors.New(`"name" is empty`)
	case len(readers) == 0:
		return errors.New(`"readers" is empty; want at least one of "*", "user:<x>", "group:<x>"`)
	}
	pos := len(b.c.entries)
	if generate {
		var digits [20]byte
		id = appendGeneratedID(digits[:0], pos)
	}
	if pos == math.MaxInt32 || uint64(b.text.Len())+uint64(len(id))+uint64(len(name)) > math.MaxUint32 {
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
	if generate && b.generated == nil {
		b.generated = make([]bool, pos, max(pos+1, cap(b.c.entries)))
	}
	if b.generated != nil {
		b.generated = append(b.generated, generate)
	}
	if generate {
		b.c.generated++
	}
	if b.sorted && pos > 0 {
		c := bytes.Compare(name, b.prevName)
		if c == 0 {
			c = bytes.Compare(id, b.prevID)
		}
		b.sorted = c > 0
	}
	if b.sorted {
		b.prevName = append(b.prevName[:0], name...)
		b.prevID = append(b.prevID[:0], id...)
	}
	return nil
}

// checkText reports a field that is not valid UTF-8 or holds U+0000.
func checkText(field string, v []byte) error {
	if !utf8.Valid(v) {
		return fmt.Errorf("%q is not valid UTF-8", field)
	}
	if bytes.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("%q contains U+0000", field)
	}
	return nil
}

// readerSet returns the index in the catalog's readerSets of the list of
// readers without repeats, adding one when no plant before had it.
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
			if err := checkText("readers", r); err != nil {
				return 0, err
			}
			p = string(r)
			if !ValidReader(p) {
				return 0, fmt.Errorf(`"readers" item %d is not "*", "user:<x>", "group:<x>" or one of them qualified by an issuer name ("*@<name>", "user@<name>:<x>", "group@<name>:<x>")`, i+1)
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
	if b.sets != nil {
		b.sets[h] = i
		if n := len(b.sets); n >= maxRememberedSets && n&(n-1) == 0 && b.hits < n/16 {
			b.sets = nil
		}
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

// Catalog returns the catalog of the plants added, in the contract's
// order, or the error of the first Add that failed. When two plants share
// an id (unless [CatalogBuilder.AssumeUniqueIDs]), the error is a
// [*CatalogError] whose Index is the position of the later one, in the
// order added. The builder must not be used afterwards.
func (b *CatalogBuilder) Catalog() (*Catalog, error) {
	if b.err != nil {
		return nil, b.err
	}
	c := b.c
	c.text = b.text.String()
	// Where the size hints were not exact (none, for a file), keep only
	// what is used: what grew by appending holds up to a quarter more.
	if b.text.Cap()-len(c.text) > len(c.text)/64+8192 {
		c.text = strings.Clone(c.text)
	}
	if n := len(c.entries); cap(c.entries)-n > n/64+512 {
		c.entries = append(make([]entry, 0, n), c.entries...)
	}
	if n := len(c.readerSets); cap(c.readerSets)-n > n/64+512 {
		c.readerSets = append(make([][]string, 0, n), c.readerSets...)
	}
	generated, unique, sorted := b.generated, b.uniqueIDs, b.sorted
	*b = CatalogBuilder{err: errors.New("plants: CatalogBuilder used after Catalog")}
	if !unique {
		if err := c.checkIDs(generated); err != nil {
			return nil, err
		}
	}
	if !sorted {
		slices.SortFunc(c.entries, func(x, y entry) int { return c.keyOf(x).Compare(c.keyOf(y)) })
	}
	return c, nil
}

// checkIDs returns a [*CatalogError] for the first plant, in c's order,
// whose id an earlier plant has, or nil when the ids are unique. generated
// tells which ids were generated from the position (nil: none). The ids
// are checked once all are known, so that the map is made at its final
// size.
func (c *Catalog) checkIDs(generated []bool) error {
	ids := make(map[string]int, len(c.entries))
	for i := range c.entries {
		id := c.str(c.entries[i].id)
		if j, dup := ids[id]; dup {
			if generated != nil && generated[i] {
				return &CatalogError{Index: i, Err: fmt.Errorf("generated id %q is the id of entry %d", id, j+1)}
			}
			return &CatalogError{Index: i, Err: fmt.Errorf("id %q is also the id of entry %d", id, j+1)}
		}
		ids[id] = i
	}
	return nil
}

// generatedIDWidth is the number of digits of a generated id: enough for any
// position an int32 can hold, so generated ids sort by position.
const generatedIDWidth = 10

// GeneratedID returns the id a catalog entry without one gets: its
// zero-based position as ten decimal digits.
func GeneratedID(index int) string {
	var b [20]byte
	return string(appendGeneratedID(b[:0], index))
}

// appendGeneratedID appends [GeneratedID] of index to dst.
func appendGeneratedID(dst []byte, index int) []byte {
	var b [20]byte
	digits := strconv.AppendInt(b[:0], int64(index), 10)
	for range generatedIDWidth - len(digits) {
		dst = append(dst, '0')
	}
	return append(dst, digits...)
}
