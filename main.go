// Command plantstore serves the Plant Store API: GET /plants behind JWT
// verification, with metrics, health and the OpenAPI document on a separate
// admin listener. See README.md for the flags and subcommands.
package main

import (
	"context"
	"crypto"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
)

// version and revision are stamped at build time with
// -ldflags "-X main.version=... -X main.revision=...".
var version, revision string

// errUsage marks an error caused by how the command was called; main exits
// with status 2 for it.
var errUsage = errors.New("usage")

func main() {
	gin.SetMode(gin.ReleaseMode)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "plantstore:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError wraps err so that it reads as itself but matches errUsage.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() []error {
	return []error{e.err, errUsage}
}

func usagef(format string, a ...any) error {
	return usageError{fmt.Errorf(format, a...)}
}

const commandsHelp = `usage: plantstore [command] [flags]

commands:
  serve     run the service (the default when no command is given)
  token     mint a signed JWT from a private key file
  keygen    write a new signing key pair (PKCS#8 PEM and public JWKS)
  migrate   apply the PostgreSQL schema migrations
  import    load a catalog file into PostgreSQL in one transaction
  version   print the version

Run "plantstore COMMAND -h" for the flags of a command.
`

// run is the whole program: main only adds the process environment and the
// exit status. ctx ends the service (SIGINT and SIGTERM cancel it in main).
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	err := dispatch(ctx, args, getenv, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // -h printed the flags
	}
	return err
}

// dispatch runs the subcommand named by args[0], serve by default.
func dispatch(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, getenv, stdout, stderr)
	case "token":
		return mintToken(args, stdout, stderr)
	case "keygen":
		return keygen(args, stdout, stderr)
	case "migrate":
		return migrate(ctx, args, getenv, stdout, stderr)
	case "import":
		return importCatalog(ctx, args, getenv, stdout, stderr)
	case "version":
		if len(args) > 0 {
			return usagef("version takes no arguments")
		}
		fmt.Fprintf(stdout, "plantstore %s (revision %s, %s)\n", buildVersion(), buildRevision(), runtime.Version())
		return nil
	case "help":
		fmt.Fprint(stdout, commandsHelp)
		return nil
	}
	return usagef("unknown command %q (commands: serve, token, keygen, migrate, import, version)", cmd)
}

// buildVersion returns the stamped version, else the module version the
// binary was built from, else "devel".
func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// buildRevision returns the stamped revision, else the VCS revision recorded
// by the Go toolchain, else "unknown".
func buildRevision() string {
	if revision != "" {
		return revision
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// serveConfig is everything the serve flags decide.
type serveConfig struct {
	Addr, AdminAddr string
	Data            string
	DatabaseURL     string
	DB              postgres.Options
	JWT             auth.Config
	JWKSURL         string
	KeyFile         string
	HMACSecretFile  string
	JWKSRefresh     time.Duration
	JWKSMinRefresh  time.Duration
	TrustedProxies  []netip.Prefix
	Dev             bool
	LogLevel        string
	LogFormat       string
	ShutdownDelay   time.Duration
	ShutdownTimeout time.Duration
	Pprof           bool
	// RateLimit is requests a second per subject, 0 for no limit; RateBurst
	// is the bucket size.
	RateLimit float64
	RateBurst int
	// WriteTimeout bounds the writing of one response.
	WriteTimeout time.Duration
}

// discovery reports whether keys come from OIDC discovery of the issuer:
// -jwt-issuer is set and no other key source is.
func (c serveConfig) discovery() bool {
	return c.JWT.Issuer != "" && c.JWKSURL == "" && c.KeyFile == "" && c.HMACSecretFile == "" && !c.Dev
}

// listFlag is a comma-separated list; blanks around items are dropped.
type listFlag struct{ items *[]string }

func (l listFlag) String() string {
	if l.items == nil {
		return ""
	}
	return strings.Join(*l.items, ",")
}

func (l listFlag) Set(s string) error {
	*l.items = nil
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			*l.items = append(*l.items, item)
		}
	}
	return nil
}

// envName is the environment variable a flag falls back to.
func envName(flagName string) string {
	return "PLANTSTORE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseFlags parses args into fs, then fills every flag that args did not
// set from its PLANTSTORE_* variable (the flag wins), except those in noEnv.
// Errors wrap errUsage and fit on one line; -h prints the flags and returns
// flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string, getenv func(string) string, stderr io.Writer, noEnv ...string) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprintf(stderr, "usage of plantstore %s:\n", fs.Name())
			fs.PrintDefaults()
			return err
		}
		return usagef("%s: %v", fs.Name(), err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range noEnv {
		set[name] = true
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil || getenv == nil {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if e := fs.Set(f.Name, v); e != nil {
				err = usagef("%s: invalid value %q for %s (flag -%s): %v", fs.Name(), v, envName(f.Name), f.Name, e)
			}
		}
	})
	return err
}

// parseServeFlags reads the serve flags and their PLANTSTORE_* fallbacks
// and checks every value, so a bad one stops the start before anything runs.
func parseServeFlags(args []string, getenv func(string) string, stderr io.Writer) (serveConfig, error) {
	cfg := serveConfig{JWT: auth.Config{Algorithms: auth.DefaultAlgorithms()}}
	var trusted string
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&cfg.Addr, "addr", ":8080", "API listen address")
	fs.StringVar(&cfg.AdminAddr, "admin-addr", ":9090", "admin listen address (/metrics, /healthz, /readyz, /openapi.json)")
	fs.StringVar(&cfg.Data, "data", "", "catalog JSON file (default: the embedded sample catalog)")
	fs.StringVar(&cfg.DatabaseURL, "database-url", "", "PostgreSQL DSN; selects the PostgreSQL store")
	fs.Var(int32Flag{&cfg.DB.MaxConns}, "db-max-conns", "PostgreSQL pool size")
	fs.DurationVar(&cfg.DB.ConnectTimeout, "db-connect-timeout", 5*time.Second, "PostgreSQL connect timeout")
	fs.DurationVar(&cfg.DB.QueryTimeout, "db-query-timeout", 5*time.Second, "PostgreSQL query timeout")
	cfg.DB.MaxConns = 10
	fs.StringVar(&cfg.JWT.Issuer, "jwt-issuer", "", "required iss; without -jwt-jwks-url, the OIDC issuer to discover keys from")
	fs.StringVar(&cfg.JWKSURL, "jwt-jwks-url", "", "JWKS URL (http or https)")
	fs.StringVar(&cfg.KeyFile, "jwt-key-file", "", "JWKS JSON or PEM public keys file (reloaded on SIGHUP)")
	fs.StringVar(&cfg.HMACSecretFile, "jwt-hmac-secret-file", "", "HMAC secret file (enables HS256/384/512)")
	fs.Var(listFlag{&cfg.JWT.Audiences}, "jwt-audience", "accepted audiences, comma list (aud must contain one)")
	fs.Var(listFlag{&cfg.JWT.Algorithms}, "jwt-algorithms", "allowed algorithms, comma list")
	fs.DurationVar(&cfg.JWT.Leeway, "jwt-leeway", 30*time.Second, "clock skew allowed on exp, nbf and iat")
	fs.StringVar(&cfg.JWT.GroupsClaim, "jwt-groups-claim", "groups", "claim holding the caller's groups; dotted path for nested claims")
	fs.StringVar(&cfg.JWT.RequiredScope, "jwt-required-scope", "", "scope every token must carry (403 otherwise)")
	fs.DurationVar(&cfg.JWKSRefresh, "jwks-refresh", 15*time.Minute, "JWKS background refresh period (with jitter)")
	fs.DurationVar(&cfg.JWKSMinRefresh, "jwks-min-refresh", 30*time.Second, "minimum time between JWKS fetches for unknown kids")
	fs.StringVar(&trusted, "trusted-proxies", "", "CIDR list of proxies whose X-Forwarded-For is believed")
	fs.BoolVar(&cfg.Dev, "dev", false, "development mode: ephemeral signing key, sample tokens printed at start")
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&cfg.LogFormat, "log-format", "json", "json or console")
	fs.DurationVar(&cfg.ShutdownDelay, "shutdown-delay", 5*time.Second, "time the API keeps serving after SIGTERM while /readyz is 503")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 20*time.Second, "time allowed for in-flight requests after the delay")
	fs.BoolVar(&cfg.Pprof, "pprof", false, "serve net/http/pprof on the admin listener")
	fs.Float64Var(&cfg.RateLimit, "rate-limit", 0, "requests a second per subject (token bucket); 0 turns the limit off")
	fs.IntVar(&cfg.RateBurst, "rate-burst", 20, "requests a subject may send at once before -rate-limit applies")
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", 60*time.Second, "time allowed to write one response; 0 for none")
	if err := parseFlags(fs, args, getenv, stderr, "dev"); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, usagef("serve: unexpected argument %q", fs.Arg(0))
	}
	for _, a := range []struct{ name, v string }{{"addr", cfg.Addr}, {"admin-addr", cfg.AdminAddr}} {
		if err := checkListenAddr(a.v); err != nil {
			return cfg, usagef("serve: invalid value %q for flag -%s: %v", a.v, a.name, err)
		}
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, cfg.LogLevel) {
		return cfg, usagef("serve: invalid value %q for flag -log-level: want debug, info, warn or error", cfg.LogLevel)
	}
	if cfg.LogFormat != "json" && cfg.LogFormat != "console" {
		return cfg, usagef("serve: invalid value %q for flag -log-format: want json or console", cfg.LogFormat)
	}
	if len(cfg.JWT.Algorithms) == 0 {
		return cfg, usagef("serve: invalid value for flag -jwt-algorithms: empty list")
	}
	for _, alg := range cfg.JWT.Algorithms {
		if !slices.Contains(auth.DefaultAlgorithms(), alg) {
			return cfg, usagef("serve: invalid value %q in flag -jwt-algorithms: want some of %s", alg, strings.Join(auth.DefaultAlgorithms(), ","))
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		min  time.Duration
	}{
		{"jwt-leeway", cfg.JWT.Leeway, 0},
		{"jwks-refresh", cfg.JWKSRefresh, time.Second},
		{"jwks-min-refresh", cfg.JWKSMinRefresh, 0},
		{"shutdown-delay", cfg.ShutdownDelay, 0},
		{"shutdown-timeout", cfg.ShutdownTimeout, 0},
		{"db-connect-timeout", cfg.DB.ConnectTimeout, time.Millisecond},
		{"db-query-timeout", cfg.DB.QueryTimeout, time.Millisecond},
		{"write-timeout", cfg.WriteTimeout, 0},
	} {
		if d.v < d.min {
			return cfg, usagef("serve: invalid value %s for flag -%s: must be at least %s", d.v, d.name, d.min)
		}
	}
	if !(cfg.RateLimit >= 0) || math.IsInf(cfg.RateLimit, 0) {
		return cfg, usagef("serve: invalid value %v for flag -rate-limit: want requests a second, 0 for no limit", cfg.RateLimit)
	}
	if cfg.RateBurst < 1 {
		return cfg, usagef("serve: invalid value %d for flag -rate-burst: must be at least 1", cfg.RateBurst)
	}
	if cfg.DB.MaxConns < 1 {
		return cfg, usagef("serve: invalid value %d for flag -db-max-conns: must be at least 1", cfg.DB.MaxConns)
	}
	if cfg.JWT.GroupsClaim == "" || strings.HasPrefix(cfg.JWT.GroupsClaim, ".") || strings.HasSuffix(cfg.JWT.GroupsClaim, ".") || strings.Contains(cfg.JWT.GroupsClaim, "..") {
		return cfg, usagef("serve: invalid value %q for flag -jwt-groups-claim: want a claim name or dotted path", cfg.JWT.GroupsClaim)
	}
	if cfg.JWKSURL != "" {
		if err := checkHTTPURL(cfg.JWKSURL); err != nil {
			return cfg, usagef("serve: invalid value %q for flag -jwt-jwks-url: %v", cfg.JWKSURL, err)
		}
	} else if cfg.discovery() {
		if err := checkHTTPURL(cfg.JWT.Issuer); err != nil {
			return cfg, usagef("serve: invalid value %q for flag -jwt-issuer: OIDC discovery (no -jwt-jwks-url) needs an http or https URL: %v", cfg.JWT.Issuer, err)
		}
	}
	if cfg.DatabaseURL != "" {
		if err := postgres.CheckDSN(cfg.DatabaseURL); err != nil {
			return cfg, usagef("serve: invalid value for flag -database-url: %v", err)
		}
	}
	p, err := observability.ParseTrustedProxies(trusted)
	if err != nil {
		return cfg, usagef("serve: invalid value %q for flag -trusted-proxies: %v", trusted, err)
	}
	cfg.TrustedProxies = p
	if cfg.JWT.Issuer == "" && cfg.JWKSURL == "" && cfg.KeyFile == "" && cfg.HMACSecretFile == "" && !cfg.Dev {
		return cfg, usagef("serve: no key source: set -jwt-issuer (OIDC discovery), -jwt-jwks-url, -jwt-key-file or -jwt-hmac-secret-file (or the PLANTSTORE_* variables), or run with -dev")
	}
	return cfg, nil
}

// checkListenAddr reports whether s is a host:port a listener can take:
// a port from 0 to 65535 and a host that is empty, an IP address or a name.
func checkListenAddr(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New("want host:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return errors.New("want a port from 0 to 65535")
	}
	if host != "" && net.ParseIP(host) == nil && strings.Trim(host, "0123456789.") == "" {
		return errors.New("not an IP address")
	}
	return nil
}

// int32Flag is a flag.Value for an int32.
type int32Flag struct{ v *int32 }

func (f int32Flag) String() string {
	if f.v == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*f.v), 10)
}

func (f int32Flag) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return errors.New("parse error")
	}
	*f.v = int32(n)
	return nil
}

// checkHTTPURL reports whether s is an absolute http or https URL.
func checkHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return errors.New("want an http or https URL")
	}
	return nil
}

// serve runs the service until ctx ends, then drains: /readyz turns 503, the
// API keeps serving for -shutdown-delay, then in-flight requests get
// -shutdown-timeout to finish.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseServeFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	ballast := heapBallast(getenv)
	defer runtime.KeepAlive(ballast)
	// Under load, access lines go out in batches (one write for many),
	// each within about a millisecond; other lines at once; all of them
	// before serve returns.
	logOut := observability.NewBatchWriter(stderr)
	defer func() { _ = logOut.Close() }()
	log, err := observability.NewLogger(cfg.LogLevel, cfg.LogFormat, logOut)
	if err != nil {
		return usagef("serve: %v", err)
	}
	defer func() { _ = log.Sync() }()

	// Background work (JWKS refresh) outlives the stop signal: keys must keep
	// verifying while in-flight requests drain.
	bg, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBackground()

	reg := observability.NewRegistry(buildVersion(), buildRevision())
	authMetrics := auth.NewMetrics(reg)
	plantsMetrics := plants.NewMetrics(reg)

	var (
		store      plants.Store
		storeReady func(context.Context) error
		memory     *plants.MemoryStore
		storeName  = "memory"
	)
	switch {
	case cfg.DatabaseURL != "" && cfg.Data != "":
		return usagef("serve: -data and -database-url select different stores; set one")
	case cfg.DatabaseURL != "":
		pg, err := postgres.Open(bg, cfg.DatabaseURL, cfg.DB, plantsMetrics)
		if err != nil {
			return fmt.Errorf("open database: %w", err)
		}
		defer pg.Close()
		store, storeReady, storeName = pg, pg.Ping, "postgres"
	default:
		catalog := plants.SampleCatalog()
		if cfg.Data != "" {
			if catalog, err = plants.LoadCatalogFile(cfg.Data); err != nil {
				return fmt.Errorf("load catalog: %w", err)
			}
		}
		memory = plants.NewMemoryStore(catalog, plantsMetrics)
		store, storeReady = memory, memory.Ready
	}

	var (
		sources []auth.Keys
		jwks    *auth.JWKS
		keyFile *auth.KeyFile
		devKey  crypto.Signer
	)
	if cfg.KeyFile != "" {
		if keyFile, err = auth.LoadKeyFile(cfg.KeyFile, authMetrics); err != nil {
			return fmt.Errorf("load key file: %w", err)
		}
		sources = append(sources, keyFile)
	}
	if cfg.HMACSecretFile != "" {
		secret, err := auth.LoadHMACSecret(cfg.HMACSecretFile)
		if err != nil {
			return fmt.Errorf("load HMAC secret: %w", err)
		}
		sources = append(sources, secret)
		authMetrics.AddKeys(secret.Len())
	}
	if cfg.Dev {
		if devKey, _, err = auth.GenerateKey("EdDSA"); err != nil {
			return fmt.Errorf("dev key: %w", err)
		}
		kid, err := auth.Thumbprint(devKey.Public())
		if err != nil {
			return fmt.Errorf("dev key: %w", err)
		}
		sources = append(sources, auth.NewKeySet([]auth.Key{{ID: kid, Algorithm: "EdDSA", Public: devKey.Public()}}))
		authMetrics.AddKeys(1)
	}
	// The remote set comes last: a kid that a static source knows must not
	// cost a JWKS refetch.
	if cfg.JWKSURL != "" || cfg.discovery() {
		opts := auth.JWKSOptions{URL: cfg.JWKSURL, Refresh: cfg.JWKSRefresh, MinRefresh: cfg.JWKSMinRefresh}
		if cfg.discovery() {
			opts.Issuer = cfg.JWT.Issuer
		}
		if jwks, err = auth.NewJWKS(bg, opts, log, authMetrics); err != nil {
			return usagef("serve: %v", err)
		}
		sources = append(sources, jwks)
	}
	verifier, err := auth.NewVerifier(cfg.JWT, auth.Combine(sources...), authMetrics)
	if err != nil {
		return usagef("serve: %v", err)
	}

	var draining atomic.Bool
	ready := func(ctx context.Context) error {
		if draining.Load() {
			return errors.New("draining")
		}
		if jwks != nil {
			if err := jwks.Ready(); err != nil {
				return fmt.Errorf("keys: %w", err)
			}
		}
		if err := storeReady(ctx); err != nil {
			return fmt.Errorf("store: %w", err)
		}
		return nil
	}

	apiLn, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("API listener: %w", err)
	}
	defer apiLn.Close()
	adminLn, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	defer adminLn.Close()

	var afterAuth []gin.HandlerFunc
	if cfg.RateLimit > 0 {
		limit, err := auth.NewRateLimit(cfg.RateLimit, cfg.RateBurst)
		if err != nil {
			return usagef("serve: %v", err)
		}
		afterAuth = append(afterAuth, auth.LimitSubjects(limit))
	}

	serverLog := zap.NewStdLog(log.Named("http"))
	// -write-timeout bounds both directions: a client that stops reading its
	// response, or that announces a request body (which net/http reads
	// before answering) and never sends it, must not hold a connection and
	// its goroutine for ever. A read deadline also ends the request's
	// context, so the two are the same.
	api := &http.Server{
		Handler:           newAPIHandler(log, reg, verifier, store, plantsMetrics, cfg.TrustedProxies, afterAuth...),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       cfg.WriteTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          serverLog,
		// "OPTIONS *" would get net/http's bare 200; like any other path it
		// is the API's 404.
		DisableGeneralOptionsHandler: true,
	}
	admin := &http.Server{
		Handler: observability.AdminHandler(observability.AdminOptions{
			Registry: reg, Ready: ready, OpenAPI: plants.OpenAPI, Pprof: cfg.Pprof,
		}),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          serverLog,
	}
	log.Info("listening",
		zap.String("api_addr", apiLn.Addr().String()),
		zap.String("admin_addr", adminLn.Addr().String()),
		zap.String("store", storeName),
		zap.String("version", buildVersion()),
		zap.Bool("dev", cfg.Dev))
	if cfg.Dev {
		if err := printDevBanner(stdout, devKey, cfg.JWT, apiLn.Addr()); err != nil {
			return fmt.Errorf("dev tokens: %w", err)
		}
	}

	errc := make(chan error, 2)
	go func() { errc <- api.Serve(apiLn) }()
	go func() { errc <- admin.Serve(adminLn) }()

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
wait:
	for {
		select {
		case <-hup:
			reload(log, cfg, memory, keyFile)
		case err := <-errc:
			return fmt.Errorf("serve: %w", err)
		case <-ctx.Done():
			break wait
		}
	}

	draining.Store(true)
	log.Info("draining", zap.Duration("shutdown_delay", cfg.ShutdownDelay), zap.Duration("shutdown_timeout", cfg.ShutdownTimeout))
	time.Sleep(cfg.ShutdownDelay)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := api.Shutdown(shutdownCtx); err != nil {
		// The stop was asked for and happens: the connections still busy
		// after -shutdown-timeout are closed, and the exit stays clean.
		log.Warn("requests still in flight after the shutdown timeout were cut", zap.Duration("shutdown_timeout", cfg.ShutdownTimeout))
		_ = api.Close()
	}
	_ = admin.Shutdown(shutdownCtx)
	log.Info("stopped")
	return nil
}

// maxHeaderBytes is the request header budget. plants.HeaderLimit answers
// 431 in the Error shape at this size; net/http's own limit (this plus its
// 4 KiB slack) is the backstop for what never reaches a handler.
const maxHeaderBytes = 16 << 10

// newAPIHandler is the whole API surface: middleware order, the one route,
// and the 404 and 405 answers. afterAuth (the rate limit) runs between the
// credential check and the handler.
func newAPIHandler(log *zap.Logger, reg prometheus.Registerer, v *auth.Verifier, store plants.Store, m *plants.Metrics, trusted []netip.Prefix, afterAuth ...gin.HandlerFunc) http.Handler {
	e := gin.New()
	// SPEC §1: every other path is 404 with no redirects, another method is
	// 405, and X-Forwarded-For counts only through -trusted-proxies.
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.RemoveExtraSlash = false
	e.HandleMethodNotAllowed = true
	e.ForwardedByClientIP = false
	e.Use(
		observability.Middleware(log, reg, trusted),
		plants.RenderErrors(log),
		plants.HeaderLimit(maxHeaderBytes),
	)
	route := append([]gin.HandlerFunc{auth.Middleware(v)}, afterAuth...)
	route = append(route, plants.ListHandler(store, log, m))
	e.GET("/plants", route...)
	e.HEAD("/plants", route...)
	e.NoRoute(plants.NotFound)
	// gin reaches NoMethod only for a path that a route matched with
	// another method, and /plants is the only route: name it.
	e.NoMethod(func(c *gin.Context) { observability.Annotate(c).SetRoute("/plants") }, plants.MethodNotAllowed)
	return e
}

// reload re-reads -data and -jwt-key-file (SIGHUP). A bad file is refused
// and what was serving keeps serving.
func reload(log *zap.Logger, cfg serveConfig, memory *plants.MemoryStore, keyFile *auth.KeyFile) {
	if memory != nil && cfg.Data != "" {
		catalog, err := plants.LoadCatalogFile(cfg.Data)
		if err != nil {
			log.Error("catalog reload refused; the previous catalog keeps serving", zap.Error(err))
		} else {
			memory.Replace(catalog)
			log.Info("catalog reloaded", zap.Int("plants", catalog.Len()))
		}
	}
	if keyFile != nil {
		if err := keyFile.Reload(); err != nil {
			log.Error("key file reload refused; the previous keys keep serving", zap.Error(err))
		} else {
			log.Info("key file reloaded")
		}
	}
}

// devTokenTTL is how long the tokens printed by -dev stay valid.
const devTokenTTL = 12 * time.Hour

// printDevBanner prints, for each sample user, a curl line with a fresh
// token signed by the ephemeral -dev key.
func printDevBanner(w io.Writer, key crypto.Signer, cfg auth.Config, addr net.Addr) error {
	host := "127.0.0.1"
	port := "8080"
	if tcp, ok := addr.(*net.TCPAddr); ok {
		port = strconv.Itoa(tcp.Port)
		if !tcp.IP.IsUnspecified() {
			host = tcp.IP.String()
		}
	}
	base := "http://" + net.JoinHostPort(host, port)
	fmt.Fprintf(w, "plantstore -dev: embedded sample catalog, ephemeral Ed25519 key; these tokens are valid for %s:\n", devTokenTTL)
	for _, id := range plants.SampleUsers() {
		token, err := auth.Mint(key, "EdDSA", auth.MintClaims{
			Subject:  id.Subject,
			Issuer:   cfg.Issuer,
			Audience: cfg.Audiences,
			Groups:   id.Groups,
			Scope:    cfg.RequiredScope,
			TTL:      devTokenTTL,
		})
		if err != nil {
			return err
		}
		reads := "user:" + id.Subject
		for _, g := range id.Groups {
			reads += ", group:" + g
		}
		fmt.Fprintf(w, "\n# %s (reads as %s, *)\ncurl -sS -H 'Authorization: Bearer %s' %s/plants\n", id.Subject, reads, token, base)
	}
	fmt.Fprintln(w)
	return nil
}

// mintToken implements "plantstore token": it signs a JWT with a private
// key file and prints it followed by a newline.
func mintToken(args []string, stdout, stderr io.Writer) error {
	var (
		keyPath, alg, sub, scope, iss, kid string
		groups, aud                        []string
		ttl                                time.Duration
	)
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.StringVar(&keyPath, "key", "", "private key file: PKCS#8 PEM or JWK (required)")
	fs.StringVar(&alg, "alg", "", "signing algorithm (default: RS256, ES256/ES384/ES512 or EdDSA from the key)")
	fs.StringVar(&sub, "sub", "", "subject (required)")
	fs.Var(listFlag{&groups}, "groups", "groups, comma list")
	fs.StringVar(&scope, "scope", "", "scopes, space-separated")
	fs.Var(listFlag{&aud}, "aud", "audiences, comma list")
	fs.StringVar(&iss, "iss", "", "issuer")
	fs.DurationVar(&ttl, "ttl", time.Hour, "lifetime")
	fs.StringVar(&kid, "kid", "", "key ID (default: the key's RFC 7638 thumbprint)")
	if err := parseFlags(fs, args, nil, stderr); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("token: unexpected argument %q", fs.Arg(0))
	case keyPath == "":
		return usagef("token: -key is required")
	case sub == "":
		return usagef("token: -sub is required")
	case ttl <= 0:
		return usagef("token: invalid value %s for flag -ttl: must be positive", ttl)
	}
	data, err := os.ReadFile(keyPath)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	key, err := auth.ParsePrivateKey(data)
	if err != nil {
		return fmt.Errorf("token: key file %s: %w", keyPath, err)
	}
	token, err := auth.Mint(key, alg, auth.MintClaims{
		Subject: sub, Issuer: iss, Audience: aud, Groups: groups, Scope: scope, TTL: ttl, KeyID: kid,
	})
	if err != nil {
		return usagef("token: %v", err)
	}
	_, err = fmt.Fprintln(stdout, token)
	return err
}

// keygen implements "plantstore keygen": PREFIX.key (PKCS#8 PEM, mode 0600)
// and PREFIX.jwks.json (the public JWKS). Existing files are never
// overwritten.
func keygen(args []string, stdout, stderr io.Writer) error {
	var alg, out string
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fs.StringVar(&alg, "alg", "RS256", "RS256, ES256 or EdDSA")
	fs.StringVar(&out, "out", "", "output prefix: writes PREFIX.key and PREFIX.jwks.json (required)")
	if err := parseFlags(fs, args, nil, stderr); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("keygen: unexpected argument %q", fs.Arg(0))
	case out == "":
		return usagef("keygen: -out is required")
	case alg != "RS256" && alg != "ES256" && alg != "EdDSA":
		return usagef("keygen: invalid value %q for flag -alg: want RS256, ES256 or EdDSA", alg)
	}
	priv, jwks, err := auth.GenerateKey(alg)
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	pemBytes, err := auth.MarshalPrivateKey(priv)
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if err := writeNew(out+".key", pemBytes, 0o600); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if err := writeNew(out+".jwks.json", jwks, 0o644); err != nil {
		_ = os.Remove(out + ".key")
		return fmt.Errorf("keygen: %w", err)
	}
	kid, err := auth.Thumbprint(priv.Public())
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s.key (private, PKCS#8 PEM) and %s.jwks.json (public JWKS); alg %s, kid %s\n", out, out, alg, kid)
	return nil
}

// writeNew writes data to a file that must not exist yet.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

// databaseFlags parses the flags of migrate and import: -database-url (or
// PLANTSTORE_DATABASE_URL) plus extra, and returns the positional arguments.
// Flags may come before or after the positional arguments.
func databaseFlags(fs *flag.FlagSet, dsn *string, args []string, getenv func(string) string, stderr io.Writer) ([]string, error) {
	fs.StringVar(dsn, "database-url", "", "PostgreSQL DSN (required; or PLANTSTORE_DATABASE_URL)")
	var positional []string
	for {
		if err := parseFlags(fs, args, getenv, stderr); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if *dsn == "" {
		return nil, usagef("%s: -database-url (or PLANTSTORE_DATABASE_URL) is required", fs.Name())
	}
	if err := postgres.CheckDSN(*dsn); err != nil {
		return nil, usagef("%s: invalid value for flag -database-url: %v", fs.Name(), err)
	}
	return positional, nil
}

// migrate implements "plantstore migrate": it applies the embedded schema
// migrations; running it again, or from two replicas at once, is safe.
func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var dsn string
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	rest, err := databaseFlags(fs, &dsn, args, getenv, stderr)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("migrate: unexpected argument %q", rest[0])
	}
	if err := postgres.Migrate(ctx, dsn); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	fmt.Fprintln(stdout, "schema is up to date")
	return nil
}

// importCatalog implements "plantstore import": it validates a catalog file
// exactly as serve does, then loads it in one transaction.
func importCatalog(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var dsn string
	var replace bool
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.BoolVar(&replace, "replace", false, "replace the whole catalog instead of adding to it")
	rest, err := databaseFlags(fs, &dsn, args, getenv, stderr)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("import: want exactly one catalog FILE, got %d arguments", len(rest))
	}
	catalog, err := plants.LoadCatalogFile(rest[0])
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	if err := postgres.Import(ctx, dsn, catalog, replace); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	fmt.Fprintf(stdout, "imported %d plants\n", catalog.Len())
	return nil
}
