package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.yaml.in/yaml/v3"
)

// IssuerConfig is one issuer of an issuers file (SPEC §10), as written.
type IssuerConfig struct {
	// Name qualifies the issuer's callers: 1 to 32 of [a-z0-9-], unique.
	Name string `yaml:"name"`
	// Issuer is the exact iss of the issuer's tokens, and the issuer that
	// OIDC discovery reads when no key source is set.
	Issuer string `yaml:"issuer"`
	// JWKSURL, KeyFile and HMACSecretFile are the key sources; at most
	// one may be set.
	JWKSURL        string `yaml:"jwks_url"`
	KeyFile        string `yaml:"key_file"`
	HMACSecretFile string `yaml:"hmac_secret_file"`
	// The rest is the issuer's Config.
	Audiences     []string `yaml:"audiences"`
	Algorithms    []string `yaml:"algorithms"`
	GroupsClaim   string   `yaml:"groups_claim"`
	RequiredScope string   `yaml:"required_scope"`
	DPoP          string   `yaml:"dpop"`
}

// SourceOptions are what the key sources of an issuers file share.
type SourceOptions struct {
	// Refresh and MinRefresh are the JWKS options of every issuer that
	// fetches its keys.
	Refresh, MinRefresh time.Duration
	// RequiredScope is the scope of issuers that name none.
	RequiredScope string
	// DPoP is the DPoP mode of issuers that name none.
	DPoP DPoPMode
	// Log and Metrics are those of the sources; either may be nil.
	Log     *zap.Logger
	Metrics *Metrics
	// TracerProvider makes the spans of key fetches; nil makes none.
	TracerProvider trace.TracerProvider
}

// A FileError is a problem with an issuers file, at a line of it (0 when
// it concerns the whole file).
type FileError struct {
	File string
	Line int
	Err  error
}

// Error returns "FILE:LINE: problem".
func (e *FileError) Error() string {
	if e.Line > 0 {
		return e.File + ":" + strconv.Itoa(e.Line) + ": " + e.Err.Error()
	}
	return e.File + ": " + e.Err.Error()
}

// Unwrap returns e.Err.
func (e *FileError) Unwrap() error { return e.Err }

// IssuersFile is the issuers of an issuers file with their key sources
// built: a JWKS (with its refresh loop), a key file, an HMAC secret file,
// or OIDC discovery of the issuer when none is set. Use it from one
// goroutine (the service's main loop).
type IssuersFile struct {
	path  string
	ctx   context.Context
	opts  SourceOptions
	built []*builtIssuer
	lines fileLines
	loops sync.WaitGroup // every JWKS loop ever started
}

// builtIssuer is one issuer of the file, ready to verify.
type builtIssuer struct {
	cfg    IssuerConfig
	issuer Issuer
	file   *KeyFile // the key file or HMAC secret file, if that is its source
	stop   context.CancelFunc
}

// LoadIssuersFile reads the issuers file at path and builds each issuer's
// key source; the JWKS loops run until ctx is done. Errors name the file
// and, when they concern one place, its line: a *FileError for what the
// file says (unknown keys, repeated names, a bad value), or the error of a
// key file that cannot be read.
func LoadIssuersFile(ctx context.Context, path string, o SourceOptions) (*IssuersFile, error) {
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	f := &IssuersFile{path: path, ctx: ctx, opts: o}
	cfgs, lines, err := readIssuersFile(path)
	if err != nil {
		return nil, err
	}
	built, err := f.build(cfgs, lines, nil)
	if err != nil {
		return nil, err
	}
	f.built, f.lines = built, lines
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
func (f *IssuersFile) Issuers() []Issuer {
	out := make([]Issuer, len(f.built))
	for i, b := range f.built {
		out[i] = b.issuer
	}
	return out
}

// Explain returns err, an error of [NewVerifier] or [Verifier.SetIssuers]
// for f's issuers, as a *FileError at the line of the setting at fault.
func (f *IssuersFile) Explain(err error) error {
	return f.lines.explain(f.path, err)
}

// Wait waits for the JWKS loops of f, once the context given to
// [LoadIssuersFile] is done.
func (f *IssuersFile) Wait() { f.loops.Wait() }

// Reload reads the file again. When it is good and apply accepts its
// issuers (apply is [Verifier.SetIssuers]), they serve from then on: an
// issuer whose settings did not change keeps its key source (a key file is
// read again), the others get new ones, and the sources of issuers that
// went away or changed are stopped. On any error nothing changes: the last
// good issuers keep serving. It returns the names of the issuers added and
// removed.
func (f *IssuersFile) Reload(apply func([]Issuer) error) (added, removed []string, err error) {
	cfgs, lines, err := readIssuersFile(f.path)
	if err != nil {
		return nil, nil, err
	}
	built, err := f.build(cfgs, lines, f.built)
	if err != nil {
		return nil, nil, err
	}
	issuers := make([]Issuer, len(built))
	for i, b := range built {
		issuers[i] = b.issuer
	}
	if err := apply(issuers); err != nil {
		f.stopNew(built, f.built)
		return nil, nil, lines.explain(f.path, err)
	}
	for _, b := range built {
		if !slices.Contains(f.built, b) {
			added = append(added, b.cfg.Name)
		}
	}
	for _, old := range f.built {
		if !slices.Contains(built, old) {
			old.stop()
			if !slices.ContainsFunc(built, func(b *builtIssuer) bool { return b.cfg.Name == old.cfg.Name }) {
				removed = append(removed, old.cfg.Name)
				f.opts.Metrics.Forget(old.cfg.Name)
			}
		}
	}
	f.built, f.lines = built, lines
	return added, removed, nil
}

// stopNew stops the sources of built that are not in old, and drops the
// series of the issuers old does not name.
func (f *IssuersFile) stopNew(built, old []*builtIssuer) {
	for _, b := range built {
		if !slices.Contains(old, b) {
			b.stop()
			if !slices.ContainsFunc(old, func(o *builtIssuer) bool { return o.cfg.Name == b.cfg.Name }) {
				f.opts.Metrics.Forget(b.cfg.Name)
			}
		}
	}
}

// build returns the issuers of cfgs, reusing those of old whose settings
// are the same (and reloading their key files).
func (f *IssuersFile) build(cfgs []IssuerConfig, lines fileLines, old []*builtIssuer) ([]*builtIssuer, error) {
	var built []*builtIssuer
	for i, c := range cfgs {
		if j := slices.IndexFunc(old, func(b *builtIssuer) bool { return reflect.DeepEqual(b.cfg, c) }); j >= 0 {
			b := old[j]
			if b.file != nil {
				_, _ = b.file.ReloadLogged(f.opts.Log.With(zap.String("issuer", c.Name)))
			}
			built = append(built, b)
			continue
		}
		b, err := f.newIssuer(c)
		if err != nil {
			f.stopNew(built, old)
			return nil, &FileError{File: f.path, Line: lines.issuer(i), Err: fmt.Errorf("issuer %s: %w", c.Name, err)}
		}
		built = append(built, b)
	}
	return built, nil
}

// newIssuer builds the key source of c.
func (f *IssuersFile) newIssuer(c IssuerConfig) (*builtIssuer, error) {
	m := f.opts.Metrics.ForIssuer(c.Name)
	dpop, err := ParseDPoPMode(c.DPoP)
	if err != nil {
		return nil, err
	}
	if c.DPoP == "" {
		dpop = f.opts.DPoP
	}
	scope := c.RequiredScope
	if scope == "" {
		scope = f.opts.RequiredScope
	}
	b := &builtIssuer{cfg: c, stop: func() {}}
	b.issuer = Issuer{Name: c.Name, Config: Config{
		Issuer: c.Issuer, Audiences: c.Audiences, Algorithms: c.Algorithms,
		GroupsClaim: c.GroupsClaim, RequiredScope: scope, DPoP: dpop,
	}}
	log := f.opts.Log.With(zap.String("issuer", c.Name))
	// The source's loop (JWKS refresh or file watch) runs until stop.
	var (
		loop <-chan struct{}
		set  *atomic.Pointer[KeySet] // what the source counts in the keys gauge
	)
	switch {
	case c.KeyFile != "":
		b.file, err = LoadKeyFile(c.KeyFile, m)
	case c.HMACSecretFile != "":
		b.file, err = LoadHMACSecret(c.HMACSecretFile, m)
	}
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(f.ctx)
	if b.file != nil {
		b.issuer.Keys, set = b.file, &b.file.keys
		loop = b.file.Watch(ctx, log)
	} else {
		opts := JWKSOptions{
			URL: c.JWKSURL, Refresh: f.opts.Refresh, MinRefresh: f.opts.MinRefresh, Algorithms: c.Algorithms,
			TracerProvider: f.opts.TracerProvider, Name: c.Name,
		}
		if c.JWKSURL == "" {
			opts.Issuer = c.Issuer
		}
		j, err := NewJWKS(ctx, opts, log, m)
		if err != nil {
			stop()
			return nil, err
		}
		b.issuer.Keys, set, loop = j, &j.keys, j.Done()
	}
	f.loops.Add(1)
	go func() {
		<-loop
		f.loops.Done()
	}()
	// Stopped, the source takes its keys out of the gauge and leaves the
	// issuer's other series alone: a source that replaces it records under
	// the same name. Reload forgets the names it removes.
	b.stop = func() {
		stop()
		<-loop
		m.AddKeys(-set.Load().Len())
	}
	return b, nil
}

// readIssuersFile decodes and checks an issuers file: strict YAML (no
// unknown key, no repeated key), at least one issuer, each with a valid
// name and an iss, names and iss values unique, at most one key source.
func readIssuersFile(path string) ([]IssuerConfig, fileLines, error) {
	fail := func(line int, format string, a ...any) error {
		return &FileError{File: path, Line: line, Err: fmt.Errorf(format, a...)}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fileLines{}, &FileError{File: path, Err: pathCause(err)}
	}
	var doc struct {
		Issuers []IssuerConfig `yaml:"issuers"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fileLines{}, yamlError(path, err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fileLines{}, yamlError(path, err)
	}
	lines := newFileLines(&root)
	if len(doc.Issuers) == 0 {
		return nil, lines, fail(0, `no issuer: want "issuers:" with at least one`)
	}
	names, isses := map[string]int{}, map[string]int{}
	for i, c := range doc.Issuers {
		at := lines.issuer(i)
		if !validIssuerName(c.Name) {
			return nil, lines, fail(lines.key(i, "name", at), "issuer name %q: want 1 to 32 of a-z, 0-9 and -", c.Name)
		}
		if j, dup := names[c.Name]; dup {
			return nil, lines, fail(lines.key(i, "name", at), "issuer name %q appears twice (first at line %d)", c.Name, lines.key(j, "name", 0))
		}
		names[c.Name] = i
		if c.Issuer == "" {
			return nil, lines, fail(at, "issuer %s: no issuer (the exact iss of its tokens)", c.Name)
		}
		if j, dup := isses[c.Issuer]; dup {
			return nil, lines, fail(lines.key(i, "issuer", at), "issuer %s: iss %q is also that of issuer %s", c.Name, c.Issuer, doc.Issuers[j].Name)
		}
		isses[c.Issuer] = i
		n := 0
		for _, s := range []string{c.JWKSURL, c.KeyFile, c.HMACSecretFile} {
			if s != "" {
				n++
			}
		}
		if n > 1 {
			return nil, lines, fail(at, "issuer %s: set at most one of jwks_url, key_file and hmac_secret_file", c.Name)
		}
		if _, err := ParseDPoPMode(c.DPoP); err != nil {
			return nil, lines, fail(lines.key(i, "dpop", at), "issuer %s: dpop: %v", c.Name, err)
		}
	}
	return doc.Issuers, lines, nil
}

// yamlLine matches the line prefix of the YAML decoder's messages.
var yamlLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// yamlError turns an error of the YAML decoder into a *FileError at the
// line it names, in this file's words.
func yamlError(path string, err error) error {
	if errors.Is(err, io.EOF) {
		return &FileError{File: path, Err: errors.New(`empty file: want "issuers:" with at least one issuer`)}
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
			return &FileError{File: path, Line: n, Err: errors.New(strings.TrimSpace(msgs[0]))}
		}
		return &FileError{File: path, Err: errors.New(msgs[0])}
	}
	n, _ := strconv.Atoi(m[1])
	msg := m[2]
	if f, ok := strings.CutPrefix(msg, "field "); ok {
		if name, _, ok := strings.Cut(f, " not found in type"); ok {
			msg = fmt.Sprintf("unknown key %q", name)
		}
	}
	if len(msgs) > 1 {
		msg += fmt.Sprintf(" (and %d more problems)", len(msgs)-1)
	}
	return &FileError{File: path, Line: n, Err: errors.New(msg)}
}

// fileLines finds the lines of an issuers file's settings.
type fileLines struct {
	issuers []*yaml.Node // the mapping node of each issuer
}

func newFileLines(root *yaml.Node) fileLines {
	var l fileLines
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return l
	}
	top := root.Content[0].Content
	for i := 0; i+1 < len(top); i += 2 {
		if top[i].Value == "issuers" && top[i+1].Kind == yaml.SequenceNode {
			l.issuers = top[i+1].Content
		}
	}
	return l
}

// issuer returns the line of issuer i, 0 when unknown.
func (l fileLines) issuer(i int) int {
	if i < 0 || i >= len(l.issuers) {
		return 0
	}
	return l.issuers[i].Line
}

// key returns the line of key in issuer i, or def.
func (l fileLines) key(i int, key string, def int) int {
	if i < 0 || i >= len(l.issuers) {
		return def
	}
	c := l.issuers[i].Content
	for k := 0; k+1 < len(c); k += 2 {
		if c[k].Value == key {
			return c[k].Line
		}
	}
	return def
}

// fromFlags are the settings of a file issuer that, absent from the file,
// come from the flags (SourceOptions).
var fromFlags = []string{"required_scope", "dpop"}

// explain places a *ConfigError of the verifier at the line of the
// setting at fault, or of its issuer. An error of no issuer (an Options
// setting), or of a setting the issuer took from the flags, is not the
// file's: it is returned as it is, for the caller to name its flag.
func (l fileLines) explain(path string, err error) error {
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Issuer == "" {
		return err
	}
	for i, n := range l.issuers {
		if nodeValue(n, "name") != ce.Issuer {
			continue
		}
		line := l.key(i, ce.Field, 0)
		if line == 0 && slices.Contains(fromFlags, ce.Field) {
			return err
		}
		if line == 0 {
			line = n.Line
		}
		return &FileError{File: path, Line: line, Err: err}
	}
	return &FileError{File: path, Err: err}
}

// nodeValue returns the scalar value of key in mapping n.
func nodeValue(n *yaml.Node, key string) string {
	for k := 0; k+1 < len(n.Content); k += 2 {
		if n.Content[k].Value == key {
			return n.Content[k+1].Value
		}
	}
	return ""
}
