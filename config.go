package main

import (
	"errors"
	"flag"
	"io"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/dpop"
	"github.com/plantstore/plantstore/auth/introspect"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/auth/redisstate"
	"github.com/plantstore/plantstore/observability/setting"
	"github.com/plantstore/plantstore/plants/api"
	"github.com/plantstore/plantstore/plants/postgres"
)

// serveConfig is everything the serve settings decide. Values are checked
// by the constructors they go to; parsing checks only what no constructor
// sees (addresses, how settings combine).
type serveConfig struct {
	Addr, AdminAddr string
	Data            string
	DatabaseURL     string
	DB              postgres.Options
	// DatabaseSnapshot serves the database's catalog from memory; false
	// reads the database on every request.
	DatabaseSnapshot bool
	// JWT is the policy of the unnamed issuer the -jwt-* flags define,
	// and Keys where its keys come from.
	JWT  auth.Config
	Keys keys.KeySource
	// Verify holds what every issuer shares; CacheBytes (0 turns the
	// cache off), PublicURL and TrustedProxies join it in
	// verifierOptions.
	Verify     auth.Options
	CacheBytes int64
	PublicURL  string
	// IssuersFile names several issuers in place of the -jwt-* flags.
	IssuersFile    string
	JWKSRefresh    time.Duration
	JWKSMinRefresh time.Duration
	TrustedProxies []netip.Prefix
	Dev            bool
	LogLevel       string
	LogFormat      string
	// ShutdownDelay and ShutdownTimeout are the drain after SIGTERM.
	ShutdownDelay   time.Duration
	ShutdownTimeout time.Duration
	Pprof           bool
	// TraceSubject puts the caller's subject on server spans.
	TraceSubject bool
	// RateLimit is requests a second per caller, 0 for no limit; RateBurst
	// is the bucket size.
	RateLimit float64
	RateBurst int
	// RedisURL is the Redis that replicas share replay and rate state in,
	// "" for none; RedisTimeout bounds each call to it.
	RedisURL     string
	RedisTimeout time.Duration
	// RedisKeyFile, when set, holds the secret Redis keys are hashed
	// under; without it, the one derived from NonceKeyFile's.
	RedisKeyFile string
	// WriteTimeout bounds reading a request and each write of a response.
	WriteTimeout time.Duration
	// NonceKeyFile, when set, turns DPoP server nonces on, each accepted
	// for NonceLifetime.
	NonceKeyFile  string
	NonceLifetime time.Duration
	// CORS is the policy for browser callers of -cors-origins; nil, the
	// default, answers no preflight.
	CORS *api.CORS
	// Introspection bounds the calls of the replica to introspection
	// endpoints, whichever issuer they ask.
	Introspection introspect.Options
	// RevocationsFile is the file of revocations, watched for changes,
	// "" for none; RevocationRetention how long a cutoff is kept for an
	// issuer without a max lifetime.
	RevocationsFile     string
	RevocationRetention time.Duration
	// SSFPath, when set, is the API path Security Event Tokens are
	// pushed to.
	SSFPath string

	// rows is the table the config was read with, set how each setting
	// got its value, and values the flags, for the usage errors that name
	// a setting.
	rows   settingRows
	set    parsedFlags
	values *flag.FlagSet
}

// A settingRow is one row of the table of settings: a flag, the
// PLANTSTORE_* variable it falls back to (envName of the flag), its
// default, its help, and the key that names it where the flag is not
// known: in the *setting.Error of the constructor that refuses it and,
// for a setting that is also one issuer's, in the issuers file. Adding a
// row is all a new setting needs: the flag, its variable, -h, the check
// for unknown variables and the usage error of a refused value all read
// the table.
type settingRow struct {
	// group is the concern the setting belongs to, under which -h and
	// docs/configuration.md list it.
	group settingGroup
	// flag is the flag's name, kebab-case.
	flag string
	// key is the snake_case name a constructor's *setting.Error cites
	// when it refuses the value. For a setting of one issuer it is also
	// its key in the issuers file.
	key string
	// issuer is whether the setting is also one issuer's.
	issuer issuerScope
	// def is the default, as it would be given; "" for none.
	def string
	// help says what the setting does; -h adds the value's type, the
	// default and the variable.
	help string
	// value binds the flag to its field of c.
	value func(c *serveConfig) flag.Value
	// secret marks a URL that may carry a password or a query: usage
	// errors show it redacted.
	secret bool
	// noEnv marks the flag that reads no variable (-dev).
	noEnv bool
}

// A settingGroup is a concern that settings share: serve -h lists its
// flags under its title, the groups in the order of their values, and
// docs/configuration.md has a section of that title for them. The zero
// value is no group: every row names one (TestServeHelpGroups).
type settingGroup int

const (
	groupStart settingGroup = iota + 1
	groupListeners
	groupCatalog
	groupKeys
	groupRules
	groupSender
	groupShared
	groupObservability
)

// settingGroups are the groups in the order -h lists them.
var settingGroups = []settingGroup{groupStart, groupListeners, groupCatalog, groupKeys, groupRules, groupSender, groupShared, groupObservability}

// String returns the group's title.
func (g settingGroup) String() string {
	switch g {
	case groupStart:
		return "Start here"
	case groupListeners:
		return "Listeners and HTTP"
	case groupCatalog:
		return "Catalog and database"
	case groupKeys:
		return "Keys and issuers"
	case groupRules:
		return "Token rules"
	case groupSender:
		return "Sender constraints: DPoP and client certificates"
	case groupShared:
		return "Shared state and rate limits"
	case groupObservability:
		return "Logs, traces and profiles"
	}
	return "Other"
}

// issuerScope says how a setting relates to the issuers of an issuers
// file.
type issuerScope int

const (
	// everyIssuer settings apply to every issuer.
	everyIssuer issuerScope = iota
	// flagIssuer settings are the -jwt-* issuer's alone;
	// -jwt-issuers-file, whose issuers set them each, excludes them.
	flagIssuer
	// fileDefault settings are the -jwt-* issuer's, and the default of
	// the issuers of -jwt-issuers-file that leave them out.
	fileDefault
)

// settingRows is a table of settings.
type settingRows []settingRow

// serveSettings returns the table of serve's settings, by flag name; -h
// lists them by group, in this order within each.
func serveSettings() settingRows {
	return settingRows{
		{group: groupStart, flag: "addr", key: "addr", def: ":8080", help: "API listen address (127.0.0.1:8080 with -dev)",
			value: func(c *serveConfig) flag.Value { return addrFlag{&c.Addr} }},
		{group: groupStart, flag: "admin-addr", key: "admin_addr", def: ":9090", help: "admin listen address: /metrics, /livez, /readyz, /openapi.json, /docs (127.0.0.1:9090 with -dev)",
			value: func(c *serveConfig) flag.Value { return addrFlag{&c.AdminAddr} }},
		{group: groupListeners, flag: "cors-origins", key: "cors_origins", help: "origins whose pages may call the API from a browser (CORS), a comma list of exact origins such as https://app.example.com, or * for any; preflights (OPTIONS /plants) are then answered, and never with credentials mode (default: none, OPTIONS is 405)",
			value: func(c *serveConfig) flag.Value { return corsFlag{&c.CORS} }},
		{group: groupSender, flag: "client-cert-header", key: "client_cert_header", help: "request header in which the gateway that terminates mutual TLS forwards the client certificate (Envoy's X-Forwarded-Client-Cert, or a URL-escaped PEM such as nginx's $ssl_client_escaped_cert), read from -trusted-proxies only; certificate-bound tokens (cnf.x5t#S256, RFC 8705) are refused (cert_bound) without it",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.Verify.ClientCertHeader} }},
		{group: groupStart, flag: "data", key: "data", help: "catalog JSON file, reloaded on SIGHUP (default: the embedded sample catalog)",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.Data} }},
		{group: groupCatalog, flag: "database-poll", key: "poll", def: postgres.DefaultPoll.String(), help: "how often the catalog version is read, to catch a change whose notification was lost",
			value: func(c *serveConfig) flag.Value { return durationFlag{d: &c.DB.Poll} }},
		{group: groupCatalog, flag: "database-snapshot", key: "database_snapshot", def: "true", help: "serve the database's catalog from an in-memory snapshot kept current; false reads the database on every request",
			value: func(c *serveConfig) flag.Value { return boolFlag{&c.DatabaseSnapshot} }},
		{group: groupCatalog, flag: "database-url", key: "database_url", secret: true, help: "PostgreSQL DSN (a postgres:// URL or a key=value string); serve reads the catalog from it, migrate and import require it",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.DatabaseURL} }},
		{group: groupCatalog, flag: "db-connect-timeout", key: "connect_timeout", def: postgres.DefaultConnectTimeout.String(), help: "PostgreSQL connect timeout",
			value: func(c *serveConfig) flag.Value { return durationFlag{d: &c.DB.ConnectTimeout} }},
		{group: groupCatalog, flag: "db-max-conns", key: "max_conns", def: strconv.Itoa(postgres.DefaultMaxConns), help: "PostgreSQL pool size",
			value: func(c *serveConfig) flag.Value { return intFlag[int32]{v: &c.DB.MaxConns, min: 1} }},
		{group: groupCatalog, flag: "db-query-timeout", key: "query_timeout", def: postgres.DefaultQueryTimeout.String(), help: "PostgreSQL query timeout",
			value: func(c *serveConfig) flag.Value { return durationFlag{d: &c.DB.QueryTimeout} }},
		{group: groupStart, flag: "dev", key: "dev", noEnv: true, help: "development mode: ephemeral signing key, sample tokens printed at start, on loopback unless -addr or -admin-addr say otherwise",
			value: func(c *serveConfig) flag.Value { return boolFlag{&c.Dev} }},
		{group: groupSender, flag: "dpop-algorithms", key: "dpop_algorithms", def: strings.Join(dpop.DefaultAlgorithms(), ","), help: "algorithms a DPoP proof may be signed with, a comma list of asymmetric ones (never an HMAC or none), which the DPoP challenge and the resource metadata name",
			value: func(c *serveConfig) flag.Value { return listFlag{items: &c.Verify.DPoPAlgorithms} }},
		{group: groupSender, flag: "dpop-nonce-key-file", key: "dpop_nonce_key_file", help: "secret of at least 32 bytes, the same file on every replica, that makes DPoP server nonces (RFC 9449 §9): every DPoP proof must then carry one issued within -dpop-nonce-lifetime (401 use_dpop_nonce with a DPoP-Nonce header otherwise); read again when it changes (a mounted Secret updated) and on SIGHUP, the previous key's nonces then accepted for one lifetime",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.NonceKeyFile} }},
		{group: groupSender, flag: "dpop-nonce-lifetime", key: "dpop_nonce_lifetime", def: dpop.DefaultNonceLifetime.String(), help: "how long a DPoP server nonce is accepted after it was issued (from 3/4 of it to all of it); with -dpop-nonce-key-file",
			value: func(c *serveConfig) flag.Value { return durationFlag{d: &c.NonceLifetime} }},
		{group: groupSender, flag: "dpop-window", key: "dpop_window", def: auth.DefaultDPoPWindow.String(), help: "how old a DPoP proof may be, by its iat (the leeway comes on top)",
			value: func(c *serveConfig) flag.Value { return durationFlag{d: &c.Verify.DPoPWindow} }},
		{group: groupKeys, flag: "introspection-max-inflight", key: "introspection_max_inflight", def: strconv.Itoa(introspect.DefaultMaxInflight), help: "most calls to introspection endpoints at once, per replica; a request that would need one more is refused (503 introspection_unavailable, Retry-After) while cached answers keep serving",
			value: func(c *serveConfig) flag.Value { return intFlag[int]{v: &c.Introspection.MaxInflight, min: 1} }},
		{group: groupKeys, flag: "introspection-max-rate", key: "introspection_max_rate", def: strconv.Itoa(introspect.DefaultMaxRate), help: "most calls to introspection endpoints a second, per replica (a burst of one second's worth); a request over it is refused (503 introspection_unavailable, Retry-After), so no flood of unknown tokens raises the issuer's load above it",
			value: func(c *serveConfig) flag.Value {
				return numberFlag{&c.Introspection.MaxRate, "a positive number of calls a second, such as 50"}
			}},
		{group: groupKeys, flag: "introspection-timeout", key: "introspection_timeout", def: introspect.DefaultTimeout.String(), help: "time a call to an introspection endpoint may take; past it the request is refused (503 introspection_unavailable, Retry-After)",
			value: func(c *serveConfig) flag.Value { return durationFlag{d: &c.Introspection.Timeout, positive: true} }},
		{group: groupKeys, flag: "jwks-max-stale", key: "max_stale", issuer: fileDefault, help: "how long fetched keys keep verifying when no fetch succeeds (then 401 keys_unavailable and /readyz 503), for the -jwt-* issuer and the issuers of -jwt-issuers-file that say nothing; keys are then refreshed at least every half of it; keys read from files are not bounded; 0 keeps the last good keys for as long as fetches fail",
			value: func(c *serveConfig) flag.Value { return durationFlag{d: &c.JWT.MaxStale} }},
		{group: groupKeys, flag: "jwks-min-refresh", key: "min_refresh", def: keys.DefaultJWKSMinRefresh.String(), help: "minimum time between JWKS fetches for unknown kids",
			value: func(c *serveConfig) flag.Value { return durationFlag{d: &c.JWKSMinRefresh} }},
		{group: groupKeys, flag: "jwks-refresh", key: "refresh", def: keys.DefaultJWKSRefresh.String(), help: "JWKS background refresh period (with jitter)",
			value: func(c *serveConfig) flag.Value { return durationFlag{d: &c.JWKSRefresh} }},
		{group: groupRules, flag: "jwt-algorithms", key: "algorithms", issuer: flagIssuer, help: "allowed algorithms, comma list (default: " + strings.Join(auth.DefaultAlgorithms(), ",") + ")",
			value: func(c *serveConfig) flag.Value { return listFlag{items: &c.JWT.Algorithms} }},
		{group: groupRules, flag: "jwt-audience", key: "audiences", issuer: flagIssuer, help: "accepted audiences, comma list (aud must contain one)",
			value: func(c *serveConfig) flag.Value { return listFlag{items: &c.JWT.Audiences} }},
		{group: groupRules, flag: "jwt-audit", key: "audit", issuer: fileDefault, help: "rules counted rather than enforced, comma list of token_types, clients, max_lifetime and claims, for the -jwt-* issuer and the issuers of -jwt-issuers-file that say nothing: a token such a rule would refuse is accepted, counted in plantstore_auth_audit_total and logged with audit=<reason>",
			value: func(c *serveConfig) flag.Value { return listFlag{items: &c.JWT.Audit, orNone: true} }},
		{group: groupRules, flag: "jwt-cache-bytes", key: "cache_bytes", def: strconv.Itoa(auth.DefaultCacheBytes), help: "memory of the verified-token cache, everything counted (0 turns it off)",
			value: func(c *serveConfig) flag.Value { return sizeFlag{&c.CacheBytes} }},
		{group: groupRules, flag: "jwt-claims", key: "claims", issuer: fileDefault, help: `claim rules, a JSON list, for the -jwt-* issuer and the issuers of -jwt-issuers-file that say nothing: each {"path": P, and one of "equals": V, "one_of": [V, ...], "exists": true|false, "prefix": S}, P a claim or a dotted path, V a JSON value (true is not "true"), prefix on a string or any item of an array; every rule must hold (401 claim otherwise)`,
			value: func(c *serveConfig) flag.Value { return claimsFlag{&c.JWT.Claims} }},
		{group: groupRules, flag: "jwt-clients", key: "clients", issuer: fileDefault, help: "clients tokens must be issued to, comma list, for the -jwt-* issuer and the issuers of -jwt-issuers-file that say nothing: their client_id, or azp without it, must be one (401 client otherwise; default: any client)",
			value: func(c *serveConfig) flag.Value { return listFlag{items: &c.JWT.Clients} }},
		{group: groupSender, flag: "jwt-dpop", key: "dpop", issuer: fileDefault, def: auth.DPoPOptional.String(), help: "DPoP (RFC 9449) for the -jwt-* issuer, and for issuers of -jwt-issuers-file that say nothing: off, optional or required",
			value: func(c *serveConfig) flag.Value { return modeFlag{&c.JWT.DPoP} }},
		{group: groupRules, flag: "jwt-groups-claim", key: "groups_claim", issuer: flagIssuer, def: "groups", help: "claim holding the caller's groups; dotted path for nested claims",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.JWT.GroupsClaim} }},
		{group: groupKeys, flag: "jwt-hmac-secret-file", key: "hmac_secret_file", issuer: flagIssuer, help: "HMAC secret file (enables HS256/384/512), or a directory of several, each file a secret whose name is its kid; read again when it changes and on SIGHUP",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.Keys.HMACSecretFile} }},
		{group: groupStart, flag: "jwt-issuer", key: "issuer", issuer: flagIssuer, secret: true, help: "required iss; without another key source, the OIDC issuer to discover keys from",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.JWT.Issuer} }},
		{group: groupKeys, flag: "jwt-introspection", key: "introspection", issuer: flagIssuer, def: "off", help: "which tokens of the -jwt-* issuer are introspected (RFC 7662): off; opaque, the tokens that are not a JWT; or always, its JWTs too (a revoked token is then refused once its cached answer expires)",
			value: func(c *serveConfig) flag.Value { return tokensFlag{&c.JWT.Introspection.Tokens} }},
		{group: groupKeys, flag: "jwt-introspection-cache", key: "introspection_cache", issuer: flagIssuer, def: auth.DefaultIntrospectionCache.String(), help: "longest time a positive introspection answer is served from the verified-token cache, never past the token's exp: how long a revoked token may still pass",
			value: func(c *serveConfig) flag.Value { return durationFlag{d: &c.JWT.Introspection.Cache, positive: true} }},
		{group: groupKeys, flag: "jwt-introspection-client-id", key: "introspection_client_id", issuer: flagIssuer, help: "client the service authenticates to the introspection endpoint as",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.JWT.Introspection.ClientID} }},
		{group: groupKeys, flag: "jwt-introspection-jwt", key: "introspection_jwt_response", issuer: flagIssuer, help: "ask for signed introspection answers (RFC 9701, application/token-introspection+jwt) and verify them with the issuer's keys",
			value: func(c *serveConfig) flag.Value { return boolFlag{&c.JWT.Introspection.JWTResponse} }},
		{group: groupKeys, flag: "jwt-introspection-key-file", key: "introspection_private_key_file", issuer: flagIssuer, help: "PEM private key the client signs its assertions with (private_key_jwt, RFC 7523), in place of a secret; read again when it changes",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.JWT.Introspection.PrivateKeyFile} }},
		{group: groupKeys, flag: "jwt-introspection-secret-file", key: "introspection_client_secret_file", issuer: flagIssuer, help: "file holding the client's secret (client_secret_basic), one trailing newline dropped; read again when it changes",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.JWT.Introspection.ClientSecretFile} }},
		{group: groupKeys, flag: "jwt-introspection-url", key: "introspection_endpoint", issuer: flagIssuer, secret: true, help: "introspection endpoint (http or https) of the -jwt-* issuer (default: the introspection_endpoint of -jwt-issuer's discovery document)",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.JWT.Introspection.Endpoint} }},
		{group: groupKeys, flag: "jwt-issuers-file", key: "issuers", help: "YAML file of several issuers, each with its keys and rules, reloaded on SIGHUP; replaces the per-issuer -jwt-* flags",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.IssuersFile} }},
		{group: groupKeys, flag: "jwt-jwks-url", key: "jwks_url", issuer: flagIssuer, secret: true, help: "JWKS URL (http or https)",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.Keys.JWKSURL} }},
		{group: groupStart, flag: "jwt-key-file", key: "key_file", issuer: flagIssuer, help: "JWKS JSON or PEM public keys file, read again when it changes and on SIGHUP",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.Keys.KeyFile} }},
		{group: groupRules, flag: "jwt-leeway", key: "leeway", def: "30s", help: "clock skew allowed on exp, nbf and iat",
			value: func(c *serveConfig) flag.Value { return durationFlag{d: &c.Verify.Leeway} }},
		{group: groupRules, flag: "jwt-max-groups", key: "max_groups", def: strconv.Itoa(auth.DefaultMaxGroups), help: "most groups a token may carry (401 too_many_groups beyond)",
			value: func(c *serveConfig) flag.Value { return intFlag[int]{v: &c.Verify.MaxGroups, min: 1} }},
		{group: groupRules, flag: "jwt-max-lifetime", key: "max_lifetime", issuer: fileDefault, help: "longest lifetime of tokens, for the -jwt-* issuer and the issuers of -jwt-issuers-file that say nothing: exp after iat, or after now without iat (401 lifetime beyond); 0 turns the check off",
			value: func(c *serveConfig) flag.Value { return durationFlag{d: &c.JWT.MaxLifetime} }},
		{group: groupSender, flag: "jwt-mtls", key: "mtls", issuer: fileDefault, def: auth.MTLSOptional.String(), help: "certificate-bound tokens (RFC 8705) for the -jwt-* issuer, and for issuers of -jwt-issuers-file that say nothing: off (refused), optional, or required (every token must be bound to the request's client certificate; needs -client-cert-header)",
			value: func(c *serveConfig) flag.Value { return modeFlag{&c.JWT.MTLS} }},
		{group: groupRules, flag: "jwt-required-scope", key: "required_scope", issuer: fileDefault, help: "scope every token must carry (403 otherwise)",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.JWT.RequiredScope} }},
		{group: groupRules, flag: "jwt-token-types", key: "token_types", issuer: fileDefault, def: "any", help: "JOSE typ tokens must carry, comma list, for the -jwt-* issuer and the issuers of -jwt-issuers-file that say nothing: any (no typ, JWT or at+jwt), or at+jwt and/or jwt (401 token_type otherwise); a typ naming another kind of JWT (dpop+jwt, secevent+jwt, ...) is refused whatever this says",
			value: func(c *serveConfig) flag.Value { return listFlag{items: &c.JWT.TokenTypes} }},
		{group: groupObservability, flag: "log-format", key: "log_format", def: "json", help: "json or console",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.LogFormat} }},
		{group: groupObservability, flag: "log-level", key: "log_level", def: "info", help: "debug, info, warn or error",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.LogLevel} }},
		{group: groupObservability, flag: "pprof", key: "pprof", help: "serve net/http/pprof on the admin listener",
			value: func(c *serveConfig) flag.Value { return boolFlag{&c.Pprof} }},
		{group: groupListeners, flag: "public-url", key: "public_url", secret: true, help: "URL callers reach the API at (the gateway's), which DPoP proofs name and /.well-known/oauth-protected-resource describes, and which tokens may carry as aud beside the audiences (RFC 8707) (default: each request's scheme and host)",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.PublicURL} }},
		{group: groupShared, flag: "rate-burst", key: "burst", def: "20", help: "requests a caller may send at once before -rate-limit applies",
			value: func(c *serveConfig) flag.Value { return intFlag[int]{v: &c.RateBurst} }},
		{group: groupShared, flag: "rate-limit", key: "rate", help: "requests a second per caller (token bucket); 0 turns the limit off",
			value: func(c *serveConfig) flag.Value {
				return numberFlag{&c.RateLimit, "a number of requests a second, such as 10 or 0.5"}
			}},
		{group: groupShared, flag: "redis-key-file", key: "redis_key_file", help: "secret of at least 32 bytes, the same file on every replica, that every key -redis-url holds is hashed under, so that whoever reads Redis cannot confirm a guessed subject (default: one derived from -dpop-nonce-key-file's); read again when it changes and on SIGHUP",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.RedisKeyFile} }},
		{group: groupRules, flag: "revocation-retention", key: "revocation_retention", def: "24h", help: "how long a revocation cutoff is kept for an issuer without a max lifetime (-jwt-max-lifetime, max_lifetime): at least the lifetime of its tokens, or a token issued before the cutoff becomes good again once it is dropped",
			value: func(c *serveConfig) flag.Value { return durationFlag{d: &c.RevocationRetention, positive: true} }},
		{group: groupRules, flag: "revocations-file", key: "revocations_file", help: "YAML file of revocations (plantstore revoke writes it): cutoffs for a subject, a client or a whole issuer, and single tokens by jti, refused with 401 revoked; read again when it changes, a bad file keeping the last good revocations",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.RevocationsFile} }},
		{group: groupRules, flag: "ssf-path", key: "ssf_path", help: "API path (such as /ssf/events) that takes the security events of the issuers (OpenID Shared Signals, RFC 8935 push): session-revoked, credential-change, account-disabled, account-purged and credential-compromise revoke the subject's tokens, recorded in the database (-database-url) or the revocations file (-revocations-file); needs one of them, -public-url (the events' audience) and -jwt-issuer or -jwt-issuers-file (the iss they name)",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.SSFPath} }},
		{group: groupShared, flag: "redis-timeout", key: "redis_timeout", def: redisstate.DefaultTimeout.String(), help: "time a call to -redis-url may take; past it, and while Redis fails, each replica uses its own replay cache and rate limit",
			value: func(c *serveConfig) flag.Value { return durationFlag{d: &c.RedisTimeout, positive: true} }},
		{group: groupShared, flag: "redis-url", key: "redis_url", secret: true, help: "Redis or Valkey (redis:// or rediss://) that replicas share DPoP replay and -rate-limit state in (default: each replica keeps its own)",
			value: func(c *serveConfig) flag.Value { return textFlag{&c.RedisURL} }},
		{group: groupListeners, flag: "shutdown-delay", key: "shutdown_delay", def: "5s", help: "time the API keeps serving after SIGTERM while /readyz is 503 (0 with -dev)",
			value: func(c *serveConfig) flag.Value { return durationFlag{d: &c.ShutdownDelay, nonNegative: true} }},
		{group: groupListeners, flag: "shutdown-timeout", key: "shutdown_timeout", def: "20s", help: "time allowed for in-flight requests after the delay",
			value: func(c *serveConfig) flag.Value { return durationFlag{d: &c.ShutdownTimeout, nonNegative: true} }},
		{group: groupObservability, flag: "trace-subject", key: "trace_subject", help: "put the caller's subject (enduser.id) and issuer name on server spans; tracing itself is on when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_TRACES_EXPORTER is set",
			value: func(c *serveConfig) flag.Value { return boolFlag{&c.TraceSubject} }},
		{group: groupListeners, flag: "trusted-proxies", key: "trusted_proxies", help: "CIDR list of proxies whose X-Forwarded-For (and, without -public-url, X-Forwarded-Proto and X-Forwarded-Host) is believed",
			value: func(c *serveConfig) flag.Value { return prefixesFlag{&c.TrustedProxies} }},
		{group: groupListeners, flag: "write-timeout", key: "write_timeout", def: "1m", help: "time allowed for reading a request and for each write of a response; 0 for none",
			value: func(c *serveConfig) flag.Value { return durationFlag{d: &c.WriteTimeout, nonNegative: true} }},
	}
}

// row returns the row of the flag name, nil when t has none.
func (t settingRows) row(name string) *settingRow {
	for i := range t {
		if t[i].flag == name {
			return &t[i]
		}
	}
	return nil
}

// define adds the flags of t to fs, bound to the fields of c and set to
// their defaults.
func (t settingRows) define(fs *flag.FlagSet, c *serveConfig) {
	for _, s := range t {
		v := s.value(c)
		if s.def != "" {
			if err := v.Set(s.def); err != nil {
				panic("settings: the default of -" + s.flag + ": " + err.Error())
			}
		}
		fs.Var(v, s.flag, s.help)
	}
}

// keySource reports whether the row names where the -jwt-* issuer's keys
// come from (keys.KeySources).
func (s settingRow) keySource() bool {
	return s.issuer != everyIssuer && slices.Contains(keys.KeySources(), s.key)
}

// parseServeFlags reads the serve settings from args and their PLANTSTORE_*
// fallbacks. Errors wrap errUsage.
func parseServeFlags(args []string, e env, stderr io.Writer) (serveConfig, error) {
	return serveSettings().parse(args, e, stderr)
}

// parse reads the settings of t from args and e. Each value is checked by
// its flag, or later by the constructor it goes to; parse checks how they
// combine.
func (t settingRows) parse(args []string, e env, stderr io.Writer) (serveConfig, error) {
	c := serveConfig{rows: t}
	c.values = flag.NewFlagSet("serve", flag.ContinueOnError)
	t.define(c.values, &c)
	set, rest, err := parseFlags(c.values, args, e, t, stderr)
	if err != nil {
		return c, err
	}
	c.set = set
	if len(rest) > 0 {
		return c, usagef("serve: unexpected argument %q", rest[0])
	}
	for _, check := range []func() error{c.dev, c.stores, c.issuers, c.keySources} {
		if err := check(); err != nil {
			return c, err
		}
	}
	return c, nil
}

// dev applies the rules of -dev: loopback addresses and no
// shutdown delay unless set, no other key source or store, and no DPoP
// or mTLS mode that refuses the banner's bearer tokens.
func (c *serveConfig) dev() error {
	if !c.Dev {
		return nil
	}
	for _, s := range c.rows {
		if (s.keySource() || s.flag == "database-url" || s.flag == "jwt-issuers-file") && c.set.set(s.flag) {
			return usagef("serve: -dev signs its own tokens on the embedded or -data catalog; it cannot be combined with -%s (%s)", s.flag, envName(s.flag))
		}
	}
	// The banner prints bearer tokens: a mode that refuses them would
	// make every line it prints answer 401.
	if c.JWT.DPoP == auth.DPoPRequired {
		return usagef("serve: -dev prints bearer tokens, which -jwt-dpop required (%s) refuses; use off or optional with -dev", envName("jwt-dpop"))
	}
	if c.JWT.Introspection.Tokens != auth.IntrospectNone {
		return usagef("serve: -dev signs its own tokens; it cannot be combined with -jwt-introspection (%s)", envName("jwt-introspection"))
	}
	if c.JWT.MTLS == auth.MTLSRequired {
		return usagef("serve: -dev prints unbound tokens, which -jwt-mtls required (%s) refuses; use off or optional with -dev", envName("jwt-mtls"))
	}
	if !c.set.set("addr") {
		c.Addr = "127.0.0.1:8080"
	}
	if !c.set.set("admin-addr") {
		c.AdminAddr = "127.0.0.1:9090"
	}
	if !c.set.set("shutdown-delay") {
		c.ShutdownDelay = 0
	}
	return nil
}

// stores refuses two stores at once.
func (c *serveConfig) stores() error {
	if c.DatabaseURL != "" && c.Data != "" {
		return usagef("serve: -data and -database-url select different stores; set one")
	}
	if c.SSFPath != "" {
		switch {
		case !strings.HasPrefix(c.SSFPath, "/") || c.SSFPath == "/plants" || strings.HasPrefix(c.SSFPath, "/.well-known/"):
			return c.invalid(c.rows.row("ssf-path"), errors.New("want a path of its own, such as /ssf/events"))
		case c.DatabaseURL == "" && c.RevocationsFile == "":
			return usagef("serve: -ssf-path needs -database-url or -revocations-file: security events are recorded as revocations there, which every replica reads")
		case c.PublicURL == "":
			return usagef("serve: -ssf-path needs -public-url, the audience security events must name")
		case c.IssuersFile == "" && c.JWT.Issuer == "":
			return usagef("serve: -ssf-path needs -jwt-issuer (or -jwt-issuers-file): security events are taken from the issuer their iss names")
		}
	}
	if c.DatabaseURL != "" && c.RevocationsFile != "" {
		return usagef("serve: with -database-url the revocations live in the database (plantstore revoke -database-url); drop -revocations-file")
	}
	return nil
}

// issuers refuses the settings of the -jwt-* issuer beside an issuers
// file, which configures every issuer.
func (c *serveConfig) issuers() error {
	if c.IssuersFile == "" {
		return nil
	}
	for _, s := range c.rows {
		if s.issuer == flagIssuer && c.set.set(s.flag) {
			return usagef("serve: -jwt-issuers-file configures every issuer; -%s (%s) belongs to one issuer: set it in the file", s.flag, envName(s.flag))
		}
	}
	return nil
}

// keySources refuses a start with no key source: -jwt-issuer to discover,
// a key source of the -jwt-* issuer, an issuers file or -dev.
func (c *serveConfig) keySources() error {
	if c.IssuersFile != "" || c.JWT.Issuer != "" || c.Dev || c.Keys != (keys.KeySource{}) || c.JWT.Introspection.Tokens != auth.IntrospectNone {
		return nil
	}
	names := []string{"-jwt-issuer (OIDC discovery)"}
	for _, s := range c.rows {
		if s.keySource() {
			names = append(names, "-"+s.flag)
		}
	}
	return usagef("serve: no key source: set %s or -jwt-issuers-file (or their PLANTSTORE_* variables), or run with -dev", strings.Join(names, ", "))
}

// verifierOptions returns the options every issuer shares, the rate limit
// of -rate-limit among them.
func (c serveConfig) verifierOptions() (auth.Options, error) {
	o := c.Verify
	o.CacheBytes = c.CacheBytes
	if o.CacheBytes == 0 {
		o.CacheBytes = -1 // the flag's 0 is "off"; the Options' 0 is "default"
	}
	o.TrustedProxies = c.TrustedProxies
	if c.RateLimit != 0 {
		var err error
		if o.RateLimit, err = auth.NewRateLimit(c.RateLimit, c.RateBurst); err != nil {
			return o, c.refused(err)
		}
	}
	if c.NonceKeyFile != "" {
		var err error
		if o.Nonces, err = dpop.LoadNonces(c.NonceKeyFile, c.NonceLifetime); err != nil {
			return o, c.refused(err)
		}
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil {
			return o, c.invalid(c.rows.row("public-url"), errors.New("not a URL"))
		}
		o.PublicURL = u
	}
	return o, nil
}

// refused returns err as the usage error of the setting a constructor
// refused, when it is a *setting.Error: one of a file the settings name
// (the issuers file) is the usage error of that file, at its line; one
// of a row's key is the usage error of the row's flag, or of its
// variable when the value came from one; any other is a usage error in
// general terms. Other errors are returned as they are: the service
// cannot run.
func (c serveConfig) refused(err error) error {
	var se *setting.Error
	switch {
	case !errors.As(err, &se):
		return err
	case se.File != "":
		for _, s := range c.rows {
			if c.values.Lookup(s.flag).Value.String() == se.File {
				return usagef("serve: -%s: %v", s.flag, se)
			}
		}
	default:
		for i, s := range c.rows {
			if s.key == se.Key {
				return c.invalid(&c.rows[i], se.Err)
			}
		}
	}
	return usagef("serve: %v", err)
}

// invalid is the usage error for the value of the setting s, naming its
// variable when the value came from one.
func (c serveConfig) invalid(s *settingRow, err error) error {
	where := "flag -" + s.flag
	if c.set.fromEnv[s.flag] {
		where = envName(s.flag)
	}
	value := c.values.Lookup(s.flag).Value.String()
	if s.secret {
		value = setting.RedactURL(value)
	}
	return usagef("serve: invalid value %q for %s: %v", value, where, err)
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
