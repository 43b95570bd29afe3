package issuers

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/observability/setting"
)

// An entry is one issuer of an issuers file, as written: its name, its
// Config and where its keys come from, each setting under its own yaml
// key (the Config's and the KeySource's, inline), so that a setting added
// to either is a key of the file with nothing more to do here.
type entry struct {
	// Name qualifies the issuer's callers: 1 to 32 of [a-z0-9-], unique.
	Name string `yaml:"name"`
	// Config is the issuer's policy; a setting left out is the defaults'.
	auth.Config `yaml:",inline"`
	// KeySource is where the keys come from; at most one may be set, and
	// none means OIDC discovery of the issuer.
	keys.KeySource `yaml:",inline"`
}

// readFile decodes an issuers file, strictly (no unknown key, no repeated
// key, a value of each setting's kind), each issuer onto a copy of
// defaults, and indexes the lines of its issuers.
func readFile(path string, defaults auth.Config) ([]entry, fileIndex, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the message names the file already
		}
		return nil, fileIndex{}, &setting.Error{File: path, Err: err}
	}
	if err := checkRoot(path, data); err != nil {
		return nil, fileIndex{}, err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fileIndex{}, yamlError(path, err)
	}
	x := newFileIndex(&root, defaults)
	if err := x.checkText(path); err != nil {
		return nil, fileIndex{}, err
	}
	var doc struct {
		Issuers []entry `yaml:"issuers"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fileIndex{}, yamlError(path, err)
	}
	// The strict decoding found nothing wrong: each issuer again, onto the
	// defaults.
	entries := make([]entry, len(x.nodes))
	for i, n := range x.nodes {
		entries[i] = entry{Config: defaults}
		if err := n.Decode(&entries[i]); err != nil {
			return nil, fileIndex{}, yamlError(path, err)
		}
	}
	return entries, x, nil
}

// configKeys are the fields of auth.Config by their yaml key.
var configKeys = func() map[string]int {
	m := map[string]int{}
	for i, f := range reflect.VisibleFields(reflect.TypeFor[auth.Config]()) {
		if key, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); key != "" {
			m[key] = i
		}
	}
	return m
}()

// textValue returns the value of the Config setting key when it is read
// from text (an encoding.TextUnmarshaler, such as a binding mode), and
// false for any other.
func textValue(key string) (encoding.TextUnmarshaler, bool) {
	i, ok := configKeys[key]
	if !ok {
		return nil, false
	}
	v := reflect.New(reflect.TypeFor[auth.Config]()).Elem().Field(i).Addr().Interface()
	u, ok := v.(encoding.TextUnmarshaler)
	return u, ok
}

// checkRoot refuses a file whose top level is not a mapping with the key
// issuers, in words rather than as the decoder's types: a list of issuers
// or one issuer's keys without "issuers:" above them is the likely slip.
// What does not parse is left to the decoder, which names the line.
func checkRoot(path string, data []byte) error {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return nil
	}
	top := root.Content[0]
	const want = `want "issuers:" at the top, with the issuers as a list under it`
	switch {
	case top.Kind == yaml.SequenceNode:
		return &setting.Error{File: path, Line: top.Line, Err: errors.New("the file is a list; " + want)}
	case top.Kind != yaml.MappingNode:
		return &setting.Error{File: path, Line: top.Line, Err: errors.New("the file is not a mapping; " + want)}
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value == "issuers" {
			return nil
		}
	}
	return &setting.Error{File: path, Line: top.Line, Err: fmt.Errorf("no key \"issuers\" (the file starts with %q); %s", top.Content[0].Value, want)}
}

// yamlType matches the YAML decoder's message for a value of the wrong
// kind, which names Go types; yamlKinds and goTypes put it in the file's
// words.
var yamlType = regexp.MustCompile("^cannot unmarshal !!(\\w+)( `[^`]*`)? into (.+)$")

var (
	yamlKinds = map[string]string{"seq": "a list", "map": "a mapping", "str": "the string", "int": "the number", "float": "the number", "bool": "the boolean", "null": "null"}
	goTypes   = map[string]string{
		"[]issuers.entry": "a list of issuers", "issuers.entry": "an issuer (a mapping of its settings)",
		"[]string": "a list of strings", "string": "a string", "time.Duration": "a duration with its unit (30s, 1h)",
		"auth.BindingMode": "a mode (off, optional or required)",
		"[]auth.ClaimRule": "a list of claim rules ({path: P, equals: V}, ...)", "auth.ClaimRule": "a claim rule (a mapping: path and one of equals, one_of, exists and prefix)",
		"bool": "true or false",
	}
)

// yamlLine matches the line prefix of the YAML decoder's messages.
var yamlLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// yamlError turns an error of the YAML decoder into a *setting.Error at the
// line it names, in this file's words.
func yamlError(path string, err error) error {
	if errors.Is(err, io.EOF) {
		return &setting.Error{File: path, Err: errors.New(`empty file: want "issuers:" with at least one issuer`)}
	}
	var te *yaml.TypeError
	msgs := []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	m := yamlLine.FindStringSubmatch(strings.TrimSpace(msgs[0]))
	if m == nil {
		if m2 := regexp.MustCompile(`line (\d+)`).FindStringSubmatch(msgs[0]); m2 != nil {
			n, _ := strconv.Atoi(m2[1])
			return &setting.Error{File: path, Line: n, Err: errors.New(strings.TrimSpace(msgs[0]))}
		}
		return &setting.Error{File: path, Err: errors.New(msgs[0])}
	}
	n, _ := strconv.Atoi(m[1])
	msg := m[2]
	if f, ok := strings.CutPrefix(msg, "field "); ok {
		if name, _, ok := strings.Cut(f, " not found in type"); ok {
			msg = fmt.Sprintf("unknown key %q", name)
		}
	}
	if t := yamlType.FindStringSubmatch(msg); t != nil {
		msg = fmt.Sprintf("%s%s where %s belongs", yamlKinds[t[1]], t[2], goTypes[t[3]])
		if yamlKinds[t[1]] == "" || goTypes[t[3]] == "" {
			msg = "a value of the wrong kind"
		}
	}
	switch {
	case len(msgs) == 2:
		msg += " (and 1 more problem)"
	case len(msgs) > 2:
		msg += fmt.Sprintf(" (and %d more problems)", len(msgs)-1)
	}
	return &setting.Error{File: path, Line: n, Err: errors.New(msg)}
}

// fileIndex finds the lines of an issuers file's issuers and of their
// settings, by the issuer's position in the file or by its name, and
// tells which settings an issuer took from the defaults.
type fileIndex struct {
	nodes    []*yaml.Node // the mapping node of each issuer
	defaults auth.Config
}

func newFileIndex(root *yaml.Node, defaults auth.Config) fileIndex {
	x := fileIndex{defaults: defaults}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return x
	}
	top := root.Content[0].Content
	for i := 0; i+1 < len(top); i += 2 {
		if top[i].Value == "issuers" && top[i+1].Kind == yaml.SequenceNode {
			x.nodes = top[i+1].Content
		}
	}
	return x
}

// checkText reads every setting read from text (a binding mode) first,
// so that a value it refuses is placed at its line, which the YAML
// decoder would not say.
func (x fileIndex) checkText(path string) error {
	for i, n := range x.nodes {
		if n.Kind != yaml.MappingNode {
			continue
		}
		for k := 0; k+1 < len(n.Content); k += 2 {
			key, value := n.Content[k], n.Content[k+1]
			u, ok := textValue(key.Value)
			if !ok || value.Kind != yaml.ScalarNode {
				continue
			}
			if err := u.UnmarshalText([]byte(value.Value)); err != nil {
				return &setting.Error{File: path, Line: key.Line, Issuer: x.name(i), Key: key.Value, Err: err}
			}
		}
	}
	return nil
}

// issuers returns the issuers of the entries, before their keys are open:
// each with a name of its own and at most one key source, and all of them
// checked as Verifier.SetIssuers checks them. The errors of what the file
// says are placed at their lines.
func (x fileIndex) issuers(path string, entries []entry) ([]auth.Issuer, error) {
	at := func(i int, e *setting.Error) error {
		e.File, e.Line = path, x.key(i, e.Key)
		if e.Line == 0 {
			e.Line = x.issuer(i)
		}
		return e
	}
	first := map[string]int{}
	for i, e := range entries {
		if e.Name == "" {
			return nil, at(i, setting.Errorf("name", "no name: each issuer of the file has one"))
		}
		if err := auth.CheckIssuerName(e.Name); err != nil {
			return nil, at(i, &setting.Error{Key: "name", Err: err})
		}
		if j, dup := first[e.Name]; dup {
			return nil, at(i, setting.Errorf("name", "issuer name %q appears twice (first at line %d)", e.Name, x.key(j, "name")))
		}
		first[e.Name] = i
	}
	out := make([]auth.Issuer, len(entries))
	for i, e := range entries {
		// The second of the sources named is at fault: a key or secret
		// file, never the JWKS URL, which comes first.
		switch named := e.KeySource.Named(); {
		case len(named) < 2:
		case named[1] == "key_file":
			return nil, at(i, issuerError(e.Name, "key_file", "set at most one of %s", andList(keys.KeySources())))
		default:
			return nil, at(i, issuerError(e.Name, "hmac_secret_file", "set at most one of %s", andList(keys.KeySources())))
		}
		out[i] = auth.Issuer{Name: e.Name, Config: e.Config}
	}
	checked, err := auth.CheckIssuers(out...)
	if err != nil {
		return nil, x.explain(path, err)
	}
	return checked, nil
}

// issuerError returns the *setting.Error of the setting key of the issuer
// named name.
func issuerError(name, key, format string, a ...any) *setting.Error {
	e := setting.Errorf(key, format, a...)
	e.Issuer = name
	return e
}

// andList joins items as "a, b and c".
func andList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// issuer returns the line of issuer i, 0 when unknown.
func (x fileIndex) issuer(i int) int {
	if i < 0 || i >= len(x.nodes) {
		return 0
	}
	return x.nodes[i].Line
}

// key returns the line of key in issuer i, 0 when it has none.
func (x fileIndex) key(i int, key string) int {
	if i < 0 || i >= len(x.nodes) {
		return 0
	}
	c := x.nodes[i].Content
	for k := 0; k+1 < len(c); k += 2 {
		if c[k].Value == key {
			return c[k].Line
		}
	}
	return 0
}

// name returns the name issuer i gives itself, "" for none.
func (x fileIndex) name(i int) string {
	c := x.nodes[i].Content
	for k := 0; k+1 < len(c); k += 2 {
		if c[k].Value == "name" {
			return c[k+1].Value
		}
	}
	return ""
}

// named returns the position of the issuer named name, -1 for none.
func (x fileIndex) named(name string) int {
	for i := range x.nodes {
		if x.name(i) == name {
			return i
		}
	}
	return -1
}

// inherited reports whether issuer i took the Config setting key from
// the defaults: it leaves it out, and the defaults set it.
func (x fileIndex) inherited(i int, key string) bool {
	f, ok := configKeys[key]
	return ok && x.key(i, key) == 0 && !reflect.ValueOf(x.defaults).Field(f).IsZero()
}

// explain places err, when it is a *setting.Error of one of the file's
// issuers (which it names), at the line of the setting at fault, or else
// of its issuer, and the list's own settings at the file. An error of a
// setting that is no issuer's, or of one the issuer took from the
// defaults, is not the file's: it is returned as it is, for the caller to
// name its flag.
func (x fileIndex) explain(path string, err error) error {
	var se *setting.Error
	if !errors.As(err, &se) || se.File != "" {
		return err
	}
	placed := *se
	placed.File = path
	i := x.named(se.Issuer)
	switch {
	case se.Issuer == "" && se.Key == "issuers":
		return &placed
	case se.Issuer == "" || i < 0, x.inherited(i, se.Key):
		return err
	}
	if placed.Line = x.key(i, se.Key); placed.Line == 0 {
		placed.Line = x.issuer(i)
	}
	var rule *auth.ClaimRuleError
	if errors.As(se.Err, &rule) {
		if line := x.item(i, se.Key, rule.Index); line != 0 {
			placed.Line = line
		}
	}
	return &placed
}

// item returns the line of item n of the list at key in issuer i, 0 when
// there is none.
func (x fileIndex) item(i int, key string, n int) int {
	c := x.nodes[i].Content
	for k := 0; k+1 < len(c); k += 2 {
		if c[k].Value == key && c[k+1].Kind == yaml.SequenceNode && n >= 0 && n < len(c[k+1].Content) {
			return c[k+1].Content[n].Line
		}
	}
	return 0
}
