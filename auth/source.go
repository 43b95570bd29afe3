package auth

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

// named returns the settings ks sets, in the order of [KeySources].
func (ks KeySource) named() []string {
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

// SourceOptions are what the key sources of the issuers share.
type SourceOptions struct {
	// Refresh and MinRefresh are the JWKS options of every issuer that
	// fetches its keys.
	Refresh, MinRefresh time.Duration
	// RequiredScope is the scope of the issuers of a file that name none.
	RequiredScope string
	// DPoP is the DPoP mode of the issuers of a file that name none.
	DPoP DPoPMode
	// MTLS is the certificate-binding mode of the issuers of a file that
	// name none.
	MTLS MTLSMode
	// TokenTypes, Clients, MaxLifetime and MaxStale are those of the
	// issuers of a file that leave them out.
	TokenTypes, Clients   []string
	MaxLifetime, MaxStale time.Duration
	// Log and Metrics are those of the sources; either may be nil.
	Log     *zap.Logger
	Metrics *Metrics
	// TracerProvider makes the spans of key fetches; nil makes none.
	TracerProvider trace.TracerProvider
}

// Source is the open key source of one issuer: the keys of its files and
// of its JWKS, kept current by loops that run until [Source.Close] or the
// end of the context given to [OpenSource]. Use it from one goroutine.
type Source struct {
	keys  Keys
	files []*KeyFile
	// sets are what the parts count in plantstore_jwks_keys.
	sets []*atomic.Pointer[KeySet]
	m    *Metrics
	log  *zap.Logger
	stop context.CancelFunc
	done chan struct{} // closed when every loop has ended
}

// OpenSource opens the key source ks of the issuer named name ("" for the
// unnamed one) whose Config is c: each file ks names, then its JWKS URL,
// or, when ks names neither, OIDC discovery of c.Issuer. The files come
// first, so a kid they know costs no fetch. Its metrics record under the
// issuer's name. It returns a *[setting.Error] for a setting the issuer's
// rules refuse (as [NewVerifier] would, before anything is fetched) or
// the JWKS refuses (a URL that is not http or https, a negative refresh
// period), the error of a file that cannot be read, and an error when
// there is no source at all.
func OpenSource(ctx context.Context, name string, c Config, ks KeySource, o SourceOptions) (*Source, error) {
	// The issuer's rules first: nothing is fetched for an issuer that
	// NewVerifier would refuse.
	if _, err := CheckIssuers(Issuer{Name: name, Config: c}); err != nil {
		return nil, err
	}
	log := o.Log
	if log == nil {
		log = zap.NewNop()
	}
	if name != "" {
		log = log.With(zap.String("issuer", name))
	}
	ctx, stop := context.WithCancel(ctx)
	s := &Source{m: o.Metrics.ForIssuer(name), log: log, stop: stop}
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
		load func(string, *Metrics) (*KeyFile, error)
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
	if ks.JWKSURL != "" || len(parts) == 0 && c.Issuer != "" {
		opts := JWKSOptions{
			URL: ks.JWKSURL, Refresh: o.Refresh, MinRefresh: o.MinRefresh, Algorithms: c.Algorithms,
			TracerProvider: o.TracerProvider, Name: name,
		}
		if ks.JWKSURL == "" {
			opts.Issuer = c.Issuer
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
