package plants_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/plantstore/plantstore/plants"
)

// catalogEntry is a catalog entry as encoding/json reads it, for the
// oracle of FuzzParseCatalog.
type catalogEntry struct {
	ID      *string  `json:"id"`
	Name    string   `json:"name"`
	Tag     *string  `json:"tag"`
	Readers []string `json:"readers"`
}

// FuzzParseCatalog feeds any bytes to ParseCatalog. It must never panic.
// An error must be a *CatalogError naming the file, with an index of -1 or
// of an entry the input can hold. A catalog must hold exactly the entries
// encoding/json reads from the same bytes, each valid by the catalog rules,
// in the contract's order, with unique ids.
func FuzzParseCatalog(f *testing.F) {
	for _, seed := range []string{
		`[]`,
		`[{"name":"Aloe","readers":["*"]}]`,
		`[{"id":"m-1","name":"Monstera","tag":"aroid","readers":["group:gardeners","user:bob"]},{"name":"Aloe","tag":"succulent","readers":["*"]}]`,
		`[{"name":"B","readers":["*"]},{"name":"A","readers":["*"]},{"name":"A","id":"0","readers":["user:a","user:a"]}]`,
		`[{"name":"x","id":"0000000001","readers":["*"]},{"name":"y","readers":["*"]}]`,
		`[{"name":"\u00e9\ud83c\udf35","tag":null,"id":null,"readers":["group:\"q\""]}]`,
		`[{"name":"a","readers":["admins"]}]`,
		`[{"name":"","readers":["*"]}]`,
		`[{"name":"a","readers":[]}]`,
		`[{"name":"a","name":"b","readers":["*"]}]`,
		`[{"name":"a","readers":["*"],"extra":1}]`,
		`[{"name":"a\u0000","readers":["*"]}]`,
		"[{\"name\":\"\xff\",\"readers\":[\"*\"]}]",
		`[{"name":1,"readers":["*"]}]`,
		`[{"name":"a","readers":"*"}]`,
		`[{"name":"a","readers":[1]}]`,
		`[{"id":"","name":"a","readers":["*"]}]`,
		`[{"id":"a","name":"a","readers":["*"]},{"id":"a","name":"b","readers":["*"]}]`,
		`[null]`, `[[]]`, `[1]`, `{}`, `[`, `[{"name":"a","readers":["*"]}`, `[] []`, ``, ` `,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := plants.ParseCatalog(bytes.NewReader(data), "fuzz.json")
		if err != nil {
			var ce *plants.CatalogError
			if !errors.As(err, &ce) {
				t.Fatalf("ParseCatalog(%q) error %v (%T) is not a *CatalogError", data, err, err)
			}
			if ce.File != "fuzz.json" || ce.Err == nil {
				t.Fatalf("ParseCatalog(%q) error %+v; want File fuzz.json and a cause", data, ce)
			}
			// Every entry takes at least one byte and a separator.
			if ce.Index < -1 || ce.Index > len(data)/2 {
				t.Fatalf("ParseCatalog(%q) error index %d; want -1 or an entry of the input", data, ce.Index)
			}
			if err.Error() == "" {
				t.Fatalf("ParseCatalog(%q) error has no message", data)
			}
			return
		}
		var entries []catalogEntry
		dec := json.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&entries); err != nil {
			t.Fatalf("ParseCatalog(%q) accepted what encoding/json refuses: %v", data, err)
		}
		ps := c.Plants()
		if c.Len() != len(ps) || len(ps) != len(entries) {
			t.Fatalf("ParseCatalog(%q): Len %d, %d plants, want %d entries", data, c.Len(), len(ps), len(entries))
		}
		byID := map[string]plants.Plant{}
		for i, p := range ps {
			if err := validPlant(p); err != nil {
				t.Fatalf("ParseCatalog(%q) plant %d %+v: %v", data, i, p, err)
			}
			if _, dup := byID[p.ID]; dup {
				t.Fatalf("ParseCatalog(%q): id %q twice", data, p.ID)
			}
			byID[p.ID] = p
			if i > 0 {
				prev := ps[i-1]
				if prev.Name > p.Name || prev.Name == p.Name && prev.ID >= p.ID {
					t.Fatalf("ParseCatalog(%q): %q/%q before %q/%q, want name then id order", data, prev.Name, prev.ID, p.Name, p.ID)
				}
			}
		}
		for i, e := range entries {
			id := plants.GeneratedID(i)
			if e.ID != nil {
				id = *e.ID
			}
			p, ok := byID[id]
			if !ok {
				t.Fatalf("ParseCatalog(%q): no plant with id %q for entry %d", data, id, i)
			}
			tag := ""
			if e.Tag != nil {
				tag = *e.Tag
			}
			var readers []string
			for _, r := range e.Readers {
				if !slices.Contains(readers, r) {
					readers = append(readers, r)
				}
			}
			if p.Name != e.Name || p.Tag != tag || !slices.Equal(p.Readers, readers) {
				t.Fatalf("ParseCatalog(%q) entry %d = %+v; encoding/json reads %q %q %q", data, i, p, e.Name, tag, readers)
			}
		}
	})
}

// validPlant checks p by the catalog rules of the SPEC.
func validPlant(p plants.Plant) error {
	for _, s := range append([]string{p.ID, p.Name, p.Tag}, p.Readers...) {
		if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
			return fmt.Errorf("text %q is not valid UTF-8 without NUL", s)
		}
	}
	if p.ID == "" || p.Name == "" || len(p.Readers) == 0 {
		return errors.New("empty id, name or readers")
	}
	issuerName := regexp.MustCompile(`^[a-z0-9-]{1,32}$`)
	for i, r := range p.Readers {
		kind, rest, _ := strings.Cut(r, ":")
		base, name, qualified := strings.Cut(kind, "@")
		switch {
		case r == "*":
		case strings.HasPrefix(r, "*@"):
			if !issuerName.MatchString(r[2:]) {
				return fmt.Errorf("reader %q names no valid issuer", r)
			}
		case (base == "user" || base == "group") && rest != "" && (!qualified || issuerName.MatchString(name)):
		default:
			return fmt.Errorf("reader %q is not a principal", r)
		}
		if slices.Contains(p.Readers[:i], r) {
			return fmt.Errorf("reader %q twice", r)
		}
	}
	return nil
}
