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
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/api"
)

// maxHeaderBytes is the request header budget. api.HeaderLimit answers
// 431 in the Error shape at this size; net/http's own limit (this plus its
// 4 KiB slack) is the backstop for what never reaches a handler.
const maxHeaderBytes = 16 << 10

// adminShutdownTimeout bounds the admin server's drain: probes and
// scrapes are short.
const adminShutdownTimeout = 5 * time.Second

// serve runs the service until ctx ends or SIGINT or SIGTERM arrives, then
// drains (SPEC §9); SIGHUP reloads the files. Each step is a method of
// service, in the order it runs.
func serve(ctx context.Context, args []string, e env, stdout, stderr io.Writer) error {
	cfg, err := parseServeFlags(args, e, stderr)
	if err != nil {
		return err
	}
	ballastCtx, stopBallast := context.WithCancel(ctx)
	ballastHeld := holdBallast(ballastCtx, heapBallast(e.get), ballastCheck)
	defer func() { stopBallast(); <-ballastHeld }()

	ver, rev := buildVersion()
	out := observability.NewLogOutput(stderr)
	defer out.Close()
	log, access, err := observability.NewLogger(out, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		return cfg.usage(err)
	}
	if names := unknownVars(e, cfg.flags, "dev"); len(names) > 0 {
		log.Warn("unknown PLANTSTORE_* environment variables are ignored", zap.Strings("names", names))
	}

	tracing, err := observability.NewTracing(ctx, observability.TracingOptions{
		Getenv: e.get, Version: ver, Subject: cfg.TraceSubject, Log: log,
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

	s := newService(ctx, cfg, log, observability.NewRegistry(ver, rev))
	s.tracing, s.version = tracing, ver
	defer s.stopBackground()
	if err := s.openStore(); err != nil {
		return err
	}
	defer s.closeStore()
	if err := s.openKeys(); err != nil {
		return err
	}
	if err := s.listen(access); err != nil {
		return err
	}
	if cfg.Dev {
		if err := printDevBanner(stdout, s.devKey, s.dev, s.apiLn.Addr()); err != nil {
			return fmt.Errorf("dev tokens: %w", err)
		}
	}
	return s.run(ctx, sigs)
}

// service is the running service: what each step of serve made.
type service struct {
	cfg     serveConfig
	log     *zap.Logger
	reg     *prometheus.Registry
	tracing *observability.Tracing
	version string
	// bg is the context of background work (key refreshes). It outlives
	// the stop signal: keys must keep verifying while requests drain.
	bg     context.Context
	stopBg context.CancelFunc
	loops  []<-chan struct{} // closed when each background loop has ended

	store         plants.Store
	storeName     string
	storeReady    func(context.Context) error
	closeStore    func()
	memory        *plants.MemoryStore // nil on PostgreSQL
	catalogSource string              // for the -dev banner

	verifier    *auth.Verifier
	authMetrics *auth.Metrics
	source      *auth.Source      // nil with -dev or an issuers file
	issuers     *auth.IssuersFile // nil without -jwt-issuers-file
	devKey      crypto.Signer
	dev         devSetup

	draining       atomic.Bool
	api, admin     *http.Server
	apiLn, adminLn net.Listener
}

func newService(ctx context.Context, cfg serveConfig, log *zap.Logger, reg *prometheus.Registry) *service {
	s := &service{
		cfg:        cfg,
		log:        log,
		reg:        reg,
		closeStore: func() {},
	}
	s.bg, s.stopBg = context.WithCancel(context.WithoutCancel(ctx))
	return s
}

// stopBackground ends the background loops and waits for them, so that
// none logs after serve returns.
func (s *service) stopBackground() {
	s.stopBg()
	for _, done := range s.loops {
		<-done
	}
}

// openStore opens the catalog: PostgreSQL with -database-url (see
// openDatabase), else the -data file or the embedded sample catalog in
// memory.
func (s *service) openStore() error {
	m := plants.NewMetrics(s.reg)
	if s.cfg.DatabaseURL != "" {
		return s.openDatabase(m)
	}
	catalog, source := plants.SampleCatalog(), "the embedded sample catalog"
	if s.cfg.Data != "" {
		var err error
		if catalog, err = plants.LoadCatalogFile(s.cfg.Data); err != nil {
			return fmt.Errorf("load catalog: %w", err)
		}
		source = s.cfg.Data
	}
	s.memory = plants.NewMemoryStore(catalog, m)
	s.store, s.storeReady, s.storeName, s.catalogSource = s.memory, s.memory.Ready, "memory", source
	return nil
}

// openKeys builds the verifier: of the issuers of -jwt-issuers-file, or of
// the one issuer the -jwt-* flags (or -dev) define.
func (s *service) openKeys() error {
	s.authMetrics = auth.NewMetrics(s.reg)
	if s.cfg.IssuersFile != "" {
		return s.openIssuersFile()
	}
	var keys auth.Keys
	if s.cfg.Dev {
		key, devKeys, err := newDevKey(s.authMetrics)
		if err != nil {
			return fmt.Errorf("dev key: %w", err)
		}
		s.devKey, s.dev = key, devSetup{config: s.cfg.JWT, catalog: s.catalogSource}
		keys = devKeys
	} else {
		src, err := auth.OpenSource(s.bg, "", s.cfg.JWT, auth.KeySource{
			JWKSURL: s.cfg.JWKSURL, KeyFile: s.cfg.KeyFile, HMACSecretFile: s.cfg.HMACSecretFile,
		}, s.sourceOptions())
		var ce *auth.ConfigError
		if errors.As(err, &ce) {
			return s.cfg.usage(err)
		}
		if err != nil {
			return err
		}
		s.source, keys = src, src.Keys()
		s.loops = append(s.loops, src.Done())
	}
	v, err := auth.NewVerifier(s.cfg.Verify, auth.Issuer{Config: s.cfg.JWT, Keys: keys})
	if err != nil {
		return s.cfg.usage(err)
	}
	s.verifier = v
	return nil
}

// sourceOptions are the options of the key sources.
func (s *service) sourceOptions() auth.SourceOptions {
	return auth.SourceOptions{
		Refresh: s.cfg.JWKSRefresh, MinRefresh: s.cfg.JWKSMinRefresh,
		RequiredScope: s.cfg.JWT.RequiredScope, DPoP: s.cfg.JWT.DPoP, Log: s.log, Metrics: s.authMetrics,
		TracerProvider: s.tracing.Provider(),
	}
}

// openIssuersFile builds the issuers of -jwt-issuers-file and their
// verifier. What the file says wrong is a usage error naming its line.
func (s *service) openIssuersFile() error {
	f, err := auth.LoadIssuersFile(s.bg, s.cfg.IssuersFile, s.sourceOptions())
	var fe *auth.FileError
	var ce *auth.ConfigError
	switch {
	case errors.As(err, &fe):
		return usagef("serve: -jwt-issuers-file: %v", err)
	case errors.As(err, &ce):
		// A setting of the flags, such as a refresh period.
		return s.cfg.usage(err)
	case err != nil:
		return err
	}
	s.issuers = f
	done := make(chan struct{})
	go func() { f.Wait(); close(done) }()
	s.loops = append(s.loops, done)
	v, err := auth.NewVerifier(s.cfg.Verify, f.Issuers()...)
	if err != nil {
		if errors.As(f.Explain(err), &fe) {
			return usagef("serve: -jwt-issuers-file: %v", fe)
		}
		return s.cfg.usage(err)
	}
	s.verifier = v
	return nil
}

// ready is the readiness check of /readyz: not draining, keys usable, the
// store answering.
func (s *service) ready(ctx context.Context) error {
	if s.draining.Load() {
		return errors.New("draining")
	}
	if err := s.verifier.Ready(); err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	if err := s.storeReady(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// listen builds the two servers and binds their listeners.
func (s *service) listen(access *observability.AccessLog) error {
	var afterAuth []gin.HandlerFunc
	if s.cfg.RateLimit != 0 {
		limit, err := auth.NewRateLimit(s.cfg.RateLimit, s.cfg.RateBurst)
		if err != nil {
			return s.cfg.usage(err)
		}
		afterAuth = append(afterAuth, auth.LimitSubjects(limit))
	}
	handler := newAPIHandler(s.log, s.reg, access, s.tracing, s.verifier, s.authMetrics, s.store, s.cfg.TrustedProxies, s.cfg.WriteTimeout, afterAuth...)
	serverLog := zap.NewStdLog(s.log.Named("http"))
	// The first read and write deadlines: the list handler moves the write
	// deadline (and the read one, which would otherwise end the request's
	// context) before each write, so a long stream to a reader that keeps
	// up is never cut, and a stalled reader is cut after -write-timeout.
	s.api = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       s.cfg.WriteTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          serverLog,
		// "OPTIONS *" would get net/http's bare 200; like any other path it
		// is the API's 404.
		DisableGeneralOptionsHandler: true,
	}
	s.admin = &http.Server{
		Handler: observability.AdminHandler(observability.AdminOptions{
			Registry: s.reg, Ready: s.ready, OpenAPI: api.OpenAPI, Pprof: s.cfg.Pprof,
		}),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          serverLog,
	}
	var err error
	if s.apiLn, err = net.Listen("tcp", s.cfg.Addr); err != nil {
		return fmt.Errorf("API listener: %w", err)
	}
	if s.adminLn, err = net.Listen("tcp", s.cfg.AdminAddr); err != nil {
		s.apiLn.Close()
		return fmt.Errorf("admin listener: %w", err)
	}
	s.log.Info("listening",
		zap.String("api_addr", s.apiLn.Addr().String()),
		zap.String("admin_addr", s.adminLn.Addr().String()),
		zap.String("store", s.storeName),
		zap.String("version", s.version),
		zap.Bool("dev", s.cfg.Dev))
	return nil
}

// newAPIHandler is the whole API surface: the middleware order, the one
// route, and the 404 and 405 answers. afterAuth (the rate limit) runs
// between the credential check and the handler.
func newAPIHandler(log *zap.Logger, reg prometheus.Registerer, access *observability.AccessLog, tracing *observability.Tracing, v *auth.Verifier, am *auth.Metrics, store plants.Store, trusted []netip.Prefix, writeTimeout time.Duration, afterAuth ...gin.HandlerFunc) http.Handler {
	e := gin.New()
	// SPEC §1: every other path is 404 with no redirects, another method is
	// 405, and X-Forwarded-For counts only through -trusted-proxies.
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.RemoveExtraSlash = false
	e.HandleMethodNotAllowed = true
	e.ForwardedByClientIP = false
	// Request ID, metrics and the access line around everything; then the
	// error renderer, which recovers panics; then the header limit.
	e.Use(
		observability.Middleware(access, observability.NewHTTPMetrics(reg), trusted, tracing),
		api.RenderErrors(log),
		api.HeaderLimit(maxHeaderBytes),
	)
	route := append([]gin.HandlerFunc{auth.Middleware(v, am)}, afterAuth...)
	route = append(route, api.ListHandler(store, api.NewMetrics(reg), writeTimeout))
	e.GET("/plants", route...)
	e.HEAD("/plants", route...)
	// RFC 9728: what a client needs to get a token; no credential needed.
	e.GET(auth.ResourceMetadataPath, auth.MetadataHandler(v))
	e.HEAD(auth.ResourceMetadataPath, auth.MetadataHandler(v))
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

// run serves until ctx ends or a stop signal comes on sigs, reloading on
// SIGHUP, then drains.
func (s *service) run(ctx context.Context, sigs <-chan os.Signal) error {
	errc := make(chan error, 2)
	go func() { errc <- s.api.Serve(s.apiLn) }()
	go func() { errc <- s.admin.Serve(s.adminLn) }()
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

// drain stops the service as SPEC §9 says: /readyz turns 503, the API
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
		go func() { done <- s.api.Shutdown(ctx) }()
		var err error
		err, forced = waitOrStop(done, sigs)
		cancel()
		if !forced {
			if err != nil {
				// The stop was asked for and happens: the connections still
				// busy after -shutdown-timeout are closed, and the exit stays
				// clean.
				s.log.Warn("requests still in flight after the shutdown timeout were cut", zap.Duration("shutdown_timeout", s.cfg.ShutdownTimeout))
			}
		}
	}
	if forced {
		s.log.Warn("second stop signal: closing every connection now")
	}
	_ = s.api.Close()
	actx, acancel := context.WithTimeout(context.Background(), adminShutdownTimeout)
	if err := s.admin.Shutdown(actx); err != nil {
		_ = s.admin.Close()
	}
	acancel()
	s.stopBackground()
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

// reload re-reads -data, the key files and the issuers file (SIGHUP). A
// bad file is refused and what was serving keeps serving.
func (s *service) reload() {
	if s.issuers != nil {
		added, removed, err := s.issuers.Reload(func(is []auth.Issuer) error { return s.verifier.SetIssuers(is...) })
		if err != nil {
			s.log.Error("issuers file reload refused; the previous issuers keep serving", zap.Error(err))
		} else {
			s.log.Info("issuers file reloaded", zap.Strings("added", added), zap.Strings("removed", removed))
		}
	}
	if s.memory != nil && s.cfg.Data != "" {
		catalog, err := s.memory.ReloadFile(s.cfg.Data)
		if err != nil {
			s.log.Error("catalog reload refused; the previous catalog keeps serving", zap.Error(err))
		} else {
			s.log.Info("catalog reloaded", zap.Int("plants", catalog.Len()))
		}
	}
	if s.source != nil {
		s.source.Reload()
	}
}
