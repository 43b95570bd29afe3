// Package issuers builds the issuers a verifier checks tokens against, and
// keeps their key sources open: the one issuer of the -jwt-* flags
// ([Flags]), or the issuers of an issuers file ([Load]), which it reads
// strictly, places every refusal at the file's line, and reloads keeping
// the sources of the issuers that stayed as they were. The verifier
// itself is the caller's: each constructor hands the issuers to an apply
// function (auth.NewVerifier or Verifier.SetIssuers) and places its
// refusal, so that what reaches the caller is one error that names the
// flag's setting or the file's line.
package issuers

import (
	"context"
	"errors"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/introspect"
	"github.com/plantstore/plantstore/auth/jws"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/observability/setting"
)

// Options are what the issuers share.
type Options struct {
	// Defaults is the Config of the -jwt-* flags: the one issuer's of
	// [Flags], and, for the issuers of a file, the value of every setting
	// an issuer leaves out (the flags that set one issuer's alone are
	// refused beside a file, so theirs are the zero values).
	Defaults auth.Config
	// Sources are the options of every issuer's key source; each issuer
	// adds its name, iss and algorithms.
	Sources keys.SourceOptions
	// Metrics records for every issuer, under its name; nil records
	// nothing.
	Metrics *auth.Metrics
	// Introspection bounds the calls of every issuer that introspects its
	// tokens; nil gives each the default bounds of its own.
	Introspection *introspect.Limits
}

// A Set is the issuers a verifier checks tokens against, with their key
// sources open until the context given to its constructor is done. Use it
// from one goroutine (the service's main loop).
type Set struct {
	ctx   context.Context
	opts  Options
	path  string // the issuers file; "" for the -jwt-* flags
	built []built
	file  fileIndex
	loops sync.WaitGroup // every source ever opened
}

// built is one issuer of a Set, ready to verify.
type built struct {
	entry  entry
	issuer auth.Issuer
	// source is nil for an issuer that has no keys: one whose tokens are
	// all introspected, with neither a key source nor an iss to discover.
	source *keys.Source
	trust  *jws.Trust // of source's keys, kept with it
	// asks introspects the issuer's tokens; nil when it does not.
	// stopAsks stops the watch of its client's credential file.
	asks     *introspect.Trust
	stopAsks context.CancelFunc
	// both trusts the JWTs of an issuer that introspects always and has
	// keys: their signature, then the answer; made with asks.
	both auth.Trust
}

// trusts sets the Trusts of b.issuer: its keys for JWSs, and, when it
// introspects, the introspection for the tokens that are not a JWS, and
// for its JWSs too when it introspects always.
func (b *built) trusts() {
	b.issuer.JWS, b.issuer.Opaque = nil, nil
	if b.trust != nil {
		b.issuer.JWS = b.trust
	}
	if b.asks != nil {
		b.issuer.Opaque = b.asks
		if b.issuer.Config.Introspection.Tokens == auth.IntrospectAlways {
			b.issuer.JWS = b.asks
			if b.trust != nil {
				if b.both == nil {
					b.both = b.asks.After(b.trust)
				}
				b.issuer.JWS = b.both
			}
		}
	}
}

// Flags opens the key source ks of the one unnamed issuer the -jwt-*
// flags define, whose Config is o.Defaults, and has apply take it (apply
// is auth.NewVerifier's, or Verifier.SetIssuers). The issuer's settings
// are checked first: nothing is fetched for an issuer that apply would
// refuse. A refused setting is a *setting.Error naming its key.
func Flags(ctx context.Context, ks keys.KeySource, o Options, apply func([]auth.Issuer) error) (*Set, error) {
	s := newSet(ctx, o, "")
	e := entry{Config: o.Defaults, KeySource: ks}
	checked, err := auth.CheckIssuers(auth.Issuer{Config: e.Config})
	if err != nil {
		return nil, err
	}
	b, err := s.open(e, checked[0])
	if err != nil {
		return nil, err
	}
	s.built = []built{b}
	if err := apply(s.Issuers()); err != nil {
		s.closeNew(s.built, nil)
		return nil, err
	}
	return s, nil
}

// Load reads the issuers file at path, checks its issuers as
// Verifier.SetIssuers will (but for their keys), opens each one's key
// source, and has apply take them (apply is auth.NewVerifier's, or
// Verifier.SetIssuers). Errors name the file and, when they concern one
// place, its line: a *setting.Error with its File set for what the file
// says (unknown keys, repeated names, a bad value) or for a key file that
// cannot be read. A *setting.Error of a setting an issuer took from
// o.Defaults (a required scope) is returned without a File, for the
// caller to name the flag it came from.
func Load(ctx context.Context, path string, o Options, apply func([]auth.Issuer) error) (*Set, error) {
	s := newSet(ctx, o, path)
	entries, file, err := readFile(path, o.Defaults)
	if err != nil {
		return nil, err
	}
	next, err := s.build(entries, file, nil)
	if err != nil {
		return nil, err
	}
	if err := apply(issuersOf(next)); err != nil {
		s.closeNew(next, nil)
		return nil, file.explain(path, err)
	}
	s.built, s.file = next, file
	return s, nil
}

func newSet(ctx context.Context, o Options, path string) *Set {
	if o.Sources.Log == nil {
		o.Sources.Log = zap.NewNop()
	}
	s := &Set{ctx: ctx, opts: o, path: path}
	// Held until ctx is done, so that Wait also covers the loops of
	// issuers a reload adds later.
	s.loops.Add(1)
	go func() {
		<-ctx.Done()
		s.loops.Done()
	}()
	return s
}

// Issuers returns the issuers to verify against.
func (s *Set) Issuers() []auth.Issuer { return issuersOf(s.built) }

func issuersOf(bs []built) []auth.Issuer {
	out := make([]auth.Issuer, len(bs))
	for i, b := range bs {
		out[i] = b.issuer
	}
	return out
}

// Wait waits for the loops of the key sources, once the context given to
// the Set's constructor is done.
func (s *Set) Wait() { s.loops.Wait() }

// Reload reads the files of the issuers again (SIGHUP): the key files,
// and the issuers file of a Set that [Load] made. When the issuers file
// is good and apply (Verifier.SetIssuers) accepts its issuers, they serve
// from then on: an issuer whose key source (name, issuer and KeySource)
// did not change keeps it, with its keys (its files are read again), the
// others get new ones, and the sources of issuers that went away or
// changed are closed. On any error nothing changes: the last good issuers
// keep serving. It returns the names of the issuers added and removed.
func (s *Set) Reload(apply func([]auth.Issuer) error) (added, removed []string, err error) {
	if s.path == "" {
		for _, b := range s.built {
			if b.source != nil {
				b.source.Reload()
			}
		}
		return nil, nil, nil
	}
	entries, file, err := readFile(s.path, s.opts.Defaults)
	if err != nil {
		return nil, nil, err
	}
	next, err := s.build(entries, file, s.built)
	if err != nil {
		return nil, nil, err
	}
	if err := apply(issuersOf(next)); err != nil {
		s.closeNew(next, s.built)
		return nil, nil, file.explain(s.path, err)
	}
	s.closeNew(s.built, next)
	for _, b := range next {
		if !slices.ContainsFunc(s.built, named(b.entry.Name)) {
			added = append(added, b.entry.Name)
		}
	}
	for _, old := range s.built {
		if !slices.ContainsFunc(next, named(old.entry.Name)) {
			removed = append(removed, old.entry.Name)
		}
	}
	s.built, s.file = next, file
	return added, removed, nil
}

// named returns a test for an issuer named name.
func named(name string) func(built) bool {
	return func(b built) bool { return b.entry.Name == name }
}

// closeNew closes the sources of bs that others does not use, and drops
// the series of the issuers others does not name.
func (s *Set) closeNew(bs, others []built) {
	for _, b := range bs {
		if b.source != nil && !slices.ContainsFunc(others, func(o built) bool { return o.source == b.source }) {
			b.source.Close()
		}
		if b.asks != nil && !slices.ContainsFunc(others, func(o built) bool { return o.asks == b.asks }) {
			b.stopAsks()
		}
		if !slices.ContainsFunc(others, named(b.entry.Name)) {
			s.opts.Metrics.Forget(b.entry.Name)
		}
	}
}

// build returns the issuers of the file's entries, checked, with the key
// sources of old whose name, issuer and key source are the same (their
// files read again), and new ones for the others.
func (s *Set) build(entries []entry, file fileIndex, old []built) ([]built, error) {
	checked, err := file.issuers(s.path, entries)
	if err != nil {
		return nil, err
	}
	var next []built
	for i, e := range entries {
		j := slices.IndexFunc(old, func(o built) bool {
			return o.entry.Name == e.Name && o.entry.Issuer == e.Issuer && o.entry.KeySource == e.KeySource
		})
		if j >= 0 {
			b := old[j]
			sameAsks := b.entry.Config.Introspection == e.Config.Introspection
			b.entry, b.issuer = e, checked[i]
			if b.source != nil {
				b.source.Reload()
			}
			if !sameAsks {
				var err error
				b.both = nil
				if b.asks, b.stopAsks, err = s.ask(checked[i], b.source); err != nil {
					s.closeNew(next, old)
					return nil, file.sourceError(s.path, i, e.Name, err)
				}
			}
			b.trusts()
			next = append(next, b)
			continue
		}
		b, err := s.open(e, checked[i])
		if err != nil {
			s.closeNew(next, old)
			return nil, file.sourceError(s.path, i, e.Name, err)
		}
		next = append(next, b)
	}
	return next, nil
}

// open opens the key source of the entry e, whose issuer is checked, and
// its introspection when it has one. An issuer that introspects and has
// neither a key source nor an iss to discover one from has no keys.
func (s *Set) open(e entry, checked auth.Issuer) (built, error) {
	if e.KeySource == (keys.KeySource{}) && checked.Config.Issuer == "" && checked.Config.Introspection.Tokens != auth.IntrospectNone {
		b := built{entry: e, issuer: checked}
		var err error
		if b.asks, b.stopAsks, err = s.ask(checked, nil); err != nil {
			return built{}, err
		}
		b.trusts()
		return b, nil
	}
	o := s.opts.Sources
	o.Name, o.Issuer, o.Algorithms = checked.Name, checked.Config.Issuer, checked.Config.Algorithms
	o.Metrics = s.opts.Metrics.ForIssuer(checked.Name)
	src, err := keys.OpenSource(s.ctx, e.KeySource, o)
	if err != nil {
		return built{}, err
	}
	s.loops.Add(1)
	go func() {
		<-src.Done()
		s.loops.Done()
	}()
	b := built{entry: e, issuer: checked, source: src, trust: jws.New(src.Keys())}
	if b.asks, b.stopAsks, err = s.ask(checked, src); err != nil {
		src.Close()
		return built{}, err
	}
	b.trusts()
	return b, nil
}

// ask returns the introspection of the checked issuer is, nil when it
// introspects no token, with the watch of its client's credential file
// started and the function that stops it; src, when not nil, is its key
// source, whose keys verify signed answers.
func (s *Set) ask(is auth.Issuer, src *keys.Source) (*introspect.Trust, context.CancelFunc, error) {
	if is.Config.Introspection.Tokens == auth.IntrospectNone {
		return nil, nil, nil
	}
	c := introspect.Config{Name: is.Name, Issuer: is.Config.Issuer, Introspection: is.Config.Introspection, Algorithms: is.Config.Algorithms}
	if src != nil {
		c.Keys = src.Keys()
	}
	t, err := introspect.New(c, s.opts.Introspection, s.opts.Sources.Log)
	if err != nil {
		return nil, nil, err
	}
	ctx, stop := context.WithCancel(s.ctx)
	done := t.Watch(ctx)
	s.loops.Add(1)
	go func() {
		<-done
		s.loops.Done()
	}()
	return t, stop, nil
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
