package keys

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// KeySource says where an issuer's keys come from (its fields are
// [KeySources]): a JWKS URL, a key file, an HMAC secret file, or, when it
// names none, OIDC discovery of the issuer's iss. The issuers file allows
// one per issuer; the flags of the unnamed issuer may combine them.
type KeySource struct {
	JWKSURL        string `yaml:"jwks_url"`
	KeyFile        string `yaml:"key_file"`
	HMACSecretFile string `yaml:"hmac_secret_file"`
}

// Named returns the keys of the settings ks sets, in the order of
// [KeySources].
func (ks KeySource) Named() []string {
	var out []string
	for _, s := range []struct {
		key, value string
	}{{"jwks_url", ks.JWKSURL}, {"key_file", ks.KeyFile}, {"hmac_secret_file", ks.HMACSecretFile}} {
		if s.value != "" {
			out = append(out, s.key)
		}
	}
	return out
}

// SourceOptions are what opening the key source of an issuer needs
// besides where its keys come from.
type SourceOptions struct {
	// Name is the issuer's name, for logs and spans: "" for the unnamed
	// issuer of the flags.
	Name string
	// Issuer is the issuer whose OIDC discovery document names the JWKS,
	// when the KeySource names no source.
	Issuer string
	// Algorithms are those the issuer's tokens may be signed with: a
	// fetched set with no key for any of them counts as a failed fetch.
	Algorithms []string
	// Refresh and MinRefresh are the JWKS options of a source that
	// fetches its keys (see [JWKSOptions]).
	Refresh, MinRefresh time.Duration
	// Log and Metrics are those of the source, Metrics recording for its
	// issuer; either may be nil.
	Log     *zap.Logger
	Metrics Recorder
	// TracerProvider makes the spans of key fetches; nil makes none.
	TracerProvider trace.TracerProvider
}

// A Recorder counts what key sources do, for the metrics of their issuer.
// A nil Recorder records nothing; implementations are safe for
// concurrent use.
type Recorder interface {
	// Refresh counts one JWKS fetch, ok when it succeeded.
	Refresh(ok bool)
	// KeyFileReload counts one read of a key file (or HMAC secret file)
	// that changed its keys (ok) or was refused.
	KeyFileReload(ok bool)
	// AddKeys moves the count of usable keys by delta: a source adds its
	// new count and subtracts its old one when its set changes.
	AddKeys(delta int)
}

// recorderOf returns r, or a Recorder that records nothing for nil.
func recorderOf(r Recorder) Recorder {
	if r == nil {
		return noRecorder{}
	}
	return r
}

type noRecorder struct{}

func (noRecorder) Refresh(bool)       {}
func (noRecorder) KeyFileReload(bool) {}
func (noRecorder) AddKeys(int)        {}

// Source is the open key source of one issuer: the keys of its files and
// of its JWKS, kept current by loops that run until [Source.Close] or the
// end of the context given to [OpenSource]. Use it from one goroutine.
type Source struct {
	keys  Keys
	files []*KeyFile
	// sets are what the parts count in plantstore_jwks_keys.
	sets []*atomic.Pointer[KeySet]
	m    Recorder
	log  *zap.Logger
	stop context.CancelFunc
	done chan struct{} // closed when every loop has ended
}

// OpenSource opens the key source ks of an issuer: each file ks names,
// then its JWKS URL, or, when ks names neither, OIDC discovery of
// o.Issuer. The files come first, so a kid they know costs no fetch. It
// returns a *[setting.Error] for a setting the JWKS refuses (a URL that
// is not http or https, a negative refresh period), the error of a file
// that cannot be read, and an error when there is no source at all. The
// caller checks the issuer's other settings first: nothing should be
// fetched for an issuer that will be refused.
func OpenSource(ctx context.Context, ks KeySource, o SourceOptions) (*Source, error) {
	log := o.Log
	if log == nil {
		log = zap.NewNop()
	}
	if o.Name != "" {
		log = log.With(zap.String("issuer", o.Name))
	}
	ctx, stop := context.WithCancel(ctx)
	s := &Source{m: recorderOf(o.Metrics), log: log, stop: stop}
	var parts []Keys
	var loops []<-chan struct{}
	fail := func(err error) (*Source, error) {
		stop()
		for _, l := range loops {
			<-l
		}
		for _, set := range s.sets {
			s.m.AddKeys(-set.Load().Len())
		}
		return nil, err
	}
	for _, f := range []struct {
		path string
		load func(string, Recorder) (*KeyFile, error)
	}{{ks.KeyFile, LoadKeyFile}, {ks.HMACSecretFile, LoadHMACSecret}} {
		if f.path == "" {
			continue
		}
		kf, err := f.load(f.path, s.m)
		if err != nil {
			return fail(err)
		}
		s.files, s.sets = append(s.files, kf), append(s.sets, &kf.keys)
		loops, parts = append(loops, kf.Watch(ctx, log)), append(parts, kf)
	}
	if ks.JWKSURL != "" || len(parts) == 0 && o.Issuer != "" {
		opts := JWKSOptions{
			URL: ks.JWKSURL, Refresh: o.Refresh, MinRefresh: o.MinRefresh, Algorithms: o.Algorithms,
			TracerProvider: o.TracerProvider, Name: o.Name,
		}
		if ks.JWKSURL == "" {
			opts.Issuer = o.Issuer
		}
		j, err := NewJWKS(ctx, opts, log, s.m)
		if err != nil {
			return fail(err)
		}
		s.sets = append(s.sets, &j.keys)
		loops, parts = append(loops, j.Done()), append(parts, j)
	}
	if len(parts) == 0 {
		return fail(errors.New("no key source and no issuer to discover one from"))
	}
	s.keys = Combine(parts...)
	s.done = make(chan struct{})
	go func() {
		for _, l := range loops {
			<-l
		}
		close(s.done)
	}()
	return s, nil
}

// KeySources returns the settings that name where an issuer's keys come
// from, the fields of [KeySource]: a JWKS URL, a key file, an HMAC secret
// file. An issuer that sets none of them discovers its keys from its
// issuer (OIDC discovery).
func KeySources() []string {
	return []string{"jwks_url", "key_file", "hmac_secret_file"}
}

// Keys returns the keys of s, to verify with.
func (s *Source) Keys() Keys { return s.keys }

// Reload reads the files of s again (SIGHUP), and logs what changed, what
// was refused (the previous keys keep serving), and, for each file that is
// the same, that its keys are unchanged: a reload was asked for.
func (s *Source) Reload() {
	for _, f := range s.files {
		if changed, err := f.ReloadLogged(s.log); err == nil && !changed {
			s.log.Info("keys unchanged", zap.Stringer("source", f))
		}
	}
}

// Done returns a channel closed once every loop of s has ended.
func (s *Source) Done() <-chan struct{} { return s.done }

// Close ends the loops of s, waits for them, and takes its keys out of
// plantstore_jwks_keys; a source that replaces it records under the same
// name.
func (s *Source) Close() {
	s.stop()
	<-s.done
	for _, set := range s.sets {
		s.m.AddKeys(-set.Load().Len())
	}
}
