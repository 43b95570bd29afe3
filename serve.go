package main

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/dpop"
	"github.com/plantstore/plantstore/auth/introspect"
	"github.com/plantstore/plantstore/auth/issuers"
	"github.com/plantstore/plantstore/auth/jws"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/auth/redisstate"
	"github.com/plantstore/plantstore/auth/revoke"
	"github.com/plantstore/plantstore/auth/ssf"
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/observability/setting"
	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/api"
	"github.com/plantstore/plantstore/plants/api/reference"
	"github.com/plantstore/plantstore/plants/postgres"
)

// serve runs the service until ctx ends or SIGINT or SIGTERM arrives, then
// drains; SIGHUP reloads the files. Each step is a function that
// reads the config and what the steps before it returned, in the order
// they run.
func serve(ctx context.Context, args []string, e env, stdout, stderr io.Writer) error {
	cfg, err := parseServeFlags(args, e, stderr)
	if err != nil {
		return err
	}
	defer holdHeapBallast(ctx, e.get)()

	out := observability.NewLogOutput(stderr)
	defer out.Close()
	log, access, err := observability.NewLogger(out, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		return cfg.refused(err)
	}
	if names := cfg.rows.unknownVars(e); len(names) > 0 {
		log.Warn("unknown PLANTSTORE_* environment variables are ignored", zap.Strings("names", names), zap.Strings("did_you_mean", cfg.rows.nearVars(names)))
	}
	version, revision := buildVersion()
	tracing, err := observability.NewTracing(ctx, observability.TracingOptions{
		Getenv: e.get, Version: version, Subject: cfg.TraceSubject, Log: log,
	})
	if err != nil {
		return usagef("serve: %v", err)
	}
	defer shutdownTracing(tracing, log, min(tracingShutdownTimeout, cfg.ShutdownTimeout))

	// Signals are taken from here on: one that comes while the service
	// starts is not lost, and never kills the process.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	bg := newBackground(ctx)
	defer bg.stop()
	reg := observability.NewRegistry(version, revision)
	readers := &readerCheck{log: log}
	cfg.DB.Loaded = readers.setCatalog // each snapshot, once loaded
	cat, err := openStore(bg, cfg, reg, log, tracing)
	if err != nil {
		return err
	}
	defer cat.close()
	keys, err := openKeys(bg, cfg, reg, log, tracing)
	if err != nil {
		return err
	}
	if cat.memory != nil {
		readers.setCatalog(cat.memory.Catalog())
	}
	readers.setIssuers(keys.issuerList())
	warnUnlistedResource(log, keys.verifier)
	apiOpts := newAPIOptions(cfg, log, reg, access, tracing, keys, cat)
	var draining atomic.Bool
	admin := observability.AdminHandler(observability.AdminOptions{
		Registry: reg, Ready: readiness(&draining, keys.verifier, cat.ready), OpenAPI: api.OpenAPI, Pprof: cfg.Pprof,
		Checks: readyChecks(&draining, keys, cat.ready), Docs: reference.Handler(),
	})
	srv, err := listen(cfg, log, newAPIHandler(apiOpts), admin, cat, version)
	if err != nil {
		return err
	}
	if cfg.Dev {
		banner := devSetup{config: cfg.JWT, catalog: cat.source}
		if err := printDevBanner(stdout, keys.devKey, banner, srv.apiLn.Addr()); err != nil {
			return fmt.Errorf("dev tokens: %w", err)
		}
	}
	s := &service{cfg: cfg, log: log, catalog: cat, keys: keys, readers: readers, bg: bg, servers: srv, draining: &draining}
	return s.run(ctx, sigs)
}

// catalog is the store openStore opened.
type catalog struct {
	store plants.Store
	name  string // memory, snapshot or postgres, for the log
	ready func(context.Context) error
	close func()
	// memory is the in-memory store of the -data file or of the sample,
	// which SIGHUP reloads; nil on PostgreSQL.
	memory *plants.MemoryStore
	// source is where the catalog comes from, for the -dev banner and
	// the listening line.
	source string
}

// openStore opens the catalog: PostgreSQL with -database-url (see
// openDatabase), else the -data file or the embedded sample catalog in
// memory.
func openStore(bg *background, cfg serveConfig, reg prometheus.Registerer, log *zap.Logger, tracing *observability.Tracing) (catalog, error) {
	m := plants.NewMetrics(reg)
	if cfg.DatabaseURL != "" {
		return openDatabase(bg, cfg, reg, log, tracing, m)
	}
	c, source := plants.SampleCatalog(), "the embedded sample catalog"
	if cfg.Data != "" {
		var err error
		if c, err = plants.LoadCatalogFile(cfg.Data); err != nil {
			return catalog{}, fmt.Errorf("load catalog: %w", err)
		}
		source = cfg.Data
	}
	mem := plants.NewMemoryStore(c, m)
	return catalog{store: mem, name: "memory", ready: mem.Ready, close: func() {}, memory: mem, source: source}, nil
}

// verification is the verifier openKeys built, with what SIGHUP reloads.
type verification struct {
	verifier *auth.Verifier
	metrics  *auth.Metrics
	// issuers are the issuers of the issuers file or of the -jwt-* flags,
	// with their key sources; nil with -dev.
	issuers *issuers.Set
	// devKey signs the -dev banner's tokens; nil without -dev.
	devKey crypto.Signer
	// nonces are the DPoP server nonces of -dpop-nonce-key-file; nil
	// without it.
	nonces *dpop.Nonces
	// shared is the state of -redis-url; nil without it.
	shared auth.SharedState
	// redisKey is the secret of -redis-key-file; nil without it.
	redisKey *redisstate.KeyFile
	// events takes the security events of -ssf-path; nil without it.
	events http.Handler
	// revocations are those in force; nil without a store of them.
	revocations *revoke.Revocations
}

// issuerList returns the issuers configured now: those of the issuers
// file, or the one of the -jwt-* flags (or -dev), which has no name.
func (vf verification) issuerList() []auth.Issuer {
	if vf.issuers != nil {
		return vf.issuers.Issuers()
	}
	return []auth.Issuer{{}}
}

// openKeys builds the verifier: of the issuers of -jwt-issuers-file, or of
// the one issuer the -jwt-* flags (or -dev) define. What a constructor
// refuses is the usage error of its flag, or of the issuers file's line.
func openKeys(bg *background, cfg serveConfig, reg prometheus.Registerer, log *zap.Logger, tracing *observability.Tracing) (verification, error) {
	vf := verification{metrics: auth.NewMetrics(reg)}
	opts, err := cfg.verifierOptions()
	if err != nil {
		return vf, err
	}
	bounds := cfg.Introspection
	if bounds.MaxRate == 0 {
		// The flag's 0 would be the Options' "default": no rate at all is
		// no introspection, which -jwt-introspection off says.
		return vf, cfg.refused(setting.Errorf("introspection_max_rate", "want a positive number of calls a second"))
	}
	bounds.Registerer, bounds.TracerProvider = reg, tracing.Provider()
	limits, err := introspect.NewLimits(bounds)
	if err != nil {
		return vf, cfg.refused(err)
	}
	if vf.nonces = opts.Nonces; vf.nonces != nil {
		bg.wait(watchNonceKey(bg.ctx, cfg.NonceKeyFile, vf.nonces, log))
	}
	secret, err := redisSecret(bg, cfg, &vf, log)
	if err != nil {
		return vf, err
	}
	if opts.Shared, err = openShared(bg, cfg, secret, reg, log); err != nil {
		return vf, err
	}
	vf.shared = opts.Shared
	var built atomic.Pointer[auth.Verifier]
	var watch *postgres.RevocationWatch
	if opts.Revocations, watch, err = openRevocations(bg, cfg, reg, log, &built); err != nil {
		return vf, err
	}
	// apply makes the verifier of the issuers.
	apply := func(is []auth.Issuer) (err error) {
		vf.verifier, err = auth.NewVerifier(opts, is...)
		built.Store(vf.verifier)
		return err
	}
	if r, ok := opts.Revocations.(*revoke.Revocations); ok {
		vf.revocations = r
	}
	if cfg.Dev {
		var set *keys.KeySet
		if vf.devKey, set, err = newDevKey(vf.metrics); err != nil {
			return vf, fmt.Errorf("dev key: %w", err)
		}
		return vf, cfg.refused(apply([]auth.Issuer{{Config: cfg.JWT, JWS: jws.New(set)}}))
	}
	o := issuers.Options{
		Introspection: limits,
		Defaults:      cfg.JWT,
		Sources: keys.SourceOptions{
			Refresh: cfg.JWKSRefresh, MinRefresh: cfg.JWKSMinRefresh,
			Log: log, TracerProvider: tracing.Provider(),
		},
		Metrics: vf.metrics,
	}
	if cfg.IssuersFile != "" {
		vf.issuers, err = issuers.Load(bg.ctx, cfg.IssuersFile, o, apply)
	} else {
		vf.issuers, err = issuers.Flags(bg.ctx, cfg.Keys, o, apply)
	}
	if err != nil {
		return vf, keyFileHint(cfg.Keys.KeyFile, cfg.refused(err))
	}
	if vf.revocations != nil {
		// Kept now for the issuers' max lifetimes, which were not known
		// when the file was read.
		vf.revocations.Prune(time.Now())
	}
	if cfg.SSFPath != "" {
		vf.events = newEventReceiver(cfg, reg, log, vf.verifier, eventStoreOf(cfg, watch, vf.revocations))
	}
	done := make(chan struct{})
	go func() { vf.issuers.Wait(); close(done) }()
	bg.wait(done)
	return vf, nil
}

// watchNonceKey reads the DPoP nonce key file at path again whenever it
// changes, as a key file is watched (see keys.WatchFile): a rotated Secret
// is followed without SIGHUP, the previous key's nonces accepted for one
// lifetime. It returns a channel closed once the watch stopped with ctx.
func watchNonceKey(ctx context.Context, path string, n *dpop.Nonces, log *zap.Logger) <-chan struct{} {
	return keys.WatchFile(ctx, path, log.With(zap.String("source", path)), func() {
		_, _ = n.ReloadLogged(log, time.Now())
	})
}

// redisSecretLabel names the secret derived from the DPoP nonce key for
// the keys in Redis, when there is no -redis-key-file.
const redisSecretLabel = "plantstore redis keys"

// redisSecret returns the secret the keys in Redis are hashed under: that
// of -redis-key-file, followed as it changes, else one derived from the
// DPoP nonce key; nil with neither.
func redisSecret(bg *background, cfg serveConfig, vf *verification, log *zap.Logger) (func() []byte, error) {
	switch {
	case cfg.RedisKeyFile != "" && cfg.RedisURL != "":
		kf, err := redisstate.LoadKeyFile(cfg.RedisKeyFile)
		if err != nil {
			return nil, cfg.refused(err)
		}
		vf.redisKey = kf
		path := cfg.RedisKeyFile
		bg.wait(keys.WatchFile(bg.ctx, path, log.With(zap.String("source", path)), func() { kf.Reload(log) }))
		return kf.Secret, nil
	case vf.nonces != nil:
		n := vf.nonces
		return func() []byte { return n.Derive(redisSecretLabel) }, nil
	}
	return nil, nil
}

// openRevocations reads the revocations of the database of -database-url,
// or of -revocations-file, and follows their changes; nil without either. A cutoff is kept for its issuer's max lifetime, as
// the verifier v holds it, else for -revocation-retention.
func openRevocations(bg *background, cfg serveConfig, reg prometheus.Registerer, log *zap.Logger, v *atomic.Pointer[auth.Verifier]) (auth.Revocations, *postgres.RevocationWatch, error) {
	if cfg.RevocationsFile == "" && cfg.DatabaseURL == "" {
		return nil, nil, nil
	}
	r := revoke.New(revoke.Options{
		Retention: cfg.RevocationRetention, Leeway: cfg.Verify.Leeway, Registerer: reg, Log: log,
		MaxLifetime: func(issuer string) time.Duration {
			if v := v.Load(); v != nil {
				c, _ := v.IssuerConfig(issuer)
				return c.MaxLifetime
			}
			return 0
		},
	})
	if cfg.DatabaseURL != "" {
		w, err := watchDatabaseRevocations(bg, cfg, log, r)
		return r, w, err
	}
	if _, err := r.LoadFile(cfg.RevocationsFile, time.Now()); err != nil {
		return nil, nil, cfg.refused(err)
	}
	n := r.Len()
	log.Info("revocations loaded", zap.String("source", cfg.RevocationsFile), zap.Int("subjects", n[0]), zap.Int("clients", n[1]), zap.Int("issuers", n[2]), zap.Int("tokens", n[3]))
	bg.wait(r.WatchFile(bg.ctx, cfg.RevocationsFile))
	return r, nil, nil
}

// watchDatabaseRevocations keeps r the revocations of the database until
// bg stops: read at start and within a second of each change, polled
// every -database-poll; while the database cannot be read, the last ones
// read stay in force, and plantstore_revocations_age_seconds grows.
func watchDatabaseRevocations(bg *background, cfg serveConfig, log *zap.Logger, r *revoke.Revocations) (*postgres.RevocationWatch, error) {
	o := cfg.DB
	o.Log = log.With(zap.String("source", "database"))
	apply := func(rows []postgres.Revocation, at time.Time) {
		entries := make([]revoke.Entry, len(rows))
		for i, row := range rows {
			entries[i] = revoke.Entry(row)
		}
		r.Replace(entries, at)
	}
	w, err := postgres.WatchRevocations(bg.ctx, cfg.DatabaseURL, o, 0, apply, r.Confirm)
	if err != nil {
		return nil, cfg.refused(err)
	}
	bg.wait(w.Done())
	return w, nil
}

// eventMaxAge is how old a security event may be by its iat.
const eventMaxAge = ssf.DefaultMaxAge

// newEventReceiver returns the receiver of the security events of
// -ssf-path: SETs signed by the issuers of v, for -public-url, recorded in
// store.
func newEventReceiver(cfg serveConfig, reg prometheus.Registerer, log *zap.Logger, v *auth.Verifier, store ssf.Store) http.Handler {
	aud := []string{cfg.PublicURL}
	if trimmed := strings.TrimSuffix(cfg.PublicURL, "/"); trimmed != cfg.PublicURL {
		aud = append(aud, trimmed)
	} else {
		aud = append(aud, cfg.PublicURL+"/")
	}
	return ssf.New(ssf.Options{
		Issuers: v, Audiences: aud, Store: store, MaxAge: eventMaxAge, Leeway: cfg.Verify.Leeway,
		Registerer: reg, Log: log.With(zap.String("source", "ssf")),
	})
}

// eventStoreOf returns where the security events are recorded: the
// database w reads the revocations of, else the -revocations-file whose
// revocations in force are r.
func eventStoreOf(cfg serveConfig, w *postgres.RevocationWatch, r *revoke.Revocations) ssf.Store {
	if w != nil {
		return eventStore{w}
	}
	// An event is accepted while its iat is at most eventMaxAge old and
	// at most the leeway ahead: its jti is remembered that long.
	return fileEventStore{revoke.NewEventFile(cfg.RevocationsFile, r, revoke.EventFileOptions{Window: eventMaxAge + 2*cfg.Verify.Leeway + time.Second})}
}

// eventStore records security events in the revocations database.
type eventStore struct{ w *postgres.RevocationWatch }

func (s eventStore) Record(ctx context.Context, issuer, jti string, c ssf.Cutoff) (bool, error) {
	return s.w.RecordEvent(ctx, issuer, jti, postgres.Revocation{Issuer: c.Issuer, Sub: c.Subject, Before: c.Before})
}

// fileEventStore records security events in the revocations file, each
// jti applied once by this replica.
type fileEventStore struct{ f *revoke.EventFile }

func (s fileEventStore) Record(_ context.Context, issuer, jti string, c ssf.Cutoff) (bool, error) {
	return s.f.Record(issuer, jti, revoke.Entry{Issuer: c.Issuer, Sub: c.Subject, Before: c.Before.UTC()})
}

// openShared connects the shared state of -redis-url, nil without it; it
// is closed when bg stops. A Redis that does not answer is no error: each
// replica then uses its own state until it does.
func openShared(bg *background, cfg serveConfig, secret func() []byte, reg prometheus.Registerer, log *zap.Logger) (auth.SharedState, error) {
	if cfg.RedisURL == "" {
		return nil, nil
	}
	st, err := redisstate.New(redisstate.Options{
		URL: cfg.RedisURL, Timeout: cfg.RedisTimeout, Rate: cfg.RateLimit, Burst: cfg.RateBurst,
		Secret: secret, Log: log, Registerer: reg,
	})
	if err != nil {
		return nil, cfg.refused(err)
	}
	if secret == nil {
		log.Warn("shared state keys are plain hashes: whoever reads Redis can confirm a guessed subject; set -redis-key-file (or -dpop-nonce-key-file)")
	}
	done := make(chan struct{})
	go func() {
		<-bg.ctx.Done()
		_ = st.Close()
		close(done)
	}()
	bg.wait(done)
	return st, nil
}

// readiness is the check of /readyz: not draining, keys usable, the store
// answering.
func readiness(draining *atomic.Bool, v *auth.Verifier, store func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if draining.Load() {
			return errors.New("draining")
		}
		if err := v.Ready(); err != nil {
			return fmt.Errorf("keys: %w", err)
		}
		if err := store(ctx); err != nil {
			return fmt.Errorf("store: %w", err)
		}
		return nil
	}
}

// warnUnlistedResource warns, at start, when tokens whose aud is the
// resource URL are refused: an issuer names audiences (-jwt-audience, or
// audiences in the issuers file) while -public-url is not set. A client
// that follows /.well-known/oauth-protected-resource asks its identity
// provider for that URL as the audience (RFC 8707); it is accepted as an
// audience of every issuer only once -public-url says what it is.
func warnUnlistedResource(log *zap.Logger, v *auth.Verifier) {
	issuers := v.UnlistedResource()
	if len(issuers) == 0 {
		return
	}
	for i, name := range issuers {
		if name == "" {
			issuers[i] = "-jwt-audience"
		}
	}
	log.Warn("tokens whose aud is this resource's URL are refused: an audience list is set but -public-url is not; clients that follow /.well-known/oauth-protected-resource ask for that URL as their audience (RFC 8707), which is accepted only with -public-url set to the URL callers use",
		zap.Strings("audiences_of", issuers), zap.String("set", envName("public-url")))
}
