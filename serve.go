package main

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/redisstate"
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/api"
	"github.com/plantstore/plantstore/plants/api/reference"
)

// maxHeaderBytes is the request header budget. api.HeaderLimit answers
// 431 in the Error shape at this size; net/http's own limit (this plus its
// 4 KiB slack) is the backstop for what never reaches a handler.
const maxHeaderBytes = 16 << 10

// adminShutdownTimeout bounds the admin server's drain: probes and
// scrapes are short.
const adminShutdownTimeout = 5 * time.Second

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

// background is the work of the service that outlives requests (key
// refreshes, catalog loads): its context, which the stop signal does not
// end, since keys must keep verifying while requests drain, and the loops
// to wait for.
type background struct {
	ctx    context.Context
	cancel context.CancelFunc
	loops  []<-chan struct{} // each closed when its loop has ended
}

func newBackground(ctx context.Context) *background {
	b := &background{}
	b.ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return b
}

// wait adds a loop, done when done is closed.
func (b *background) wait(done <-chan struct{}) { b.loops = append(b.loops, done) }

// stop ends the background work and waits for it, so that nothing logs
// after serve returns.
func (b *background) stop() {
	b.cancel()
	for _, done := range b.loops {
		<-done
	}
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
	// source is the -jwt-* issuer's key source; nil with -dev or an
	// issuers file.
	source *auth.Source
	// issuers is the issuers file; nil without -jwt-issuers-file.
	issuers *auth.IssuersFile
	// devKey signs the -dev banner's tokens; nil without -dev.
	devKey crypto.Signer
	// nonces are the DPoP server nonces of -dpop-nonce-key-file; nil
	// without it.
	nonces *auth.Nonces
	// shared is the state of -redis-url; nil without it.
	shared auth.SharedState
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
// the one issuer the -jwt-* flags (or -dev) define.
func openKeys(bg *background, cfg serveConfig, reg prometheus.Registerer, log *zap.Logger, tracing *observability.Tracing) (verification, error) {
	vf := verification{metrics: auth.NewMetrics(reg)}
	opts, err := cfg.verifierOptions()
	if err != nil {
		return vf, err
	}
	if vf.nonces = opts.Nonces; vf.nonces != nil {
		bg.wait(vf.nonces.Watch(bg.ctx, log))
	}
	if opts.Shared, err = openShared(bg, cfg, reg, log); err != nil {
		return vf, err
	}
	vf.shared = opts.Shared
	src := auth.SourceOptions{
		Refresh: cfg.JWKSRefresh, MinRefresh: cfg.JWKSMinRefresh,
		RequiredScope: cfg.JWT.RequiredScope, DPoP: cfg.JWT.DPoP, MTLS: cfg.JWT.MTLS,
		TokenTypes: cfg.JWT.TokenTypes, Clients: cfg.JWT.Clients,
		MaxLifetime: cfg.JWT.MaxLifetime, MaxStale: cfg.JWT.MaxStale,
		Log: log, Metrics: vf.metrics, TracerProvider: tracing.Provider(),
	}
	if cfg.IssuersFile != "" {
		return openIssuersFile(bg, cfg, opts, src, vf)
	}
	var keys auth.Keys
	if cfg.Dev {
		var set *auth.KeySet
		if vf.devKey, set, err = newDevKey(vf.metrics); err != nil {
			return vf, fmt.Errorf("dev key: %w", err)
		}
		keys = set
	} else {
		if vf.source, err = auth.OpenSource(bg.ctx, "", cfg.JWT, cfg.Keys, src); err != nil {
			return vf, keyFileHint(cfg.Keys.KeyFile, cfg.refused(err))
		}
		bg.wait(vf.source.Done())
		keys = vf.source.Keys()
	}
	if vf.verifier, err = auth.NewVerifier(opts, auth.Issuer{Config: cfg.JWT, Keys: keys}); err != nil {
		return vf, cfg.refused(err)
	}
	return vf, nil
}

// openShared connects the shared state of -redis-url, nil without it; it
// is closed when bg stops. A Redis that does not answer is no error: each
// replica then uses its own state until it does.
func openShared(bg *background, cfg serveConfig, reg prometheus.Registerer, log *zap.Logger) (auth.SharedState, error) {
	if cfg.RedisURL == "" {
		return nil, nil
	}
	st, err := redisstate.New(redisstate.Options{
		URL: cfg.RedisURL, Timeout: cfg.RedisTimeout, Rate: cfg.RateLimit, Burst: cfg.RateBurst,
		Log: log, Registerer: reg,
	})
	if err != nil {
		return nil, fmt.Errorf("-redis-url: %w", err)
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

// openIssuersFile builds the issuers of -jwt-issuers-file and their
// verifier. What the file says wrong is a usage error naming its line; a
// setting the file's issuers took from the flags is named as its flag.
func openIssuersFile(bg *background, cfg serveConfig, opts auth.Options, src auth.SourceOptions, vf verification) (verification, error) {
	var fe *auth.FileError
	f, err := auth.LoadIssuersFile(bg.ctx, cfg.IssuersFile, src)
	if errors.As(err, &fe) {
		return vf, usagef("serve: -jwt-issuers-file: %v", err)
	}
	if err != nil {
		return vf, cfg.refused(err)
	}
	vf.issuers = f
	done := make(chan struct{})
	go func() { f.Wait(); close(done) }()
	bg.wait(done)
	if vf.verifier, err = auth.NewVerifier(opts, f.Issuers()...); err != nil {
		if errors.As(f.Explain(err), &fe) {
			return vf, usagef("serve: -jwt-issuers-file: %v", fe)
		}
		return vf, cfg.refused(err)
	}
	return vf, nil
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

// servers are the API and admin servers with their listeners bound.
type servers struct {
	api, admin     *http.Server
	apiLn, adminLn net.Listener
}

// listen builds the two servers of api and admin and binds their
// listeners; cat and version are for the log line that says so.
func listen(cfg serveConfig, log *zap.Logger, api, admin http.Handler, cat catalog, version string) (servers, error) {
	serverLog := zap.NewStdLog(log.Named("http"))
	// The first read and write deadlines: the list handler moves the write
	// deadline (and the read one, which would otherwise end the request's
	// context) before each write, so a long stream to a reader that keeps
	// up is never cut, and a stalled reader is cut after -write-timeout.
	s := servers{
		api: &http.Server{
			Handler:           api,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       cfg.WriteTimeout,
			WriteTimeout:      cfg.WriteTimeout,
			IdleTimeout:       120 * time.Second,
			MaxHeaderBytes:    maxHeaderBytes,
			ErrorLog:          serverLog,
			// "OPTIONS *" would get net/http's bare 200; like any other
			// path it is the API's 404.
			DisableGeneralOptionsHandler: true,
		},
		admin: &http.Server{
			Handler:           admin,
			ReadHeaderTimeout: 5 * time.Second,
			IdleTimeout:       120 * time.Second,
			ErrorLog:          serverLog,
		},
	}
	var err error
	if s.apiLn, err = net.Listen("tcp", cfg.Addr); err != nil {
		return s, listenError(cfg, "API listener", "addr", err)
	}
	if s.adminLn, err = net.Listen("tcp", cfg.AdminAddr); err != nil {
		s.apiLn.Close()
		return s, listenError(cfg, "admin listener", "admin-addr", err)
	}
	log.Info("listening",
		zap.String("api_addr", s.apiLn.Addr().String()),
		zap.String("admin_addr", s.adminLn.Addr().String()),
		zap.String("store", cat.name),
		zap.String("catalog", cat.source),
		zap.String("version", version),
		zap.Bool("dev", cfg.Dev))
	return s, nil
}

// newAPIOptions gathers what the API handler is built from: the log,
// metrics and tracing, the verifier (which applies -rate-limit), and the
// store.
func newAPIOptions(cfg serveConfig, log *zap.Logger, reg prometheus.Registerer, access *observability.AccessLog, tracing *observability.Tracing, keys verification, cat catalog) apiOptions {
	return apiOptions{
		log: log, reg: reg, access: access, tracing: tracing,
		verifier: keys.verifier, authMetrics: keys.metrics, store: cat.store,
		trustedProxies: cfg.TrustedProxies, writeTimeout: cfg.WriteTimeout,
		linkBase: linkBase(cfg.PublicURL), cors: cfg.CORS,
	}
}

// linkBase is what the Link header of a page puts before "/plants":
// -public-url without its trailing "/", or "" (a relative link) without it.
// The URL was checked with the verifier's options.
func linkBase(publicURL string) string {
	u, err := url.Parse(publicURL)
	if publicURL == "" || err != nil {
		return ""
	}
	origin, prefix := auth.PublicOrigin(u)
	return origin + prefix
}

// apiOptions is what the API handler is built from.
type apiOptions struct {
	log            *zap.Logger
	reg            prometheus.Registerer
	access         *observability.AccessLog
	tracing        *observability.Tracing
	verifier       *auth.Verifier
	authMetrics    *auth.Metrics
	store          plants.Store
	trustedProxies []netip.Prefix
	writeTimeout   time.Duration
	linkBase       string    // before "/plants" in Link headers
	cors           *api.CORS // nil: no CORS
}

// newAPIHandler is the whole API surface: the middleware order, the
// routes, and the 404 and 405 answers.
func newAPIHandler(o apiOptions) http.Handler {
	e := gin.New()
	// Every other path is 404 with no redirects, another method is 405,
	// and X-Forwarded-For counts only through -trusted-proxies.
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.RemoveExtraSlash = false
	e.HandleMethodNotAllowed = true
	e.ForwardedByClientIP = false
	// Request ID, metrics and the access line around everything; then the
	// error renderer, which recovers panics; then the CORS headers; then
	// the header limit.
	e.Use(
		observability.Middleware(o.access, observability.NewHTTPMetrics(o.reg), o.trustedProxies, o.tracing),
		api.RenderErrors(o.log),
	)
	// With -cors-origins, every answer (refusals and 404 too) tells the
	// browser whether the page may read it.
	if o.cors != nil {
		e.Use(o.cors.Headers())
	}
	e.Use(api.HeaderLimit(maxHeaderBytes))
	// The verifier applies -rate-limit too: a DPoP request is counted
	// before its proof's signature is verified.
	route := []gin.HandlerFunc{auth.Middleware(o.verifier, o.authMetrics), api.ListHandler(o.store, api.NewMetrics(o.reg), o.writeTimeout, o.linkBase)}
	e.GET("/plants", route...)
	e.HEAD("/plants", route...)
	// A preflight needs no credential (the browser sends the token only
	// once the preflight allowed it) and is never an auth failure.
	if o.cors != nil {
		e.OPTIONS("/plants", o.cors.Preflight)
	}
	// RFC 9728: what a client needs to get a token; no credential needed.
	e.GET(auth.ResourceMetadataPath, auth.MetadataHandler(o.verifier))
	e.HEAD(auth.ResourceMetadataPath, auth.MetadataHandler(o.verifier))
	e.NoRoute(api.NotFound)
	// gin reaches NoMethod only for a path that a route matched with
	// another method: one of the two routes, named from the path.
	e.NoMethod(func(c *gin.Context) {
		route := "/plants"
		if c.Request.URL.Path == auth.ResourceMetadataPath {
			route = auth.ResourceMetadataPath
		}
		observability.Annotate(c).SetRoute(route)
	}, api.MethodNotAllowed)
	return e
}

// service is the running service: what the steps of serve opened, which
// its main loop serves, reloads and drains.
type service struct {
	cfg      serveConfig
	log      *zap.Logger
	catalog  catalog
	keys     verification
	readers  *readerCheck
	bg       *background
	servers  servers
	draining *atomic.Bool // read by /readyz
}

// run serves until ctx ends or a stop signal comes on sigs, reloading on
// SIGHUP, then drains.
func (s *service) run(ctx context.Context, sigs <-chan os.Signal) error {
	errc := make(chan error, 2)
	go func() { errc <- s.servers.api.Serve(s.servers.apiLn) }()
	go func() { errc <- s.servers.admin.Serve(s.servers.adminLn) }()
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				s.reload()
				continue
			}
			return s.drain(sigs)
		case err := <-errc:
			return fmt.Errorf("serve: %w", err)
		case <-ctx.Done():
			return s.drain(sigs)
		}
	}
}

// errForced ends a drain cut short by a second stop signal.
var errForced = errors.New("stopped by a second signal before the drain finished")

// drain stops the service: /readyz turns 503, the API
// serves -shutdown-delay longer, then in-flight requests get
// -shutdown-timeout. A second SIGINT or SIGTERM skips what is left and
// closes every connection at once.
func (s *service) drain(sigs <-chan os.Signal) error {
	s.draining.Store(true)
	s.log.Info("draining", zap.Duration("shutdown_delay", s.cfg.ShutdownDelay), zap.Duration("shutdown_timeout", s.cfg.ShutdownTimeout))
	_, forced := waitOrStop(time.After(s.cfg.ShutdownDelay), sigs)
	if !forced {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		done := make(chan error, 1)
		go func() { done <- s.servers.api.Shutdown(ctx) }()
		var err error
		err, forced = waitOrStop(done, sigs)
		cancel()
		if !forced && err != nil {
			// The stop was asked for and happens: the connections still
			// busy after -shutdown-timeout are closed, and the exit stays
			// clean.
			s.log.Warn("requests still in flight after the shutdown timeout were cut", zap.Duration("shutdown_timeout", s.cfg.ShutdownTimeout))
		}
	}
	if forced {
		s.log.Warn("second stop signal: closing every connection now")
	}
	_ = s.servers.api.Close()
	actx, acancel := context.WithTimeout(context.Background(), adminShutdownTimeout)
	if err := s.servers.admin.Shutdown(actx); err != nil {
		_ = s.servers.admin.Close()
	}
	acancel()
	s.bg.stop()
	s.log.Info("stopped")
	if forced {
		return errForced
	}
	return nil
}

// tracingShutdownTimeout bounds the export of the last spans at exit (or
// -shutdown-timeout, when shorter): a collector that is down must not hold
// the process.
const tracingShutdownTimeout = 5 * time.Second

// shutdownTracing exports the spans still queued, within timeout.
func shutdownTracing(t *observability.Tracing, log *zap.Logger, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("tracing: spans still queued at exit were dropped", zap.Error(err))
	}
}

// waitOrStop waits for a value from done and returns it, or for a stop
// signal (SIGINT, SIGTERM) and reports true; SIGHUP is ignored meanwhile.
func waitOrStop[T any](done <-chan T, sigs <-chan os.Signal) (v T, stopped bool) {
	for {
		select {
		case v = <-done:
			return v, false
		case sig := <-sigs:
			if sig != syscall.SIGHUP {
				return v, true
			}
		}
	}
}

// reload re-reads -data, the key files, the issuers file and the DPoP
// nonce key (SIGHUP; the key files and the nonce key are also watched). A
// bad file is refused and what was serving keeps serving. The catalog's
// readers are checked against the issuers once, after both.
func (s *service) reload() {
	var (
		issuers []auth.Issuer
		catalog *plants.Catalog
	)
	defer func() {
		if catalog != nil || issuers != nil {
			s.readers.reloaded(catalog, issuers)
		}
	}()
	if f := s.keys.issuers; f != nil {
		added, removed, err := f.Reload(func(is []auth.Issuer) error { return s.keys.verifier.SetIssuers(is...) })
		if err != nil {
			s.log.Error("issuers file reload refused; the previous issuers keep serving", zap.Error(err))
		} else {
			s.log.Info("issuers file reloaded", zap.Strings("added", added), zap.Strings("removed", removed))
			issuers = f.Issuers()
		}
	}
	if s.catalog.memory != nil && s.cfg.Data != "" {
		c, err := s.catalog.memory.ReloadFile(s.cfg.Data)
		if err != nil {
			s.log.Error("catalog reload refused; the previous catalog keeps serving", zap.Error(err))
		} else {
			s.log.Info("catalog reloaded", zap.Int("plants", c.Len()))
			catalog = c
		}
	}
	if s.keys.source != nil {
		// A SIGHUP is asked for: the source says so even when nothing
		// changed.
		s.keys.source.Reload()
	}
	if n := s.keys.nonces; n != nil {
		_, _ = n.ReloadLogged(s.log, time.Now())
	}
}
