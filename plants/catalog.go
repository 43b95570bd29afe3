package plants

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A Catalog is an immutable, validated set of plants, sorted in the
// contract's order: by name (byte order of the UTF-8 string), ties by id
// (byte order). A Catalog is safe for concurrent use.
//
// Ids generated for entries that have none are the entry's zero-based
// position in the file as ten decimal digits ("0000000003" for entry 3), so
// among themselves they sort by position, and a byte-order comparison of ids
// is the whole tie rule for both explicit and generated ids. An explicit id
// equal to a generated one is reported as a duplicate.
type Catalog struct {
	text       string   // the ids and names, one after the other
	entries    []entry  // the plants, in order
	tags       []string // the distinct tags, "" first
	readerSets [][]string
	generated  int // plants whose id was generated
}

// A CatalogError is a problem with a catalog file. Index is the zero-based
// position of the entry at fault in the file's array (its message counts
// entries from 1, as people do), or -1 when the problem
// concerns the whole file (not JSON, not an array, data after the array, an
// unreadable file).
type CatalogError struct {
	// File names the catalog, as given to [ParseCatalog].
	File string
	// Index is the entry's zero-based position, or -1.
	Index int
	// Err is the problem.
	Err error
}

// Error returns "<file>: entry <n>: <problem>", where n is Index+1 (the
// first entry is entry 1), or "<file>: <problem>" when Index is -1.
func (e *CatalogError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Index >= 0 {
		b.WriteString("entry ")
		b.WriteString(strconv.Itoa(e.Index + 1))
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns e.Err.
func (e *CatalogError) Unwrap() error { return e.Err }

// generatedIDWidth is the number of digits of a generated id: enough for any
// position an int32 can hold, so generated ids sort by position.
const generatedIDWidth = 10

// GeneratedID returns the id a catalog entry without one gets: its
// zero-based position as ten decimal digits.
func GeneratedID(index int) string {
	var b [20]byte
	digits := strconv.AppendInt(b[:0], int64(index), 10)
	if pad := generatedIDWidth - len(digits); pad > 0 {
		var z [generatedIDWidth]byte
		for i := range pad {
			z[i] = '0'
		}
		return string(append(z[:pad], digits...))
	}
	return string(digits)
}

// ParseCatalog reads a catalog file from r: a JSON array of objects
// {"id": string, "name": string, "tag": string, "readers": [string]}.
//
// name is a non-empty string. readers is a non-empty array whose items are
// "*", "user:<x>" or "group:<x>" with a non-empty x; repeated readers count
// once. id and tag are optional strings (absent or null: none); an explicit
// id is non-empty, and an entry without one gets [GeneratedID] of its
// position. Ids are unique. Unknown fields, repeated fields, wrong JSON types
// and a null name or readers are errors, as are strings that are not valid
// UTF-8 or that contain U+0000 (which PostgreSQL text cannot hold), so both
// stores accept the same files.
//
// The array is decoded one entry at a time. Every error is a
// [*CatalogError] naming name, the entry and the problem.
func ParseCatalog(r io.Reader, name string) (*Catalog, error) {
	fail := func(index int, format string, args ...any) error {
		return &CatalogError{File: name, Index: index, Err: fmt.Errorf(format, args...)}
	}
	dec := json.NewDecoder(r)
	tok, err := dec.Token()
	switch {
	case errors.Is(err, io.EOF):
		return nil, fail(-1, "empty file; want a JSON array")
	case err != nil:
		return nil, &CatalogError{File: name, Index: -1, Err: jsonProblem(err)}
	case tok != json.Delim('['):
		return nil, fail(-1, "not a JSON array")
	}
	var (
		plants    []Plant
		generated []bool
		interned  = make(map[string]string)
		raw       json.RawMessage
		scratch   = entryScratch{sets: make(map[string][]string)}
	)
	for i := 0; dec.More(); i++ {
		if err := dec.Decode(&raw); err != nil {
			return nil, &CatalogError{File: name, Index: i, Err: jsonProblem(err)}
		}
		p, err := parseEntry(raw, interned, &scratch)
		if err != nil {
			return nil, &CatalogError{File: name, Index: i, Err: err}
		}
		generated = append(generated, p.ID == "")
		if p.ID == "" {
			p.ID = GeneratedID(i)
		}
		plants = append(plants, p)
	}
	if _, err := dec.Token(); err != nil { // the closing ']'
		return nil, &CatalogError{File: name, Index: -1, Err: jsonProblem(err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fail(-1, "data after the JSON array")
	}
	if i, err := checkIDs(plants, generated); err != nil {
		return nil, &CatalogError{File: name, Index: i, Err: err}
	}
	c, err := compactCatalog(plants)
	if err != nil {
		return nil, &CatalogError{File: name, Index: -1, Err: err}
	}
	c.generated = countTrue(generated)
	return c, nil
}

// countTrue returns how many of bs are true.
func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// checkIDs returns the index of the first plant whose id an earlier plant
// has, with the problem, or -1 and nil when the ids are unique. generated
// tells which ids were generated from the position. The ids are checked
// once all are known, so that the map is made at its final size: growing
// it entry by entry cost a tenth of loading a large catalog.
func checkIDs(plants []Plant, generated []bool) (int, error) {
	ids := make(map[string]int, len(plants))
	for i, p := range plants {
		if j, dup := ids[p.ID]; dup {
			if generated[i] {
				return i, fmt.Errorf("generated id %q is the id of entry %d", p.ID, j+1)
			}
			return i, fmt.Errorf("id %q is also the id of entry %d", p.ID, j+1)
		}
		ids[p.ID] = i
	}
	return -1, nil
}

// jsonProblem turns an error of the JSON decoder into a problem statement
// for a CatalogError.
func jsonProblem(err error) error {
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("invalid JSON at byte %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errors.New("unexpected end of file; the JSON array is not closed")
	}
	return fmt.Errorf("read: %w", err)
}

// NewCatalog returns a Catalog of the given plants, validated by the rules of
// [ParseCatalog] (an empty ID is generated from the position in ps). ps is
// not modified. Errors are [*CatalogError] with an empty File.
func NewCatalog(ps []Plant) (*Catalog, error) {
	plants := make([]Plant, len(ps))
	generated := make([]bool, len(ps))
	for i, p := range ps {
		if err := validatePlant(&p); err != nil {
			return nil, &CatalogError{Index: i, Err: err}
		}
		if generated[i] = p.ID == ""; generated[i] {
			p.ID = GeneratedID(i)
		}
		plants[i] = p
	}
	if i, err := checkIDs(plants, generated); err != nil {
		return nil, &CatalogError{Index: i, Err: err}
	}
	c, err := compactCatalog(plants)
	if err != nil {
		return nil, &CatalogError{Index: -1, Err: err}
	}
	c.generated = countTrue(generated)
	return c, nil
}

// validatePlant checks p by the catalog rules and removes repeated readers
// (into a new slice: p.Readers itself is not modified).
func validatePlant(p *Plant) error {
	for _, f := range []struct{ field, v string }{{"id", p.ID}, {"name", p.Name}, {"tag", p.Tag}} {
		if err := checkText(f.field, f.v); err != nil {
			return err
		}
	}
	if p.Name == "" {
		return errors.New(`"name" is empty`)
	}
	if len(p.Readers) == 0 {
		return errors.New(`"readers" is empty; want at least one of "*", "user:<x>", "group:<x>"`)
	}
	repeats := false
	for i, r := range p.Readers {
		if err := checkReader(i, r); err != nil {
			return err
		}
		repeats = repeats || slices.Contains(p.Readers[:i], r)
	}
	if repeats {
		readers := make([]string, 0, len(p.Readers))
		for _, r := range p.Readers {
			if !slices.Contains(readers, r) {
				readers = append(readers, r)
			}
		}
		p.Readers = readers
	}
	return nil
}

// checkText reports a string field that is not valid UTF-8 or holds U+0000.
func checkText(field, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%q is not valid UTF-8", field)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%q contains U+0000", field)
	}
	return nil
}

// checkReader reports whether r, item i of readers, is not a reader.
func checkReader(i int, r string) error {
	if err := checkText("readers", r); err != nil {
		return err
	}
	if !ValidReader(r) {
		return fmt.Errorf(`"readers" item %d is not "*", "user:<x>", "group:<x>" or one of them qualified by an issuer name ("*@<name>", "user@<name>:<x>", "group@<name>:<x>")`, i+1)
	}
	return nil
}

// comparePlants orders by name, then id, both in byte order.
func comparePlants(a, b Plant) int {
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// LoadCatalogFile reads and parses the catalog file at path. Errors are
// [*CatalogError] with File set to path.
func LoadCatalogFile(path string) (*Catalog, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is already in the CatalogError
		}
		return nil, &CatalogError{File: path, Index: -1, Err: err}
	}
	defer f.Close()
	return ParseCatalog(f, path)
}

// Len returns the number of plants in c.
func (c *Catalog) Len() int { return len(c.entries) }

// GeneratedIDs returns the number of plants of c whose id was generated
// from their position, since their entry had none ([GeneratedID]).
func (c *Catalog) GeneratedIDs() int { return c.generated }

// Plants returns the plants of c in the contract's order, with their ids
// filled in, in a new slice. The plants' Readers are shared: callers must
// not modify them.
func (c *Catalog) Plants() []Plant {
	ps := make([]Plant, len(c.entries))
	for i := range ps {
		ps[i] = c.at(i)
	}
	return ps
}

//go:embed sample_catalog.json
var sampleCatalog []byte

// SampleCatalog returns the catalog embedded in the binary, served by -dev
// and when no -data file is given. Its readers are designed around
// [SampleUsers].
func SampleCatalog() *Catalog {
	c, err := ParseCatalog(bytes.NewReader(sampleCatalog), "sample_catalog.json")
	if err != nil {
		// The embedded file is tested; this cannot happen in a released binary.
		panic(err)
	}
	return c
}

// parseEntry decodes one catalog entry. raw is one complete, syntactically
// valid JSON value (the decoder checked it), which is why this parser only
// has to tell types apart and never has to skip a value: the first value of
// a wrong type ends the entry with an error. interned shares the storage of
// reader and tag strings across entries, and scratch the reader lists:
// entries with the same readers in the same order get the same slice.
func parseEntry(raw []byte, interned map[string]string, scratch *entryScratch) (Plant, error) {
	var (
		p    Plant
		seen [4]bool // id, name, tag, readers
	)
	s := entryScanner{b: raw}
	if s.next() != '{' {
		return p, fmt.Errorf("entry is %s; want an object", s.kind())
	}
	s.i++
	if s.next() == '}' {
		return p, errors.New(`"name" is missing`)
	}
	for {
		key, err := s.str()
		if err != nil {
			return p, err
		}
		field := -1
		switch key {
		case "id":
			field = 0
		case "name":
			field = 1
		case "tag":
			field = 2
		case "readers":
			field = 3
		default:
			return p, fmt.Errorf("unknown field %q", key)
		}
		if seen[field] {
			return p, fmt.Errorf("field %q appears twice", key)
		}
		seen[field] = true
		s.next() // ':'
		s.i++
		switch c := s.next(); {
		case c == 'n':
			s.i += len("null")
			if key == "name" || key == "readers" {
				return p, fmt.Errorf("%q is null", key)
			}
		case key == "readers":
			if c != '[' {
				return p, fmt.Errorf(`"readers" is %s; want an array of strings`, s.kind())
			}
			s.i++
			readers := scratch.readers[:0]
			for s.next() != ']' {
				if s.next() != '"' {
					return p, fmt.Errorf(`"readers" item %d is %s; want a string`, len(readers)+1, s.kind())
				}
				r, err := s.interned(interned)
				if err != nil {
					return p, err
				}
				readers = append(readers, r)
				if s.next() == ',' {
					s.i++
				}
			}
			s.i++
			scratch.readers = readers
			p.Readers = scratch.set(readers)
		default:
			if c != '"' {
				return p, fmt.Errorf("%q is %s; want a string", key, s.kind())
			}
			var v string
			var err error
			if key == "tag" {
				v, err = s.interned(interned) // tags repeat
			} else {
				v, err = s.str()
			}
			if err != nil {
				return p, err
			}
			switch key {
			case "id":
				if v == "" {
					return p, errors.New(`"id" is empty; omit it to have one generated`)
				}
				p.ID = v
			case "name":
				p.Name = v
			case "tag":
				p.Tag = v
			}
		}
		if s.next() == '}' {
			break
		}
		s.i++ // ','
		s.next()
	}
	switch {
	case !seen[1]:
		return p, errors.New(`"name" is missing`)
	case !seen[3]:
		return p, errors.New(`"readers" is missing`)
	}
	return p, validatePlant(&p)
}

// entryScanner walks a syntactically valid JSON value.
type entryScanner struct {
	b []byte
	i int
}

// next skips white space and returns the next byte, or 0 at the end.
func (s *entryScanner) next() byte {
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return c
		}
	}
	return 0
}

// kind names the JSON type of the value at the current position.
func (s *entryScanner) kind() string {
	switch s.next() {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// rawStr returns the bytes of the JSON string at the current position,
// quotes included, and moves past it.
func (s *entryScanner) rawStr() []byte {
	start := s.i
	s.i++
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
			continue
		case '"':
			s.i++
			return s.b[start:s.i]
		}
		s.i++
	}
	return s.b[start:]
}

// str decodes the JSON string at the current position.
func (s *entryScanner) str() (string, error) {
	q := s.rawStr()
	body := q[1 : len(q)-1]
	if !utf8.Valid(body) {
		return "", errors.New("a string is not valid UTF-8")
	}
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body), nil
	}
	var v string
	if err := json.Unmarshal(q, &v); err != nil {
		return "", fmt.Errorf("decode string: %w", err)
	}
	return v, nil
}

// interned is str for values that repeat across entries (readers): equal
// values share one string.
// entryScratch is what parseEntry reuses from one entry to the next.
type entryScratch struct {
	readers []string
	key     []byte
	sets    map[string][]string // by setKey
}

// set returns the shared copy of a list of readers equal to readers.
func (e *entryScratch) set(readers []string) []string {
	// Each reader length-prefixed: no two different lists share a key,
	// whatever bytes they hold.
	e.key = e.key[:0]
	for _, r := range readers {
		e.key = binary.AppendUvarint(e.key, uint64(len(r)))
		e.key = append(e.key, r...)
	}
	if shared, ok := e.sets[string(e.key)]; ok {
		return shared
	}
	shared := slices.Clone(readers)
	e.sets[string(e.key)] = shared
	return shared
}

func (s *entryScanner) interned(m map[string]string) (string, error) {
	start := s.i
	q := s.rawStr()
	if v, ok := m[string(q)]; ok {
		return v, nil
	}
	s.i = start
	v, err := s.str()
	if err != nil {
		return "", err
	}
	m[string(q)] = v
	return v, nil
}
