package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/plants"
)

// adminShutdownTimeout bounds the admin server's drain: probes and
// scrapes are short.
const adminShutdownTimeout = 5 * time.Second

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

// reload re-reads -data, the key files, the issuers file, the DPoP nonce
// key and the Redis key (SIGHUP; the key files, the nonce key and the
// Redis key are also watched). A
// bad file is refused and what was serving keeps serving. The catalog's
// readers are checked against the issuers once, after both.
func (s *service) reload() {
	var (
		reloaded []auth.Issuer
		catalog  *plants.Catalog
	)
	defer func() {
		if catalog != nil || reloaded != nil {
			s.readers.reloaded(catalog, reloaded)
		}
	}()
	set := s.keys.issuers
	if set != nil && s.cfg.IssuersFile != "" {
		added, removed, err := set.Reload(func(is []auth.Issuer) error { return s.keys.verifier.SetIssuers(is...) })
		if err != nil {
			s.log.Error("issuers file reload refused; the previous issuers keep serving", zap.Error(err))
		} else {
			s.log.Info("issuers file reloaded", zap.Strings("added", added), zap.Strings("removed", removed))
			reloaded = set.Issuers()
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
	if set != nil && s.cfg.IssuersFile == "" {
		// The key files of the -jwt-* issuer; a SIGHUP is asked for: the
		// source says so even when nothing changed.
		_, _, _ = set.Reload(nil)
	}
	if n := s.keys.nonces; n != nil {
		_, _ = n.ReloadLogged(s.log, time.Now())
	}
	if k := s.keys.redisKey; k != nil {
		k.Reload(s.log)
	}
}
