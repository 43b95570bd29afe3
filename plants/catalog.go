package plants

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
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
// concerns the whole file (not JSON, not an array, data after the array, a
// comma after the last entry, an unreadable file). A file that is not valid
// JSON has the Line and Column of the first byte at fault.
type CatalogError struct {
	// File names the catalog, as given to [ParseCatalog].
	File string
	// Index is the entry's zero-based position, or -1.
	Index int
	// Line and Column (in bytes) locate a JSON syntax error, both
	// counted from 1; 0 when the error is of another kind, or its place
	// is not known.
	Line, Column int
	// Err is the problem.
	Err error
}

// Error returns "<file>: entry <n>: <problem>", where n is Index+1 (the
// first entry is entry 1), or "<file>: <problem>" when Index is -1; a
// syntax error's line and column come before the problem: "<file>: entry
// <n>: line <l>, column <c>: <problem>".
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
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d, column %d: ", e.Line, e.Column)
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns e.Err.
func (e *CatalogError) Unwrap() error { return e.Err }

// ParseCatalog reads a catalog file from r: a JSON array of objects
// {"id": string, "name": string, "tag": string, "readers": [string]}.
//
// id and tag are optional strings (absent or null: none); an explicit id
// is non-empty, and an entry without one gets [GeneratedID] of its
// position. name and readers are required. Unknown fields, repeated
// fields, wrong JSON types and a null name or readers are errors, and so
// is any entry that breaks the catalog rules of [CatalogBuilder], so that
// both stores accept the same files.
//
// The array is decoded one entry at a time, each straight into the
// catalog. Every error is a [*CatalogError] naming name, the entry and the
// problem; when r is an [io.Seeker] (a file), an error of JSON syntax also
// names its line and column, which r is read again to find.
func ParseCatalog(r io.Reader, name string) (*Catalog, error) {
	fail := func(index int, err error) error {
		return &CatalogError{File: name, Index: index, Err: err}
	}
	var start int64 = -1 // where r started, when it can be read again
	rs, seeks := r.(io.ReadSeeker)
	if seeks {
		if off, err := rs.Seek(0, io.SeekCurrent); err == nil {
			start = off
		}
	}
	dec := json.NewDecoder(r)
	// syntax is the CatalogError of the JSON syntax error err, met by the
	// decoding of entry index (-1 outside an entry).
	syntax := func(index int, err error) error {
		var syn *json.SyntaxError
		if !errors.As(err, &syn) {
			return fail(index, jsonProblem(err))
		}
		ce := &CatalogError{File: name, Index: index, Err: jsonProblem(err)}
		if index >= 0 && closesArray(dec.Buffered()) {
			// The decoder took the comma for the start of another
			// entry, which the file does not have.
			ce.Index, ce.Err = -1, errors.New("a comma after the last entry; JSON allows none")
		}
		if start < 0 {
			return ce
		}
		at, ok := locate(rs, start)
		if !ok {
			return ce
		}
		ce.Line, ce.Column = at.line, at.column
		switch {
		case ce.Index < 0 && ce.Err != nil && index >= 0:
			// The comma after the last entry, said above.
		case at.afterComma && (at.c == ']' || at.c == '}'):
			ce.Err = fmt.Errorf("a comma before the closing '%c'; JSON allows none after the last item", at.c)
		default:
			ce.Err = jsonProblem(at.err) // the message of the byte located
		}
		return ce
	}
	tok, err := dec.Token()
	switch {
	case errors.Is(err, io.EOF):
		return nil, fail(-1, errors.New("empty file; want a JSON array"))
	case err != nil:
		return nil, syntax(-1, err)
	case tok != json.Delim('['):
		return nil, fail(-1, errors.New("not a JSON array"))
	}
	var (
		b   = NewCatalogBuilder(0, 0)
		raw json.RawMessage
		e   fileEntry
	)
	for i := 0; dec.More(); i++ {
		if err := dec.Decode(&raw); err != nil {
			return nil, syntax(i, err)
		}
		if err := e.parse(raw); err != nil {
			return nil, fail(i, err)
		}
		if e.hasID {
			err = b.Add(e.id, e.name, e.tag, e.readers)
		} else {
			err = b.AddWithoutID(e.name, e.tag, e.readers)
		}
		if err != nil {
			return nil, fail(i, err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing ']'
		return nil, syntax(-1, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fail(-1, errors.New("data after the JSON array"))
	}
	c, err := b.Catalog()
	var ce *CatalogError
	if errors.As(err, &ce) {
		ce.File = name
	}
	return c, err
}

// jsonProblem turns an error of the JSON decoder into a problem statement
// for a CatalogError.
func jsonProblem(err error) error {
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("invalid JSON: %s", strings.TrimPrefix(syn.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errors.New("unexpected end of file; the JSON array is not closed")
	}
	return fmt.Errorf("read: %w", err)
}

// closesArray reports whether the first byte of r that is not white space
// is ']'.
func closesArray(r io.Reader) bool {
	br := bufio.NewReader(r)
	for {
		c, err := br.ReadByte()
		switch {
		case err != nil:
			return false
		case c != ' ' && c != '\t' && c != '\n' && c != '\r':
			return c == ']'
		}
	}
}

// syntaxAt is where a JSON syntax error lies.
type syntaxAt struct {
	err          *json.SyntaxError // as a decoder of the whole input reports it
	line, column int               // of the byte at fault, from 1
	c            byte              // the byte at fault
	afterComma   bool              // the last byte before c but white space is a comma
}

// locate reads rs again from start, up to the first JSON syntax error,
// and says where it lies. The decoder that parses a catalog entry by
// entry reports offsets that leave out what it read between entries,
// so the input is scanned anew as one value, which counts every byte.
// It reports false when rs cannot be read again or holds no syntax error.
func locate(rs io.ReadSeeker, start int64) (syntaxAt, bool) {
	var at syntaxAt
	if _, err := rs.Seek(start, io.SeekStart); err != nil {
		return at, false
	}
	err := json.NewDecoder(rs).Decode(new(json.RawMessage))
	if !errors.As(err, &at.err) || at.err.Offset < 1 {
		return at, false
	}
	if _, err := rs.Seek(start, io.SeekStart); err != nil {
		return at, false
	}
	// The byte at fault is the last of the Offset bytes the decoder read.
	at.line, at.column = 1, 1
	prev := byte(0)
	br := bufio.NewReader(io.LimitReader(rs, at.err.Offset))
	for off := int64(0); ; off++ {
		c, err := br.ReadByte()
		if err != nil {
			return at, false
		}
		if off == at.err.Offset-1 {
			at.c, at.afterComma = c, prev == ','

			return at, true
		}
		if c == '\n' {
			at.line, at.column = at.line+1, 1
		} else {
			at.column++
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			prev = c
		}
	}
}

// NewCatalog returns a Catalog of the given plants, by the rules of
// [CatalogBuilder]; a plant with an empty ID gets [GeneratedID] of its
// position in ps. ps is not modified. Errors are [*CatalogError] with an
// empty File.
func NewCatalog(ps []Plant) (*Catalog, error) {
	b := NewCatalogBuilder(len(ps), 0)
	var (
		buf     []byte
		readers [][]byte
	)
	for i, p := range ps {
		// One buffer holds the plant's strings as bytes: a slice taken
		// before it grows keeps pointing at what it was given.
		buf = append(append(append(buf[:0], p.ID...), p.Name...), p.Tag...)
		id, name, tag := buf[:len(p.ID)], buf[len(p.ID):len(p.ID)+len(p.Name)], buf[len(p.ID)+len(p.Name):]
		readers = readers[:0]
		for _, r := range p.Readers {
			start := len(buf)
			buf = append(buf, r...)
			readers = append(readers, buf[start:])
		}
		var err error
		if p.ID == "" {
			err = b.AddWithoutID(name, tag, readers)
		} else {
			err = b.Add(id, name, tag, readers)
		}
		if err != nil {
			return nil, &CatalogError{Index: i, Err: err}
		}
	}
	return b.Catalog()
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

// A fileEntry is one entry of a catalog file, decoded by parse. Its
// slices point into the raw entry or into buf, and are valid until the
// next parse.
type fileEntry struct {
	id, name, tag []byte
	hasID         bool
	readers       [][]byte
	buf           []byte // the strings that held escapes, decoded
}

// parse decodes one catalog entry, checking its shape: an object of the
// four known fields, each at most once, of the right JSON types, with a
// name and readers. raw is one complete, syntactically valid JSON value
// (the decoder checked it), which is why this parser only has to tell
// types apart and never has to skip a value: the first value of a wrong
// type ends the entry with an error. The catalog rules are left to the
// CatalogBuilder.
func (e *fileEntry) parse(raw []byte) error {
	*e = fileEntry{readers: e.readers[:0], buf: e.buf[:0]}
	var seen [4]bool // id, name, tag, readers
	s := entryScanner{b: raw, buf: &e.buf}
	if s.next() != '{' {
		return fmt.Errorf("entry is %s; want an object", s.kind())
	}
	s.i++
	if s.next() == '}' {
		return errors.New(`"name" is missing`)
	}
	for {
		key, err := s.str()
		if err != nil {
			return err
		}
		field := -1
		switch string(key) {
		case "id":
			field = 0
		case "name":
			field = 1
		case "tag":
			field = 2
		case "readers":
			field = 3
		default:
			return fmt.Errorf("unknown field %q", key)
		}
		if seen[field] {
			return fmt.Errorf("field %q appears twice", key)
		}
		seen[field] = true
		s.next() // ':'
		s.i++
		switch c := s.next(); {
		case c == 'n':
			s.i += len("null")
			if field == 1 || field == 3 {
				return fmt.Errorf("%q is null", key)
			}
		case field == 3:
			if c != '[' {
				return fmt.Errorf(`"readers" is %s; want an array of strings`, s.kind())
			}
			s.i++
			for s.next() != ']' {
				if s.next() != '"' {
					return fmt.Errorf(`"readers" item %d is %s; want a string`, len(e.readers)+1, s.kind())
				}
				r, err := s.str()
				if err != nil {
					return err
				}
				e.readers = append(e.readers, r)
				if s.next() == ',' {
					s.i++
				}
			}
			s.i++
		default:
			if c != '"' {
				return fmt.Errorf("%q is %s; want a string", key, s.kind())
			}
			v, err := s.str()
			if err != nil {
				return err
			}
			switch field {
			case 0:
				if len(v) == 0 {
					return errors.New(`"id" is empty; omit it to have one generated`)
				}
				e.id, e.hasID = v, true
			case 1:
				e.name = v
			case 2:
				e.tag = v
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
		return errors.New(`"name" is missing`)
	case !seen[3]:
		return errors.New(`"readers" is missing`)
	}
	return nil
}

// entryScanner walks a syntactically valid JSON value.
type entryScanner struct {
	b   []byte
	i   int
	buf *[]byte // where strings with escapes are decoded to
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

// str decodes the JSON string at the current position and moves past it.
// A string without escapes is returned as the part of the entry it is;
// one with escapes is decoded into s.buf, after a check that its bytes are
// UTF-8 (the decoder would replace what is not).
func (s *entryScanner) str() ([]byte, error) {
	start := s.i
	s.i++
	escaped := false
	for s.i < len(s.b) && s.b[s.i] != '"' {
		if s.b[s.i] == '\\' {
			escaped = true
			s.i++
		}
		s.i++
	}
	s.i++
	q := s.b[start:min(s.i, len(s.b))]
	body := q[1 : len(q)-1]
	if !escaped {
		return body, nil
	}
	if !utf8.Valid(body) {
		return nil, errors.New("a string is not valid UTF-8")
	}
	var v string
	if err := json.Unmarshal(q, &v); err != nil {
		return nil, fmt.Errorf("decode string: %w", err)
	}
	start = len(*s.buf)
	*s.buf = append(*s.buf, v...)
	return (*s.buf)[start:], nil
}
