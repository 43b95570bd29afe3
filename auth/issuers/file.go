// Package issuers builds the issuers a verifier checks tokens against
// from an issuers file (-jwt-issuers-file): it reads the file strictly,
// places every refusal at the file's line, opens each issuer's key source
// and keeps the sources of the issuers a reload leaves as they were.
package issuers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.yaml.in/yaml/v3"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/jws"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/observability/setting"
)

// Entry is one issuer of an issuers file, as written.
// Its fields are the settings of one issuer.
type Entry struct {
	// Name qualifies the issuer's callers: 1 to 32 of [a-z0-9-], unique.
	Name string `yaml:"name"`
	// Issuer is the exact iss of the issuer's tokens, and the issuer that
	// OIDC discovery reads when no key source is set.
	Issuer string `yaml:"issuer"`
	// KeySource is where the keys come from; at most one may be set.
	keys.KeySource `yaml:",inline"`
	// The rest is the issuer's Config; RequiredScope, DPoP, MTLS and the
	// four below, when left out, are those of [Options].Defaults.
	Audiences     []string `yaml:"audiences"`
	Algorithms    []string `yaml:"algorithms"`
	GroupsClaim   string   `yaml:"groups_claim"`
	RequiredScope string   `yaml:"required_scope"`
	DPoP          string   `yaml:"dpop"`
	MTLS          string   `yaml:"mtls"`
	// The tokens meant for this resource: TokenTypes, Clients,
	// MaxLifetime and MaxStale of the issuer's Config (durations as Go
	// durations, "1h").
	TokenTypes  []string      `yaml:"token_types"`
	Clients     []string      `yaml:"clients"`
	MaxLifetime time.Duration `yaml:"max_lifetime"`
	MaxStale    time.Duration `yaml:"max_stale"`
}

// Options are what the issuers of an issuers file share.
type Options struct {
	// Defaults are the settings of the issuers that leave them out: its
	// RequiredScope, DPoP, MTLS, TokenTypes, Clients, MaxLifetime and
	// MaxStale (the -jwt-* flags').
	Defaults auth.Config
	// Sources are the options of every issuer's key source; each issuer
	// adds its name, iss and algorithms.
	Sources keys.SourceOptions
	// Metrics records for every issuer, under its name; nil records
	// nothing.
	Metrics *auth.Metrics
}

// File is the issuers of an issuers file with their key sources
// open ([keys.OpenSource]). Use it from one goroutine (the service's main
// loop).
type File struct {
	path  string
	ctx   context.Context
	opts  Options
	built []builtIssuer
	index fileIndex
	loops sync.WaitGroup // every source ever opened
}

// builtIssuer is one issuer of the file, ready to verify.
type builtIssuer struct {
	cfg    Entry
	issuer auth.Issuer
	source *keys.Source
	trust  *jws.Trust // of source's keys, kept with it
}

// Load reads the issuers file at path, checks its issuers as
// [Verifier.SetIssuers] will (but for their keys), and opens each one's
// key source; the sources' loops run until ctx is done. Errors name the
// file and, when they concern one place, its line: a *[setting.Error]
// with its File set for what the file says (unknown keys, repeated names,
// a bad value) or a key file that cannot be read. A *setting.Error of a
// setting the file left to o (a required scope) is returned without a
// File, for the caller to name where that came from.
func Load(ctx context.Context, path string, o Options) (*File, error) {
	if o.Sources.Log == nil {
		o.Sources.Log = zap.NewNop()
	}
	f := &File{path: path, ctx: ctx, opts: o}
	cfgs, index, err := readIssuersFile(path)
	if err != nil {
		return nil, err
	}
	built, err := f.build(cfgs, &index, nil)
	if err != nil {
		return nil, err
	}
	f.built, f.index = built, index
	// Held until ctx is done, so that Wait also covers the loops of
	// issuers a reload adds later.
	f.loops.Add(1)
	go func() {
		<-ctx.Done()
		f.loops.Done()
	}()
	return f, nil
}

// Issuers returns the issuers to verify against.
func (f *File) Issuers() []auth.Issuer { return issuersOf(f.built) }

func issuersOf(built []builtIssuer) []auth.Issuer {
	out := make([]auth.Issuer, len(built))
	for i, b := range built {
		out[i] = b.issuer
	}
	return out
}

// Explain returns err, an error of [NewVerifier] or [Verifier.SetIssuers]
// for f's issuers, as a *setting.Error at the file's line of the setting
// at fault.
// An error of a setting that is no issuer's, or that an issuer took from
// the defaults, is returned as it is.
func (f *File) Explain(err error) error {
	return f.index.explain(f.path, err)
}

// Wait waits for the loops of f's key sources, once the context given to
// [Load] is done.
func (f *File) Wait() { f.loops.Wait() }

// Reload reads the file again. When it is good and apply accepts its
// issuers (apply is [Verifier.SetIssuers]), they serve from then on: an
// issuer whose key source (name, issuer and KeySource) did not change
// keeps it, with its keys (its files are read again), the others get new
// ones, and the sources of issuers that went away or changed are closed.
// On any error nothing changes: the last good issuers keep serving. It
// returns the names of the issuers added and removed.
func (f *File) Reload(apply func([]auth.Issuer) error) (added, removed []string, err error) {
	cfgs, index, err := readIssuersFile(f.path)
	if err != nil {
		return nil, nil, err
	}
	built, err := f.build(cfgs, &index, f.built)
	if err != nil {
		return nil, nil, err
	}
	if err := apply(issuersOf(built)); err != nil {
		f.closeNew(built, f.built)
		return nil, nil, index.explain(f.path, err)
	}
	f.closeNew(f.built, built)
	for _, b := range built {
		if !slices.ContainsFunc(f.built, b.named(b.cfg.Name)) {
			added = append(added, b.cfg.Name)
		}
	}
	for _, old := range f.built {
		if !slices.ContainsFunc(built, old.named(old.cfg.Name)) {
			removed = append(removed, old.cfg.Name)
		}
	}
	f.built, f.index = built, index
	return added, removed, nil
}

// named returns a test for an issuer named name.
func (builtIssuer) named(name string) func(builtIssuer) bool {
	return func(b builtIssuer) bool { return b.cfg.Name == name }
}

// closeNew closes the sources of built that others does not use, and
// drops the series of the issuers others does not name.
func (f *File) closeNew(built, others []builtIssuer) {
	for _, b := range built {
		if !slices.ContainsFunc(others, func(o builtIssuer) bool { return o.source == b.source }) {
			b.source.Close()
		}
		if !slices.ContainsFunc(others, b.named(b.cfg.Name)) {
			f.opts.Metrics.Forget(b.cfg.Name)
		}
	}
}

// build returns the issuers of cfgs, checked, with the key sources of old
// whose name, issuer and key source are the same (their files read
// again), and new ones for the others.
func (f *File) build(cfgs []Entry, index *fileIndex, old []builtIssuer) ([]builtIssuer, error) {
	issuers, err := index.issuers(f.path, cfgs, f.opts.Defaults)
	if err != nil {
		return nil, err
	}
	var built []builtIssuer
	for i, c := range cfgs {
		b := builtIssuer{cfg: c, issuer: issuers[i]}
		if j := slices.IndexFunc(old, func(o builtIssuer) bool {
			return o.cfg.Name == c.Name && o.cfg.Issuer == c.Issuer && o.cfg.KeySource == c.KeySource
		}); j >= 0 {
			b.source, b.trust = old[j].source, old[j].trust
			b.source.Reload()
		} else if b.source, err = keys.OpenSource(f.ctx, c.KeySource, f.sourceOptions(b.issuer)); err != nil {
			f.closeNew(built, old)
			return nil, index.sourceError(f.path, i, c.Name, err)
		} else {
			b.trust = jws.New(b.source.Keys())
		}
		b.issuer.JWS = b.trust
		if !slices.ContainsFunc(old, func(o builtIssuer) bool { return o.source == b.source }) {
			f.loops.Add(1)
			go func(done <-chan struct{}) {
				<-done
				f.loops.Done()
			}(b.source.Done())
		}
		built = append(built, b)
	}
	return built, nil
}

// sourceOptions are the options of the key source of is.
func (f *File) sourceOptions(is auth.Issuer) keys.SourceOptions {
	o := f.opts.Sources
	o.Name, o.Issuer, o.Algorithms = is.Name, is.Config.Issuer, is.Config.Algorithms
	o.Metrics = f.opts.Metrics.ForIssuer(is.Name)
	return o
}

// sourceError returns err, the error of opening the key source of the
// issuer at position i named name, at that issuer: a *setting.Error of
// one of its settings at the line of that setting, anything else (a key
// file that cannot be read) at the issuer's line. A setting every issuer
// shares (a refresh period) is the caller's to place.
func (x fileIndex) sourceError(path string, i int, name string, err error) error {
	var se *setting.Error
	if errors.As(err, &se) {
		return x.explain(path, se)
	}
	return &setting.Error{File: path, Line: x.issuer(i), Issuer: name, Err: err}
}

// readIssuersFile decodes an issuers file, strictly (no unknown key, no
// repeated key), and indexes the lines of its issuers.
func readIssuersFile(path string) ([]Entry, fileIndex, error) {
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
	var doc struct {
		Issuers []Entry `yaml:"issuers"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fileIndex{}, yamlError(path, err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fileIndex{}, yamlError(path, err)
	}
	return doc.Issuers, newFileIndex(&root), nil
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
	goTypes   = map[string]string{"[]issuers.Entry": "a list of issuers", "[]string": "a list of strings", "string": "a string", "issuers.Entry": "an issuer (a mapping of its settings)", "time.Duration": "a duration with its unit (30s, 1h)"}
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
// settings, by the issuer's position in the file or by its name.
type fileIndex struct {
	nodes []*yaml.Node // the mapping node of each issuer
	// inherited are, for each issuer, the settings it took from the
	// defaults: an error in one of them is not the file's.
	inherited [][]string
}

func newFileIndex(root *yaml.Node) fileIndex {
	var x fileIndex
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

// issuers returns the issuers cfgs describe, before their keys are open:
// each with a name of its own, at most one key source, DPoP and mTLS modes
// that parse, the required scope and the modes of o where it names none,
// and all of them checked as [Verifier.SetIssuers] checks them. It records
// in x what each issuer took from o. The errors of what the file says
// are placed at their lines.
func (x *fileIndex) issuers(path string, cfgs []Entry, o auth.Config) ([]auth.Issuer, error) {
	out := make([]auth.Issuer, len(cfgs))
	x.inherited = make([][]string, len(cfgs))
	at := func(i int, e *setting.Error) error {
		e.File, e.Line = path, x.key(i, e.Key)
		if e.Line == 0 {
			e.Line = x.issuer(i)
		}
		return e
	}
	first := map[string]int{}
	for i, c := range cfgs {
		if c.Name == "" {
			return nil, at(i, setting.Errorf("name", "no name: each issuer of the file has one"))
		}
		if err := auth.CheckIssuerName(c.Name); err != nil {
			return nil, at(i, &setting.Error{Key: "name", Err: err})
		}
		if j, dup := first[c.Name]; dup {
			return nil, at(i, setting.Errorf("name", "issuer name %q appears twice (first at line %d)", c.Name, x.key(j, "name")))
		}
		first[c.Name] = i
	}
	for i, c := range cfgs {
		// The second of the sources named is at fault: a key or secret
		// file, never the JWKS URL, which comes first.
		switch named := c.KeySource.Named(); {
		case len(named) < 2:
		case named[1] == "key_file":
			return nil, at(i, issuerError(c.Name, "key_file", "set at most one of %s", andList(keys.KeySources())))
		default:
			return nil, at(i, issuerError(c.Name, "hmac_secret_file", "set at most one of %s", andList(keys.KeySources())))
		}
		cfg := auth.Config{
			Issuer: c.Issuer, Audiences: c.Audiences, Algorithms: c.Algorithms,
			GroupsClaim: c.GroupsClaim, RequiredScope: c.RequiredScope, DPoP: o.DPoP, MTLS: o.MTLS,
			TokenTypes: c.TokenTypes, Clients: c.Clients, MaxLifetime: c.MaxLifetime, MaxStale: c.MaxStale,
		}
		if c.DPoP == "" {
			x.inherited[i] = append(x.inherited[i], "dpop")
		} else if mode, err := auth.ParseBindingMode(c.DPoP); err != nil {
			return nil, at(i, issuerError(c.Name, "dpop", "%w", err))
		} else {
			cfg.DPoP = mode
		}
		if c.MTLS == "" {
			x.inherited[i] = append(x.inherited[i], "mtls")
		} else if mode, err := auth.ParseBindingMode(c.MTLS); err != nil {
			return nil, at(i, issuerError(c.Name, "mtls", "%w", err))
		} else {
			cfg.MTLS = mode
		}
		if c.RequiredScope == "" && o.RequiredScope != "" {
			cfg.RequiredScope = o.RequiredScope
			x.inherited[i] = append(x.inherited[i], "required_scope")
		}
		// The rules of tokens meant for this resource: the flags' where
		// the issuer does not name them.
		inherit := func(key string, set bool, take func()) {
			if set && x.key(i, key) == 0 {
				take()
				x.inherited[i] = append(x.inherited[i], key)
			}
		}
		inherit("token_types", len(o.TokenTypes) > 0, func() { cfg.TokenTypes = o.TokenTypes })
		inherit("clients", len(o.Clients) > 0, func() { cfg.Clients = o.Clients })
		inherit("max_lifetime", o.MaxLifetime != 0, func() { cfg.MaxLifetime = o.MaxLifetime })
		inherit("max_stale", o.MaxStale != 0, func() { cfg.MaxStale = o.MaxStale })
		out[i] = auth.Issuer{Name: c.Name, Config: cfg}
	}
	issuers, err := auth.CheckIssuers(out...)
	if err != nil {
		return nil, x.explain(path, err)
	}
	return issuers, nil
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

// named returns the position of the issuer named name, -1 for none.
func (x fileIndex) named(name string) int {
	for i, n := range x.nodes {
		c := n.Content
		for k := 0; k+1 < len(c); k += 2 {
			if c[k].Value == "name" && c[k+1].Value == name {
				return i
			}
		}
	}
	return -1
}

// explain places err, when it is a *setting.Error of one of the file's
// issuers (which it names), at the line of the setting at fault, or else
// of its issuer, and the list's own settings at the file. An error of a
// setting that is no issuer's, or of one the issuer took from the
// defaults, is not the file's: it is returned as it is, for the
// caller to name its flag.
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
	case se.Issuer == "" || i < 0:
		return err
	}
	placed.Line = x.key(i, se.Key)
	if placed.Line == 0 && slices.Contains(x.inherited[i], se.Key) {
		return err
	}
	if placed.Line == 0 {
		placed.Line = x.issuer(i)
	}
	return &placed
}

// issuerError returns the *setting.Error of the setting key of the issuer
// named name.
func issuerError(name, key, format string, a ...any) *setting.Error {
	e := setting.Errorf(key, format, a...)
	e.Issuer = name
	return e
}
