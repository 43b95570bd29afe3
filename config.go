package main

import (
	"errors"
	"flag"
	"io"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/plants/postgres"
)

// serveConfig is everything the serve flags decide. Values are checked by
// the constructors they go to; parseServeFlags checks only what no
// constructor sees (addresses, how flags combine).
type serveConfig struct {
	Addr, AdminAddr string
	Data            string
	DatabaseURL     string
	DB              postgres.Options
	// DatabaseSnapshot serves the database's catalog from memory; false
	// reads the database on every request.
	DatabaseSnapshot bool
	// JWT is the policy of the unnamed issuer the -jwt-* flags define.
	JWT    auth.Config
	Verify auth.Options
	// IssuersFile names several issuers in place of the -jwt-* flags.
	IssuersFile    string
	JWKSURL        string
	KeyFile        string
	HMACSecretFile string
	JWKSRefresh    time.Duration
	JWKSMinRefresh time.Duration
	TrustedProxies []netip.Prefix
	Dev            bool
	LogLevel       string
	LogFormat      string
	// ShutdownDelay and ShutdownTimeout are the drain (SPEC §9).
	ShutdownDelay   time.Duration
	ShutdownTimeout time.Duration
	Pprof           bool
	// TraceSubject puts the caller's subject on server spans (SPEC §12).
	TraceSubject bool
	// RateLimit is requests a second per caller, 0 for no limit; RateBurst
	// is the bucket size.
	RateLimit float64
	RateBurst int
	// WriteTimeout bounds reading a request and each write of a response.
	WriteTimeout time.Duration

	// flags is the flag set, for the help text and the environment check;
	// set tells how each flag got its value.
	flags *flag.FlagSet
	set   parsedFlags
}

// settingFlags names the flag each setting of the constructors comes from
// (see auth.ConfigError).
var settingFlags = map[string]string{
	"leeway": "jwt-leeway", "max_groups": "jwt-max-groups", "audiences": "jwt-audience",
	"algorithms": "jwt-algorithms", "groups_claim": "jwt-groups-claim",
	"required_scope": "jwt-required-scope", "issuer": "jwt-issuer",
	"rate": "rate-limit", "burst": "rate-burst",
	"dpop_window": "dpop-window", "public_url": "public-url",
	"refresh": "jwks-refresh", "min_refresh": "jwks-min-refresh",
	"jwks_url": "jwt-jwks-url", "key_file": "jwt-key-file", "hmac_secret_file": "jwt-hmac-secret-file",
}

// usage returns err, a constructor's refusal of a setting, as the usage
// error of the flag (or variable) the setting came from.
func (c serveConfig) usage(err error) error {
	var ce *auth.ConfigError
	switch {
	case errors.As(err, &ce) && settingFlags[ce.Field] != "":
		name := settingFlags[ce.Field]
		return invalid(c.set, name, c.flags.Lookup(name).Value.String(), ce.Err)
	case errors.Is(err, observability.ErrLogLevel):
		return invalid(c.set, "log-level", c.LogLevel, err)
	case errors.Is(err, observability.ErrLogFormat):
		return invalid(c.set, "log-format", c.LogFormat, err)
	}
	return usagef("serve: %v", err)
}

// discovery reports whether keys come from OIDC discovery of the issuer:
// -jwt-issuer is set and no other key source is.
func (c serveConfig) discovery() bool {
	return c.JWT.Issuer != "" && c.JWKSURL == "" && c.KeyFile == "" && c.HMACSecretFile == "" && !c.Dev
}

// parseServeFlags reads the serve flags and their PLANTSTORE_* fallbacks.
// Errors wrap errUsage.
func parseServeFlags(args []string, e env, stderr io.Writer) (serveConfig, error) {
	// Defaults first: a flag's default text is read when it is defined.
	cfg := serveConfig{
		DB: postgres.Options{
			MaxConns:       postgres.DefaultMaxConns,
			ConnectTimeout: postgres.DefaultConnectTimeout,
			QueryTimeout:   postgres.DefaultQueryTimeout,
			Poll:           postgres.DefaultPoll,
		},
		DatabaseSnapshot: true,
		Verify: auth.Options{
			Leeway:     30 * time.Second,
			DPoPWindow: auth.DefaultDPoPWindow,
			MaxGroups:  auth.DefaultMaxGroups,
			CacheBytes: auth.DefaultCacheBytes,
		},
		JWKSRefresh:     auth.DefaultJWKSRefresh,
		JWKSMinRefresh:  auth.DefaultJWKSMinRefresh,
		ShutdownDelay:   5 * time.Second,
		ShutdownTimeout: 20 * time.Second,
		RateBurst:       20,
		WriteTimeout:    60 * time.Second,
	}
	var trusted, publicURL string
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg.flags = fs
	fs.StringVar(&cfg.Addr, "addr", ":8080", "API listen address (127.0.0.1:8080 with -dev)")
	fs.StringVar(&cfg.AdminAddr, "admin-addr", ":9090", "admin listen address: /metrics, /healthz, /readyz, /openapi.json (127.0.0.1:9090 with -dev)")
	fs.StringVar(&cfg.Data, "data", "", "catalog JSON file, reloaded on SIGHUP (default: the embedded sample catalog)")
	fs.StringVar(&cfg.DatabaseURL, "database-url", "", "PostgreSQL DSN; selects the PostgreSQL store")
	fs.BoolVar(&cfg.DatabaseSnapshot, "database-snapshot", cfg.DatabaseSnapshot, "serve the database's catalog from an in-memory snapshot kept current; false reads the database on every request")
	fs.Var(durationFlag{&cfg.DB.Poll}, "database-poll", "how often the catalog version is read, to catch a change whose notification was lost")
	fs.Var(int32Flag{&cfg.DB.MaxConns}, "db-max-conns", "PostgreSQL pool size")
	fs.Var(durationFlag{&cfg.DB.ConnectTimeout}, "db-connect-timeout", "PostgreSQL connect timeout")
	fs.Var(durationFlag{&cfg.DB.QueryTimeout}, "db-query-timeout", "PostgreSQL query timeout")
	fs.StringVar(&cfg.IssuersFile, "jwt-issuers-file", "", "YAML file of several issuers, each with its keys and rules, reloaded on SIGHUP; replaces the per-issuer -jwt-* flags")
	fs.StringVar(&cfg.JWT.Issuer, "jwt-issuer", "", "required iss; without another key source, the OIDC issuer to discover keys from")
	fs.StringVar(&cfg.JWKSURL, "jwt-jwks-url", "", "JWKS URL (http or https)")
	fs.StringVar(&cfg.KeyFile, "jwt-key-file", "", "JWKS JSON or PEM public keys file, read again when it changes and on SIGHUP")
	fs.StringVar(&cfg.HMACSecretFile, "jwt-hmac-secret-file", "", "HMAC secret file (enables HS256/384/512), or a directory of several, each file a secret whose name is its kid; read again when it changes and on SIGHUP")
	fs.Var(listFlag{items: &cfg.JWT.Audiences}, "jwt-audience", "accepted audiences, comma list (aud must contain one)")
	fs.Var(listFlag{items: &cfg.JWT.Algorithms}, "jwt-algorithms", "allowed algorithms, comma list (default: "+strings.Join(auth.DefaultAlgorithms(), ",")+")")
	fs.Var(durationFlag{&cfg.Verify.Leeway}, "jwt-leeway", "clock skew allowed on exp, nbf and iat")
	fs.StringVar(&cfg.JWT.GroupsClaim, "jwt-groups-claim", "groups", "claim holding the caller's groups; dotted path for nested claims")
	fs.StringVar(&cfg.JWT.RequiredScope, "jwt-required-scope", "", "scope every token must carry (403 otherwise)")
	fs.Var(intFlag{&cfg.Verify.MaxGroups}, "jwt-max-groups", "most groups a token may carry (401 too_many_groups beyond)")
	fs.Var(sizeFlag{&cfg.Verify.CacheBytes}, "jwt-cache-bytes", "memory of the verified-token cache, everything counted (0 turns it off)")
	fs.Var(durationFlag{&cfg.JWKSRefresh}, "jwks-refresh", "JWKS background refresh period (with jitter)")
	fs.Var(durationFlag{&cfg.JWKSMinRefresh}, "jwks-min-refresh", "minimum time between JWKS fetches for unknown kids")
	fs.StringVar(&trusted, "trusted-proxies", "", "CIDR list of proxies whose X-Forwarded-For (and, without -public-url, X-Forwarded-Proto and X-Forwarded-Host) is believed")
	fs.Var(dpopFlag{&cfg.JWT.DPoP}, "jwt-dpop", "DPoP (RFC 9449) for the -jwt-* issuer, and for issuers of -jwt-issuers-file that say nothing: off, optional or required")
	fs.Var(durationFlag{&cfg.Verify.DPoPWindow}, "dpop-window", "how old a DPoP proof may be, by its iat (the leeway comes on top)")
	fs.StringVar(&publicURL, "public-url", "", "URL callers reach the API at (the gateway's), which DPoP proofs name and /.well-known/oauth-protected-resource describes (default: each request's scheme and host)")
	fs.BoolVar(&cfg.Dev, "dev", false, "development mode: ephemeral signing key, sample tokens printed at start, on loopback unless -addr or -admin-addr say otherwise")
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&cfg.LogFormat, "log-format", "json", "json or console")
	fs.Var(durationFlag{&cfg.ShutdownDelay}, "shutdown-delay", "time the API keeps serving after SIGTERM while /readyz is 503 (0 with -dev)")
	fs.Var(durationFlag{&cfg.ShutdownTimeout}, "shutdown-timeout", "time allowed for in-flight requests after the delay")
	fs.BoolVar(&cfg.Pprof, "pprof", false, "serve net/http/pprof on the admin listener")
	fs.BoolVar(&cfg.TraceSubject, "trace-subject", false, "put the caller's subject (enduser.id) and issuer name on server spans; tracing itself is on when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_TRACES_EXPORTER is set")
	fs.Float64Var(&cfg.RateLimit, "rate-limit", 0, "requests a second per caller (token bucket); 0 turns the limit off")
	fs.Var(intFlag{&cfg.RateBurst}, "rate-burst", "requests a caller may send at once before -rate-limit applies")
	fs.Var(durationFlag{&cfg.WriteTimeout}, "write-timeout", "time allowed for reading a request and for each write of a response; 0 for none")

	set, err := parseFlags(fs, args, &e, stderr, "dev")
	if err != nil {
		return cfg, err
	}
	cfg.set = set
	if fs.NArg() > 0 {
		return cfg, usagef("serve: unexpected argument %q", fs.Arg(0))
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"jwt-max-groups", cfg.Verify.MaxGroups}, {"rate-burst", cfg.RateBurst}, {"db-max-conns", int(cfg.DB.MaxConns)}} {
		if n.v < 1 {
			return cfg, invalid(set, n.name, strconv.Itoa(n.v), errors.New("must be at least 1"))
		}
	}
	if cfg.Verify.CacheBytes == 0 {
		cfg.Verify.CacheBytes = -1 // the flag's 0 is "off"; the Options' 0 is "default"
	}
	if err := cfg.dev(set); err != nil {
		return cfg, err
	}
	for _, a := range []struct{ name, v string }{{"addr", cfg.Addr}, {"admin-addr", cfg.AdminAddr}} {
		if err := checkListenAddr(a.v); err != nil {
			return cfg, invalid(set, a.name, a.v, err)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"shutdown-delay", cfg.ShutdownDelay}, {"shutdown-timeout", cfg.ShutdownTimeout}, {"write-timeout", cfg.WriteTimeout}} {
		if d.v < 0 {
			return cfg, invalid(set, d.name, d.v.String(), errors.New("must not be negative"))
		}
	}
	if cfg.TrustedProxies, err = observability.ParseTrustedProxies(trusted); err != nil {
		return cfg, invalid(set, "trusted-proxies", trusted, err)
	}
	cfg.Verify.TrustedProxies = cfg.TrustedProxies
	if publicURL != "" {
		if cfg.Verify.PublicURL, err = url.Parse(publicURL); err != nil {
			return cfg, invalid(set, "public-url", publicURL, errors.New("not a URL"))
		}
	}
	if cfg.DatabaseURL != "" && cfg.Data != "" {
		return cfg, usagef("serve: -data and -database-url select different stores; set one")
	}
	if cfg.IssuersFile != "" {
		for _, f := range issuerFlags {
			if set.set(f) {
				return cfg, usagef("serve: -jwt-issuers-file configures every issuer; -%s (%s) belongs to one issuer: set it in the file", f, envName(f))
			}
		}
	}
	if cfg.IssuersFile == "" && cfg.JWT.Issuer == "" && cfg.JWKSURL == "" && cfg.KeyFile == "" && cfg.HMACSecretFile == "" && !cfg.Dev {
		return cfg, usagef("serve: no key source: set -jwt-issuer (OIDC discovery), -jwt-jwks-url, -jwt-key-file, -jwt-hmac-secret-file or -jwt-issuers-file (or their PLANTSTORE_* variables), or run with -dev")
	}
	return cfg, nil
}

// issuerFlags are the flags of the one unnamed issuer, which an issuers
// file replaces.
var issuerFlags = []string{"jwt-issuer", "jwt-jwks-url", "jwt-key-file", "jwt-hmac-secret-file", "jwt-audience", "jwt-algorithms", "jwt-groups-claim"}

// dev applies the rules of -dev (SPEC §2): loopback addresses and no
// shutdown delay unless set, no other key source or store, and no DPoP
// mode that refuses the banner's bearer tokens.
func (c *serveConfig) dev(set parsedFlags) error {
	if !c.Dev {
		return nil
	}
	for _, f := range []string{"database-url", "jwt-jwks-url", "jwt-key-file", "jwt-hmac-secret-file", "jwt-issuers-file"} {
		if set.set(f) {
			return usagef("serve: -dev signs its own tokens on the embedded or -data catalog; it cannot be combined with -%s (%s)", f, envName(f))
		}
	}
	// The banner prints bearer tokens: a mode that refuses them would
	// make every line it prints answer 401.
	if c.JWT.DPoP == auth.DPoPRequired {
		return usagef("serve: -dev prints bearer tokens, which -jwt-dpop required (%s) refuses; use off or optional with -dev", envName("jwt-dpop"))
	}
	if !set.set("addr") {
		c.Addr = "127.0.0.1:8080"
	}
	if !set.set("admin-addr") {
		c.AdminAddr = "127.0.0.1:9090"
	}
	if !set.set("shutdown-delay") {
		c.ShutdownDelay = 0
	}
	return nil
}

// invalid is the usage error for a bad value of flag name, naming the
// variable when the value came from one.
func invalid(set parsedFlags, name, value string, err error) error {
	where := "flag -" + name
	if set.fromEnv[name] {
		where = envName(name)
	}
	if urlFlags[name] {
		value = auth.RedactURL(value)
	}
	return usagef("serve: invalid value %q for %s: %v", value, where, err)
}

// urlFlags are the flags whose value is a URL that may carry secrets (a
// password, a query string): a message shows them redacted (SPEC §2).
var urlFlags = map[string]bool{"jwt-jwks-url": true, "jwt-issuer": true, "public-url": true, "database-url": true}

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
		return errors.New("want a whole number")
	}
	*f.v = int32(n)
	return nil
}

// dpopFlag is a DPoP mode flag: off, optional or required.
type dpopFlag struct{ m *auth.DPoPMode }

func (f dpopFlag) String() string {
	if f.m == nil {
		return "optional"
	}
	return f.m.String()
}

func (f dpopFlag) Set(s string) error {
	m, err := auth.ParseDPoPMode(s)
	if err != nil {
		return errors.New("want off, optional or required")
	}
	*f.m = m
	return nil
}
