package plants_test

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/plants"
)

func TestParseCatalogErrors(t *testing.T) {
	const ok = `{"name":"Basil","readers":["*"]}`
	tests := []struct {
		name    string
		in      string
		index   int
		problem string // a substring of the problem
	}{
		{"empty file", ``, -1, "empty file"},
		{"white space only", " \n\t", -1, "empty file"},
		{"not JSON", `plants`, -1, "invalid JSON"},
		{"object", `{"name":"Basil"}`, -1, "not a JSON array"},
		{"null", `null`, -1, "not a JSON array"},
		{"string", `"x"`, -1, "not a JSON array"},
		{"trailing data", `[]x`, -1, "data after the JSON array"},
		{"second array", `[] []`, -1, "data after the JSON array"},
		{"unclosed array", `[` + ok, -1, "not closed"},
		{"truncated entry", `[` + ok + `,{"name":"B`, 1, "unexpected end of file"},
		{"syntax error in entry", `[` + ok + `,{"name" "B"}]`, 1, `invalid JSON: invalid character '"' after object key`},
		{"comma after the last entry", `[` + ok + `,]`, -1, "a comma after the last entry; JSON allows none"},
		{"entry is a string", `["Basil"]`, 0, "entry is a string; want an object"},
		{"entry is null", `[` + ok + `,null]`, 1, "entry is null; want an object"},
		{"entry is an array", `[[]]`, 0, "entry is an array"},
		{"empty object", `[{}]`, 0, `"name" is missing`},
		{"name missing", `[{"readers":["*"]}]`, 0, `"name" is missing`},
		{"name empty", `[{"name":"","readers":["*"]}]`, 0, `"name" is empty`},
		{"name null", `[{"name":null,"readers":["*"]}]`, 0, `"name" is null`},
		{"name number", `[{"name":1,"readers":["*"]}]`, 0, `"name" is a number; want a string`},
		{"name object", `[{"name":{},"readers":["*"]}]`, 0, `"name" is an object`},
		{"name bool", `[{"name":true,"readers":["*"]}]`, 0, `"name" is a boolean`},
		{"name NUL", `[{"name":"a\u0000b","readers":["*"]}]`, 0, `"name" contains U+0000`},
		{"reader NUL after a list its bytes would join to", `[{"name":"a","readers":["user:a","user:b"]},{"name":"b","readers":["user:a\u0000user:b"]}]`, 1, `contains U+0000`},
		{"reader NUL at the end of a reader", `[{"name":"a","readers":["user:a\u0000"]},{"name":"b","readers":["user:a","user:b"]},{"name":"c","readers":["user:a\u0000","user:b"]}]`, 0, `contains U+0000`},
		{"name invalid UTF-8", "[{\"name\":\"a\xffb\",\"readers\":[\"*\"]}]", 0, "not valid UTF-8"},
		{"name twice", `[{"name":"a","name":"b","readers":["*"]}]`, 0, `field "name" appears twice`},
		{"name case", `[{"Name":"a","readers":["*"]}]`, 0, `unknown field "Name"`},
		{"unknown field", `[` + ok + `,{"name":"a","readers":["*"],"owner":"x"}]`, 1, `unknown field "owner"`},
		{"tag number", `[{"name":"a","tag":3,"readers":["*"]}]`, 0, `"tag" is a number`},
		{"tag twice", `[{"name":"a","tag":"x","tag":null,"readers":["*"]}]`, 0, `field "tag" appears twice`},
		{"id number", `[{"id":7,"name":"a","readers":["*"]}]`, 0, `"id" is a number`},
		{"id empty", `[{"id":"","name":"a","readers":["*"]}]`, 0, `"id" is empty`},
		{"readers missing", `[{"name":"a"}]`, 0, `"readers" is missing`},
		{"readers null", `[{"name":"a","readers":null}]`, 0, `"readers" is null`},
		{"readers empty", `[{"name":"a","readers":[]}]`, 0, `"readers" is empty`},
		{"readers string", `[{"name":"a","readers":"*"}]`, 0, `"readers" is a string; want an array`},
		{"reader number", `[{"name":"a","readers":["*",1]}]`, 0, `"readers" item 2 is a number`},
		{"reader null", `[{"name":"a","readers":[null]}]`, 0, `"readers" item 1 is null`},
		{"reader empty", `[{"name":"a","readers":[""]}]`, 0, `"readers" item 1 is not`},
		{"reader user without name", `[{"name":"a","readers":["user:"]}]`, 0, `"readers" item 1 is not`},
		{"reader group without name", `[{"name":"a","readers":["*","group:"]}]`, 0, `"readers" item 2 is not`},
		{"reader other kind", `[{"name":"a","readers":["role:admin"]}]`, 0, `"readers" item 1 is not`},
		{"reader all", `[{"name":"a","readers":["all"]}]`, 0, `"readers" item 1 is not`},
		{"reader qualified by a bad issuer name", `[{"name":"a","readers":["*","user@Staff:alice"]}]`, 0, `"readers" item 2 is not`},
		{"reader qualified by an empty issuer name", `[{"name":"a","readers":["group@:g"]}]`, 0, `"readers" item 1 is not`},
		{"star qualified by nothing", `[{"name":"a","readers":["*@"]}]`, 0, `"readers" item 1 is not`},
		{"qualified user without name", `[{"name":"a","readers":["user@staff:"]}]`, 0, `"readers" item 1 is not`},
		{"issuer name too long", `[{"name":"a","readers":["*@abcdefghijklmnopqrstuvwxyz0123456"]}]`, 0, `"readers" item 1 is not`},
		{"readers twice", `[{"name":"a","readers":["*"],"readers":["*"]}]`, 0, `field "readers" appears twice`},
		{"duplicate id", `[{"id":"x","name":"a","readers":["*"]},` + ok + `,{"id":"x","name":"b","readers":["*"]}]`, 2, `id "x" is also the id of entry 1`},
		{"explicit id takes a later generated one", `[{"id":"0000000001","name":"a","readers":["*"]},` + ok + `]`, 1, `generated id "0000000001" is the id of entry 1`},
		{"explicit id repeats an earlier generated one", `[` + ok + `,{"id":"0000000000","name":"a","readers":["*"]}]`, 1, `id "0000000000" is also the id of entry 1`},
		{"later entry", `[` + ok + `,` + ok + `,` + ok + `,{"name":"a","readers":["nobody"]}]`, 3, `"readers" item 1 is not`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := plants.ParseCatalog(strings.NewReader(tt.in), "plants.json")
			var ce *plants.CatalogError
			if !errors.As(err, &ce) {
				t.Fatalf("ParseCatalog(%q) = %v, %v; want a *CatalogError", tt.in, c, err)
			}
			if ce.File != "plants.json" || ce.Index != tt.index || !strings.Contains(ce.Err.Error(), tt.problem) {
				t.Errorf("ParseCatalog(%q) error = {File: %q, Index: %d, Err: %q}; want {plants.json, %d, ...%q...}",
					tt.in, ce.File, ce.Index, ce.Err, tt.index, tt.problem)
			}
			prefix := "plants.json: "
			if tt.index >= 0 {
				prefix += "entry " + strconv.Itoa(tt.index+1) + ": " // people count from 1
			}
			if got := err.Error(); !strings.HasPrefix(got, prefix) {
				t.Errorf("ParseCatalog(%q) error = %q; want prefix %q", tt.in, got, prefix)
			}
			if errors.Unwrap(err) != ce.Err {
				t.Errorf("Unwrap() = %v; want %v", errors.Unwrap(err), ce.Err)
			}
		})
	}
}

// TestParseCatalogSyntaxPlace checks that a JSON syntax error names the
// line and column of the byte at fault, and a comma after the last entry
// names no entry, since there is none after it; a reader that cannot be
// read again gets the same problem without the place.
func TestParseCatalogSyntaxPlace(t *testing.T) {
	const ok = `{"id": "a", "name": "A", "readers": ["*"]}`
	tests := []struct {
		name         string
		in           string
		index        int
		line, column int
		want         string // the error, without the place when not seekable
	}{
		{"a comma after the only entry", "[\n  " + ok + ",\n]\n", -1, 3, 1,
			"plants.json: line 3, column 1: a comma after the last entry; JSON allows none"},
		{"a comma after the third entry", "[\n  " + ok + ",\n  {\"name\": \"B\", \"readers\": [\"*\"]},\n  {\"name\": \"C\", \"readers\": [\"*\"]},\n  ]", -1, 5, 3,
			"plants.json: line 5, column 3: a comma after the last entry; JSON allows none"},
		{"a quote missing in entry 2", "[\n  " + ok + ",\n  {\"name\": B\", \"readers\": [\"*\"]}\n]", 1, 3, 12,
			"plants.json: entry 2: line 3, column 12: invalid JSON: invalid character 'B' looking for beginning of value"},
		{"a comma after the last reader", "[\n  {\"name\": \"A\",\n   \"readers\": [\"*\", ]}\n]", 0, 3, 21,
			"plants.json: entry 1: line 3, column 21: a comma before the closing ']'; JSON allows none after the last item"},
		{"a comma after the last field", "[{\"name\": \"A\", \"readers\": [\"*\"],}]", 0, 1, 33,
			"plants.json: entry 1: line 1, column 33: a comma before the closing '}'; JSON allows none after the last item"},
		{"not JSON", "\n\n  plants", -1, 3, 3, "plants.json: line 3, column 3: invalid JSON: invalid character 'p' looking for beginning of value"},
		{"a colon for a comma between entries", "[" + ok + ":" + ok + "]", 1, 1, 44, "plants.json: entry 2: line 1, column 44: invalid JSON: invalid character ':' after array element"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := plants.ParseCatalog(strings.NewReader(tt.in), "plants.json")
			var ce *plants.CatalogError
			if !errors.As(err, &ce) || ce.Index != tt.index || ce.Line != tt.line || ce.Column != tt.column || err.Error() != tt.want {
				t.Fatalf("ParseCatalog(%q) = %v (%+v); want index %d, line %d, column %d: %q", tt.in, err, ce, tt.index, tt.line, tt.column, tt.want)
			}
			// A reader that cannot be read again: the same entry and kind of
			// problem, with no place.
			_, err = plants.ParseCatalog(onlyReader{strings.NewReader(tt.in)}, "plants.json")
			prefix, problem := "plants.json: ", "invalid JSON: "
			if tt.index >= 0 {
				prefix += fmt.Sprintf("entry %d: ", tt.index+1)
			}
			if strings.Contains(tt.want, "after the last entry") {
				problem = "a comma after the last entry"
			}
			if !errors.As(err, &ce) || ce.Index != tt.index || ce.Line != 0 || !strings.HasPrefix(err.Error(), prefix+problem) {
				t.Errorf("ParseCatalog(not seekable %q) = %v; want index %d, no line, %q", tt.in, err, tt.index, prefix+problem)
			}
		})
	}
}

// onlyReader hides every method of a reader but Read.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestParseCatalogAccepts(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []plants.Plant // nil: the input must be refused
	}{
		{"empty array", `[]`, []plants.Plant{}},
		{
			"readers qualified by issuer names",
			`[{"id":"q","name":"q","readers":["*@staff","user@staff:alice","group@cust-1:g:x","user:a@b:c"]}]`,
			[]plants.Plant{{ID: "q", Name: "q", Readers: []string{"*@staff", "user@staff:alice", "group@cust-1:g:x", "user:a@b:c"}}},
		},
		{"white space around", " \n[ ]\n ", []plants.Plant{}},
		{
			"optional fields null or absent",
			`[{"id":null,"name":"b","tag":null,"readers":["*"]},{"name":"a","readers":["user:x"]}]`,
			[]plants.Plant{
				{ID: "0000000001", Name: "a", Readers: []string{"user:x"}},
				{ID: "0000000000", Name: "b", Readers: []string{"*"}},
			},
		},
		{
			"escapes and repeated readers",
			`[{"id":"\u00e9","name":"a\"b\\c\n","tag":"\ud83c\udf35","readers":["group:g","*","group:g"]}]`,
			[]plants.Plant{{ID: "é", Name: "a\"b\\c\n", Tag: "🌵", Readers: []string{"group:g", "*"}}},
		},
		{
			"reader lists that join to the same bytes",
			`[{"name":"a","readers":["user:ab"]},{"name":"b","readers":["user:a","group:b"]},{"name":"c","readers":["user:ab"]},{"name":"d","readers":["user:a"]},{"name":"e","readers":["group:b","user:a"]},{"name":"f","readers":["user:a","group:b"]}]`,
			[]plants.Plant{
				{ID: "0000000000", Name: "a", Readers: []string{"user:ab"}},
				{ID: "0000000001", Name: "b", Readers: []string{"user:a", "group:b"}},
				{ID: "0000000002", Name: "c", Readers: []string{"user:ab"}},
				{ID: "0000000003", Name: "d", Readers: []string{"user:a"}},
				{ID: "0000000004", Name: "e", Readers: []string{"group:b", "user:a"}},
				{ID: "0000000005", Name: "f", Readers: []string{"user:a", "group:b"}},
			},
		},
		{
			"fields in any order",
			`[{"readers":["*"],"tag":"t","name":"n","id":"i"}]`,
			[]plants.Plant{{ID: "i", Name: "n", Tag: "t", Readers: []string{"*"}}},
		},
		{
			"ties by id, generated ids by position",
			`[{"name":"m","readers":["*"]},{"name":"m","readers":["*"]},{"id":"z","name":"m","readers":["*"]},{"id":"a","name":"m","readers":["*"]},
			  {"name":"B","readers":["*"]},{"name":"a","readers":["*"]},{"name":"é","readers":["*"]}]`,
			[]plants.Plant{
				{ID: "0000000004", Name: "B", Readers: []string{"*"}},
				{ID: "0000000005", Name: "a", Readers: []string{"*"}},
				{ID: "0000000000", Name: "m", Readers: []string{"*"}},
				{ID: "0000000001", Name: "m", Readers: []string{"*"}},
				{ID: "a", Name: "m", Readers: []string{"*"}},
				{ID: "z", Name: "m", Readers: []string{"*"}},
				{ID: "0000000006", Name: "é", Readers: []string{"*"}},
			},
		},
		{"refused: no readers", `[{"name":"a","readers":[]}]`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := plants.ParseCatalog(strings.NewReader(tt.in), "t.json")
			if tt.want == nil {
				if err == nil {
					t.Errorf("ParseCatalog(%q) = %+v, nil; want an error", tt.in, c.Plants())
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseCatalog(%q): %v", tt.in, err)
			}
			got := c.Plants()
			match := len(got) == len(tt.want) && c.Len() == len(got)
			for i := 0; match && i < len(got); i++ {
				match = samePlant(got[i], tt.want[i])
			}
			if !match {
				t.Errorf("ParseCatalog(%q) = %+v; want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func samePlant(a, b plants.Plant) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Tag == b.Tag && slices.Equal(a.Readers, b.Readers)
}

func TestGeneratedIDsSortByPosition(t *testing.T) {
	var b strings.Builder
	b.WriteString("[")
	for i := range 25 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"name":"same","readers":["*"]}`)
	}
	b.WriteString("]")
	c, err := plants.ParseCatalog(strings.NewReader(b.String()), "t.json")
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range c.Plants() {
		if want := plants.GeneratedID(i); p.ID != want {
			t.Errorf("plant %d has id %q; want %q", i, p.ID, want)
		}
	}
}

// TestGeneratedIDsCounted: a catalog knows how many of its plants had no
// id, which an import into a catalog that is not empty must refuse.
func TestGeneratedIDsCounted(t *testing.T) {
	for _, tt := range []struct {
		file string
		want int
	}{
		{`[]`, 0},
		{`[{"id": "a", "name": "A", "readers": ["*"]}]`, 0},
		{`[{"id": "a", "name": "A", "readers": ["*"]}, {"name": "B", "readers": ["*"]}, {"id": null, "name": "C", "readers": ["*"]}]`, 2},
	} {
		c, err := plants.ParseCatalog(strings.NewReader(tt.file), "t.json")
		if err != nil {
			t.Fatal(err)
		}
		if got := c.GeneratedIDs(); got != tt.want {
			t.Errorf("ParseCatalog(%s).GeneratedIDs() = %d; want %d", tt.file, got, tt.want)
		}
		again, err := plants.NewCatalog(c.Plants())
		if err != nil {
			t.Fatal(err)
		}
		if got := again.GeneratedIDs(); got != 0 {
			t.Errorf("NewCatalog of the plants of %s, ids filled in: GeneratedIDs() = %d; want 0", tt.file, got)
		}
	}
	c, err := plants.NewCatalog([]plants.Plant{{Name: "A", Readers: []string{"*"}}, {ID: "b", Name: "B", Readers: []string{"*"}}})
	if err != nil || c.GeneratedIDs() != 1 {
		t.Errorf("NewCatalog of one plant without an id: GeneratedIDs() = %d, %v; want 1", c.GeneratedIDs(), err)
	}
}

func TestLoadCatalogFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`[{"name":"a","readers":["*"]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := plants.LoadCatalogFile(good)
	if err != nil || c.Len() != 1 {
		t.Errorf("LoadCatalogFile(%q) = %v, %v; want 1 plant", good, c, err)
	}

	missing := filepath.Join(dir, "missing.json")
	_, err = plants.LoadCatalogFile(missing)
	var ce *plants.CatalogError
	if !errors.As(err, &ce) || ce.File != missing || ce.Index != -1 || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadCatalogFile(%q) = %v; want a file-level *CatalogError wrapping fs.ErrNotExist", missing, err)
	}
	if strings.Count(err.Error(), missing) != 1 {
		t.Errorf("error %q names the path %d times; want once", err, strings.Count(err.Error(), missing))
	}
}

func TestNewCatalog(t *testing.T) {
	c, err := plants.NewCatalog([]plants.Plant{
		{Name: "b", Readers: []string{"*"}},
		{ID: "x", Name: "a", Tag: "t", Readers: []string{"user:u", "user:u"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []plants.Plant{
		{ID: "x", Name: "a", Tag: "t", Readers: []string{"user:u"}},
		{ID: "0000000000", Name: "b", Readers: []string{"*"}},
	}
	if got := c.Plants(); len(got) != 2 || !samePlant(got[0], want[0]) || !samePlant(got[1], want[1]) {
		t.Errorf("NewCatalog(...).Plants() = %+v; want %+v", got, want)
	}

	_, err = plants.NewCatalog([]plants.Plant{{Name: "a", Readers: []string{"*"}}, {Name: "", Readers: []string{"*"}}})
	var ce *plants.CatalogError
	if !errors.As(err, &ce) || ce.Index != 1 {
		t.Errorf("NewCatalog with an empty name at 1 = %v; want a *CatalogError for entry 1", err)
	}
}
