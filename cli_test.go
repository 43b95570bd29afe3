package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres/pgtest"
)

// TestServeUsage checks that every bad flag value stops the start with one
// line and errUsage (exit status 2), before anything listens.
func TestServeUsage(t *testing.T) {
	dev := []string{"-dev"}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string // substring of the message
	}{
		{"unknown flag", append(dev, "-nope"), nil, "flag provided but not defined: -nope (plantstore serve -h lists the flags)"},
		{"unknown flag near a known one", append(dev, "-jwt-isuer", "x"), nil, "-jwt-isuer; did you mean -jwt-issuer? (plantstore serve -h lists the flags)"},
		{"unknown flag, the start of a known one", append(dev, "-dat", "x"), nil, "did you mean -data?"},
		{"rate limit not a number", append(dev, "-rate-limit", "ten"), nil, `invalid value "ten" for flag -rate-limit: want a number of requests a second, such as 10 or 0.5`},
		{"bad duration", append(dev, "-jwt-leeway", "soon"), nil, "-jwt-leeway"},
		{"negative leeway", append(dev, "-jwt-leeway", "-1s"), nil, "-jwt-leeway"},
		{"bad addr", append(dev, "-addr", "8080"), nil, "-addr"},
		{"bad admin addr", append(dev, "-admin-addr", "localhost"), nil, "-admin-addr"},
		{"bad log level", append(dev, "-log-level", "loud"), nil, "-log-level"},
		{"bad log format", append(dev, "-log-format", "xml"), nil, "-log-format"},
		{"bad algorithm", append(dev, "-jwt-algorithms", "RS256,none"), nil, "none"},
		{"bad trusted proxies", append(dev, "-trusted-proxies", "10.0.0.0/33"), nil, "-trusted-proxies"},
		{"bad jwks url", []string{"-jwt-jwks-url", "ftp://x/jwks"}, nil, "-jwt-jwks-url"},
		{"issuer not a URL for discovery", []string{"-jwt-issuer", "plantstore"}, nil, "-jwt-issuer"},
		{"JWKS URL with secrets, bad scheme", []string{"-jwt-jwks-url", "ftp://u:s3cret@x/jwks?k=secret-value"}, nil, `"ftp://u:xxxxx@x/jwks?xxxxx" for flag -jwt-jwks-url`},
		{"issuer with secrets, bad scheme", []string{"-jwt-issuer", "ftp://u:s3cret@x/r?k=secret-value"}, nil, `"ftp://u:xxxxx@x/r?xxxxx" for flag -jwt-issuer`},
		{"negative JWKS refresh", []string{"-jwt-jwks-url", "http://127.0.0.1:1/jwks", "-jwks-refresh", "-1s"}, nil, "for flag -jwks-refresh"},
		{"negative JWKS min refresh from env", []string{"-jwt-issuer", "http://127.0.0.1:1/r"}, map[string]string{"PLANTSTORE_JWKS_MIN_REFRESH": "-2s"}, "for PLANTSTORE_JWKS_MIN_REFRESH"},
		{"negative database query timeout", []string{"-jwt-hmac-secret-file", hmacSecretFile(t), "-database-url", "postgres://127.0.0.1/x", "-db-query-timeout", "-1s"}, nil, "for flag -db-query-timeout"},
		{"negative database connect timeout", []string{"-jwt-hmac-secret-file", hmacSecretFile(t), "-database-url", "postgres://127.0.0.1/x", "-db-connect-timeout", "-1s"}, nil, "for flag -db-connect-timeout"},
		{"bad env value", dev, map[string]string{"PLANTSTORE_JWT_LEEWAY": "x"}, "PLANTSTORE_JWT_LEEWAY"},
		{"no key source", nil, nil, "-jwt-issuer"},
		{"PLANTSTORE_DEV is not a flag", nil, map[string]string{"PLANTSTORE_DEV": "true"}, "no key source"},
		{"stray argument", append(dev, "extra"), nil, "extra"},
		{"two stores", []string{"-jwt-key-file", "k", "-data", "x.json", "-database-url", "postgres://x"}, nil, "-database-url"},
		{"bad db pool", append(dev, "-db-max-conns", "0"), nil, "-db-max-conns"},
		{"duration without unit", append(dev, "-jwt-leeway", "30"), nil, "missing unit"},
		{"duration without unit from env", dev, map[string]string{"PLANTSTORE_JWT_LEEWAY": "30"}, "PLANTSTORE_JWT_LEEWAY: missing unit"},
		{"negative leeway from env", dev, map[string]string{"PLANTSTORE_JWT_LEEWAY": "-5s"}, "PLANTSTORE_JWT_LEEWAY"},
		{"blank audience", append(dev, "-jwt-audience", ","), nil, "-jwt-audience"},
		{"blank audience item", append(dev, "-jwt-audience", "a, ,b"), nil, "-jwt-audience"},
		{"blank audiences from env", dev, map[string]string{"PLANTSTORE_JWT_AUDIENCE": " , "}, "PLANTSTORE_JWT_AUDIENCE"},
		{"blank algorithms", append(dev, "-jwt-algorithms", " "), nil, "-jwt-algorithms"},
		{"max groups zero", append(dev, "-jwt-max-groups", "0"), nil, "-jwt-max-groups"},
		{"max groups not a number", append(dev, "-jwt-max-groups", "many"), nil, "-jwt-max-groups"},
		{"cache size", append(dev, "-jwt-cache-bytes", "32MB"), nil, "-jwt-cache-bytes"},
		{"bad groups claim", append(dev, "-jwt-groups-claim", "a..b"), nil, "-jwt-groups-claim"},
		{"bad required scope", append(dev, "-jwt-required-scope", "two words"), nil, "-jwt-required-scope"},
		{"negative rate limit", append(dev, "-rate-limit", "-1"), nil, "-rate-limit"},
		{"NaN rate limit", append(dev, "-rate-limit", "NaN"), nil, "-rate-limit"},
		{"infinite rate limit", append(dev, "-rate-limit", "+Inf"), nil, "-rate-limit"},
		{"burst zero", append(dev, "-rate-limit", "5", "-rate-burst", "0"), nil, "-rate-burst"},
		{"negative write timeout", append(dev, "-write-timeout", "-1s"), nil, "-write-timeout"},
		{"bad DPoP mode", append(dev, "-jwt-dpop", "always"), nil, "-jwt-dpop"},
		{"bad DPoP mode from env", dev, map[string]string{"PLANTSTORE_JWT_DPOP": "yes"}, "PLANTSTORE_JWT_DPOP"},
		{"negative DPoP window", append(dev, "-dpop-window", "-1s"), nil, "-dpop-window"},
		{"HMAC DPoP algorithm", append(dev, "-dpop-algorithms", "ES256,HS256"), nil, `invalid value "ES256,HS256" for flag -dpop-algorithms: "HS256" is an HMAC`},
		{"DPoP algorithm none from env", dev, map[string]string{"PLANTSTORE_DPOP_ALGORITHMS": "none"}, `for PLANTSTORE_DPOP_ALGORITHMS: algorithm "none" is never allowed`},
		{"unknown DPoP algorithm", append(dev, "-dpop-algorithms", "ES256K"), nil, "for flag -dpop-algorithms: unknown algorithm"},
		{"blank DPoP algorithms", append(dev, "-dpop-algorithms", ""), nil, "-dpop-algorithms"},
		{"DPoP nonce key too short", append(dev, "-dpop-nonce-key-file", writeTemp(t, strings.Repeat("k", 31)+"\n")), nil, "for flag -dpop-nonce-key-file: read dpop nonce key file "},
		{"DPoP nonce key too short, the size", append(dev, "-dpop-nonce-key-file", writeTemp(t, strings.Repeat("k", 31)+"\n")), nil, "key of 31 bytes, want at least 32"},
		{"DPoP nonce key file missing from env", dev, map[string]string{"PLANTSTORE_DPOP_NONCE_KEY_FILE": filepath.Join(t.TempDir(), "none")}, "for PLANTSTORE_DPOP_NONCE_KEY_FILE"},
		{"DPoP nonce lifetime too short", append(dev, "-dpop-nonce-key-file", hmacSecretFile(t), "-dpop-nonce-lifetime", "3s"), nil, "for flag -dpop-nonce-lifetime: 3s: want at least 4s"},
		{"public URL not http", append(dev, "-public-url", "ftp://plants.example.com"), nil, "-public-url"},
		{"public URL with a query", append(dev, "-public-url", "https://plants.example.com/?k=secret-value"), nil, "-public-url"},
		{"HMAC secret without HS algorithms", []string{"-jwt-hmac-secret-file", hmacSecretFile(t), "-jwt-algorithms", "RS256,ES256"}, nil, "for flag -jwt-hmac-secret-file: hmac secret file "},
		{"HMAC secret without HS algorithms, the algorithms", []string{"-jwt-hmac-secret-file", hmacSecretFile(t), "-jwt-algorithms", "RS256,ES256"}, nil, "has no key for the allowed algorithms RS256,ES256"},
		{"key file without fitting keys", []string{"-jwt-key-file", edKeyFile(t), "-jwt-algorithms", "RS256"}, nil, "no key for the allowed algorithms RS256"},
		{"key file without fitting keys from env", []string{"-jwt-algorithms", "RS256"}, map[string]string{"PLANTSTORE_JWT_KEY_FILE": edKeyFile(t)}, "for PLANTSTORE_JWT_KEY_FILE: key file "},
		{"-dev key without fitting algorithms", append(dev, "-jwt-algorithms", "RS256"), nil, `invalid value "RS256" for flag -jwt-algorithms: key set has no key`},
		{"issuer URL with a password", []string{"-jwt-hmac-secret-file", hmacSecretFile(t), "-jwt-issuer", "https://u:s3cret@idp.example/r"}, nil, `"https://u:xxxxx@idp.example/r" for flag -jwt-issuer: want a URL without user information or query`},
		{"issuer URL of a discovery document", []string{"-jwt-issuer", "http://127.0.0.1:1/realms/r/.well-known/openid-configuration"}, nil, `for flag -jwt-issuer: this is the URL of the issuer's discovery document, not the issuer: use http://127.0.0.1:1/realms/r (the document's "issuer")`},
		{"issuer URL with a query from env", []string{"-jwt-hmac-secret-file", hmacSecretFile(t)}, map[string]string{"PLANTSTORE_JWT_ISSUER": "https://idp.example/r?k=secret-value"}, "for PLANTSTORE_JWT_ISSUER: want a URL without user information or query"},
		{"-dev with a database", append(dev, "-database-url", "postgres://127.0.0.1/x"), nil, "-database-url"},
		{"-dev with a database from env", dev, map[string]string{"PLANTSTORE_DATABASE_URL": "postgres://127.0.0.1/x"}, "PLANTSTORE_DATABASE_URL"},
		{"-dev with a key file", append(dev, "-jwt-key-file", edKeyFile(t)), nil, "-jwt-key-file"},
		{"-dev with an HMAC secret", append(dev, "-jwt-hmac-secret-file", hmacSecretFile(t)), nil, "-jwt-hmac-secret-file"},
		{"-dev with a JWKS URL", append(dev, "-jwt-jwks-url", "http://127.0.0.1:1/jwks"), nil, "-jwt-jwks-url"},
		{"-dev with DPoP required (its bearer tokens would all be refused)", append(dev, "-jwt-dpop", "required"), nil, "-jwt-dpop required"},
		{"bad mTLS mode", append(dev, "-jwt-mtls", "on"), nil, `invalid value "on" for flag -jwt-mtls`},
		{"-dev with mTLS required", append(dev, "-jwt-mtls", "required"), nil, "-jwt-mtls required"},
		{"mTLS required without a certificate header", []string{"-jwt-hmac-secret-file", hmacSecretFile(t), "-jwt-mtls", "required"}, nil, `invalid value "required" for flag -jwt-mtls: required refuses every token while no client certificate header is configured`},
		{"client certificate header not a header name", []string{"-jwt-hmac-secret-file", hmacSecretFile(t), "-client-cert-header", "X Client Cert"}, nil, `for flag -client-cert-header: "X Client Cert" is not an HTTP header name`},
		{"token type of a DPoP proof", append(dev, "-jwt-token-types", "at+jwt,dpop+jwt"), nil, `invalid value "at+jwt,dpop+jwt" for flag -jwt-token-types: "dpop+jwt" names another kind of JWT`},
		{"token types any and at+jwt from env", dev, map[string]string{"PLANTSTORE_JWT_TOKEN_TYPES": "any,at+jwt"}, "for PLANTSTORE_JWT_TOKEN_TYPES: any already takes at+jwt"},
		{"bad introspection mode", []string{"-jwt-introspection", "yes"}, nil, `invalid value "yes" for flag -jwt-introspection: want off, opaque or always`},
		{"introspection without a client", []string{"-jwt-introspection", "opaque", "-jwt-introspection-url", "http://127.0.0.1:1/i"}, nil, "for flag -jwt-introspection-client-id: introspection needs the client"},
		{"introspection without a secret", []string{"-jwt-introspection", "opaque", "-jwt-introspection-url", "http://127.0.0.1:1/i", "-jwt-introspection-client-id", "ps"}, nil, "for flag -jwt-introspection-secret-file: introspection needs the client's secret file"},
		{"introspection secret file missing", []string{"-jwt-introspection", "opaque", "-jwt-introspection-url", "http://127.0.0.1:1/i", "-jwt-introspection-client-id", "ps", "-jwt-introspection-secret-file", filepath.Join(t.TempDir(), "none")}, nil, "for flag -jwt-introspection-secret-file"},
		{"introspection endpoint with a password", []string{"-jwt-introspection", "opaque", "-jwt-introspection-url", "https://u:s3cret@idp.example/i", "-jwt-introspection-client-id", "ps", "-jwt-introspection-secret-file", hmacSecretFile(t)}, nil, `"https://u:xxxxx@idp.example/i" for flag -jwt-introspection-url`},
		{"introspection rate negative", append(dev, "-introspection-max-rate", "-1"), nil, "-introspection-max-rate"},
		{"introspection rate zero", append(dev, "-introspection-max-rate", "0"), nil, `invalid value "0" for flag -introspection-max-rate: want a positive number`},
		{"-dev with introspection", append(dev, "-jwt-introspection", "opaque"), nil, "-jwt-introspection"},
		{"two issuers of opaque tokens", []string{"-jwt-issuers-file", twoOpaqueIssuers(t)}, nil, "issuers a and b both take opaque tokens; at most one may"},
		{"blank client", append(dev, "-jwt-clients", "web, "), nil, "-jwt-clients"},
		{"negative max lifetime", append(dev, "-jwt-max-lifetime", "-1h"), nil, `invalid value "-1h0m0s" for flag -jwt-max-lifetime: negative duration`},
		{"claim rule not JSON", append(dev, "-jwt-claims", "[{path: tid}]"), nil, `invalid value "[{path: tid}]" for flag -jwt-claims: not JSON`},
		{"claim rule with an unknown key", append(dev, "-jwt-claims", `[{"path":"tid","equal":"t-1"}]`), nil, `for flag -jwt-claims: unknown key "equal"`},
		{"claim rule with two operators", append(dev, "-jwt-claims", `[{"path":"tid","equals":"t-1","exists":true}]`), nil, `for flag -jwt-claims: rule 1 (path "tid"): two operators (equals and exists)`},
		{"claim rule without a path from env", dev, map[string]string{"PLANTSTORE_JWT_CLAIMS": `[{"path":"","exists":true}]`}, "for PLANTSTORE_JWT_CLAIMS: rule 1: no path"},
		{"audit of a rule that cannot be", append(dev, "-jwt-audit", "claims,required_scope"), nil, `invalid value "claims,required_scope" for flag -jwt-audit: "required_scope" is no rule that can be audited`},
		{"port out of range", append(dev, "-addr", "127.0.0.1:99999"), nil, "-addr"},
		{"port not a number", append(dev, "-admin-addr", "127.0.0.1:abc"), nil, "-admin-addr"},
		{"host not an IP", append(dev, "-addr", "999.1.1.1:80"), nil, "-addr"},
		{"malformed DSN", []string{"-jwt-hmac-secret-file", hmacSecretFile(t), "-database-url", "mysql://u:s3cret@x/y"}, nil, "-database-url"},
		{"malformed DSN from env", []string{"-jwt-hmac-secret-file", hmacSecretFile(t)}, map[string]string{"PLANTSTORE_DATABASE_URL": "postgres://%zz"}, "-database-url"},
		{"database poll not a duration", []string{"-jwt-hmac-secret-file", hmacSecretFile(t), "-database-url", "postgres://127.0.0.1:1/x", "-database-poll", "often"}, nil, "-database-poll"},
		{"database poll too short", []string{"-jwt-hmac-secret-file", hmacSecretFile(t), "-database-url", "postgres://127.0.0.1:1/x", "-database-poll", "1ms"}, nil, "flag -database-poll: 1ms is shorter than 10ms"},
		{"database poll too short from env", []string{"-jwt-hmac-secret-file", hmacSecretFile(t), "-database-url", "postgres://127.0.0.1:1/x"}, map[string]string{"PLANTSTORE_DATABASE_POLL": "-1s"}, "PLANTSTORE_DATABASE_POLL"},
		{"database poll too short, per request", []string{"-jwt-hmac-secret-file", hmacSecretFile(t), "-database-url", "postgres://127.0.0.1:1/x", "-database-snapshot=false", "-database-poll", "1ms"}, nil, "-database-poll"},
		{"CORS origin with a trailing slash", append(dev, "-cors-origins", "https://app.example.com/"), nil, `invalid value "https://app.example.com/" for flag -cors-origins: origin "https://app.example.com/": an origin has no path, not even a trailing slash`},
		{"CORS origin with a path from env", dev, map[string]string{"PLANTSTORE_CORS_ORIGINS": "https://app.example.com/app"}, "for PLANTSTORE_CORS_ORIGINS: origin \"https://app.example.com/app\": an origin has no path"},
		{"CORS origin without a scheme", append(dev, "-cors-origins", "app.example.com"), nil, "want scheme://host[:port]"},
		{"CORS * among origins", append(dev, "-cors-origins", "https://a.example,*"), nil, `"*" allows every origin: give it alone`},
		{"CORS origin with the default port", append(dev, "-cors-origins", "https://a.example:443"), nil, "leave out the default port 443"},
		{"CORS origin in upper case", append(dev, "-cors-origins", "https://App.example"), nil, "write the host in lower case"},
		{"CORS origin with a query", append(dev, "-cors-origins", "https://a.example?x=1"), nil, "no query"},
		{"CORS blank origin", append(dev, "-cors-origins", "https://a.example,"), nil, "-cors-origins: blank item 2"},
		{"redis URL of another scheme, with secrets", append(dev, "-redis-url", "http://u:s3cret@127.0.0.1:6379/0?k=secret-value"), nil, `invalid value "http://u:xxxxx@127.0.0.1:6379/0?xxxxx" for flag -redis-url: want a redis:// or rediss:// URL`},
		{"redis URL with a bad database, from env", dev, map[string]string{"PLANTSTORE_REDIS_URL": "redis://:s3cret@127.0.0.1/x"}, `"redis://:xxxxx@127.0.0.1/x" for PLANTSTORE_REDIS_URL: want a redis:// or rediss:// URL`},
		{"redis timeout zero", append(dev, "-redis-timeout", "0s"), nil, "flag -redis-timeout: must be positive"},
		{"database snapshot not a bool", []string{"-jwt-hmac-secret-file", hmacSecretFile(t), "-database-url", "postgres://127.0.0.1:1/x"}, map[string]string{"PLANTSTORE_DATABASE_SNAPSHOT": "sometimes"}, "PLANTSTORE_DATABASE_SNAPSHOT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"serve", "-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0"}, tt.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := run(ctx, args, envOf(tt.env), nil, &stdout, &stderr)
			if !errors.Is(err, errUsage) {
				t.Fatalf("run(%q) = %v, want a usage error", tt.args, err)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, tt.want) {
				t.Errorf("run(%q) message %q: want one line containing %q", tt.args, msg, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "secret-value") {
				t.Errorf("run(%q) message %q repeats the DSN's password", tt.args, err)
			}
			if strings.Contains(stderr.String(), "listening") {
				t.Errorf("run(%q) started listening before refusing", tt.args)
			}
		})
	}
}

// TestServeEnv checks the PLANTSTORE_* fallback and that the flag wins.
func TestServeEnv(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want func(serveConfig) bool
	}{
		{"env sets", []string{"-dev"}, map[string]string{"PLANTSTORE_JWT_LEEWAY": "5s", "PLANTSTORE_JWT_AUDIENCE": "a, b"},
			func(c serveConfig) bool {
				return c.Verify.Leeway == 5*time.Second && slices.Equal(c.JWT.Audiences, []string{"a", "b"})
			}},
		{"flag wins", []string{"-dev", "-jwt-leeway", "7s"}, map[string]string{"PLANTSTORE_JWT_LEEWAY": "5s"},
			func(c serveConfig) bool { return c.Verify.Leeway == 7*time.Second }},
		{"bool from env", []string{"-dev"}, map[string]string{"PLANTSTORE_PPROF": "true"},
			func(c serveConfig) bool { return c.Pprof }},
		{"dev only by flag", nil, map[string]string{"PLANTSTORE_DEV": "true", "PLANTSTORE_JWT_KEY_FILE": "k.json"},
			func(c serveConfig) bool { return !c.Dev && c.Keys.KeyFile == "k.json" }},
		{"defaults", []string{"-jwt-key-file", "k"}, nil,
			func(c serveConfig) bool {
				return c.Addr == ":8080" && c.AdminAddr == ":9090" && c.Verify.Leeway == 30*time.Second &&
					c.Verify.MaxGroups == 256 && c.CacheBytes == 32<<20 &&
					c.JWKSRefresh == 15*time.Minute && c.JWKSMinRefresh == 30*time.Second &&
					c.ShutdownDelay == 5*time.Second && c.ShutdownTimeout == 20*time.Second &&
					c.JWT.GroupsClaim == "groups" && c.LogFormat == "json" && c.LogLevel == "info" && !c.Pprof &&
					c.DatabaseSnapshot && c.DB.Poll == 10*time.Second
			}},
		{"database modes from env", []string{"-jwt-key-file", "k"}, map[string]string{"PLANTSTORE_DATABASE_SNAPSHOT": "false", "PLANTSTORE_DATABASE_POLL": "2s"},
			func(c serveConfig) bool { return !c.DatabaseSnapshot && c.DB.Poll == 2*time.Second }},
		{"-dev listens on loopback and stops at once", []string{"-dev"}, nil,
			func(c serveConfig) bool {
				return c.Addr == "127.0.0.1:8080" && c.AdminAddr == "127.0.0.1:9090" && c.ShutdownDelay == 0 && c.ShutdownTimeout == 20*time.Second
			}},
		{"-dev keeps what is set", []string{"-dev", "-addr", ":8081", "-shutdown-delay", "2s"}, map[string]string{"PLANTSTORE_ADMIN_ADDR": "0.0.0.0:9091"},
			func(c serveConfig) bool {
				return c.Addr == ":8081" && c.AdminAddr == "0.0.0.0:9091" && c.ShutdownDelay == 2*time.Second
			}},
		{"sizes and counts", []string{"-dev", "-jwt-cache-bytes", "512KiB", "-jwt-max-groups", "10"}, nil,
			func(c serveConfig) bool { return c.CacheBytes == 512<<10 && c.Verify.MaxGroups == 10 }},
		{"cache off", []string{"-dev", "-jwt-cache-bytes", "0"}, nil,
			func(c serveConfig) bool { o, err := c.verifierOptions(); return err == nil && o.CacheBytes < 0 }},
		{"cache default", []string{"-dev"}, nil,
			func(c serveConfig) bool { o, err := c.verifierOptions(); return err == nil && o.CacheBytes == 32<<20 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseServeFlags(tt.args, newEnv(envOf(tt.env)), io.Discard)
			if err != nil {
				t.Fatalf("parseServeFlags(%q, %v) = %v", tt.args, tt.env, err)
			}
			if !tt.want(cfg) {
				t.Errorf("parseServeFlags(%q, %v) = %+v: not what the row wants", tt.args, tt.env, cfg)
			}
		})
	}
}

// TestServeCannotRun checks exit status 1 (not a usage error) when the
// service cannot run.
func TestServeCannotRun(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`[{"name":"Fern","readers":["*"]},{"name":"","readers":["*"]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	comma := filepath.Join(dir, "comma.json") // one entry, and a comma after it
	if err := os.WriteFile(comma, []byte("[\n  {\"name\": \"Fern\", \"readers\": [\"*\"]},\n]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	quote := filepath.Join(dir, "quote.json") // a quote missing on line 3
	if err := os.WriteFile(quote, []byte("[\n  {\"name\": \"Fern\", \"readers\": [\"*\"]},\n  {\"name\": Moss\", \"readers\": [\"*\"]}\n]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	demo := filepath.Join(dir, "demo")
	if err := run(t.Context(), []string{"keygen", "-alg", "ES256", "-out", demo}, nil, nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	lone := filepath.Join(dir, "lone.key") // a private key with no public key set beside it
	if err := os.WriteFile(lone, mustRead(t, demo+".key"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"bad catalog", []string{"-dev", "-data", bad}, nil, []string{"bad.json", "1"}},
		{"missing catalog", []string{"-dev", "-data", filepath.Join(dir, "none.json")}, nil, []string{"none.json"}},
		{"catalog with a comma after its one entry", []string{"-dev", "-data", comma}, nil, []string{"comma.json: line 3, column 1: a comma after the last entry; JSON allows none"}},
		{"catalog not JSON", []string{"-dev", "-data", quote}, nil, []string{"quote.json: entry 2: line 3, column 12: invalid JSON: invalid character 'M' looking for beginning of value"}},
		{"address in use", []string{"-dev", "-addr", busy.Addr().String()}, nil, []string{"API listener: listen tcp " + busy.Addr().String() + ": bind: address already in use: the address of -addr is taken, most likely by another plantstore (a go run . -dev left running?); stop it, or give -addr (or PLANTSTORE_ADDR) another port"}},
		{"admin address in use, from its variable", []string{"-dev"}, map[string]string{"PLANTSTORE_ADMIN_ADDR": busy.Addr().String()}, []string{"admin listener: listen tcp " + busy.Addr().String() + ": bind: address already in use: the address of PLANTSTORE_ADMIN_ADDR is taken, most likely by another plantstore", "give -admin-addr (or PLANTSTORE_ADMIN_ADDR) another port"}},
		{"missing key file", []string{"-jwt-key-file", filepath.Join(dir, "none.jwks")}, nil, []string{"none.jwks"}},
		{"private key as the key file", []string{"-jwt-key-file", demo + ".key"}, nil, []string{"load key file " + demo + ".key: ", "this is a private key, and the service verifies with public keys: use " + demo + ".jwks.json, the public key set that plantstore keygen wrote beside it"}},
		{"private key as the key file, none beside it", []string{"-jwt-key-file", lone}, nil, []string{"this is a private key, and the service verifies with public keys: give its public keys (a JWKS, or PEM PUBLIC KEY blocks), such as the PREFIX.jwks.json"}},
		{"missing HMAC secret file", []string{"-jwt-hmac-secret-file", filepath.Join(dir, "none.secret")}, nil, []string{"none.secret"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"serve", "-addr", "127.0.0.1:0"}
			if tt.env["PLANTSTORE_ADMIN_ADDR"] == "" {
				args = append(args, "-admin-addr", "127.0.0.1:0")
			}
			args = append(args, tt.args...)
			err := run(context.Background(), args, envOf(tt.env), nil, io.Discard, io.Discard)
			if err == nil || errors.Is(err, errUsage) {
				t.Fatalf("run(%q) = %v, want a non-usage error", tt.args, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("run(%q) = %q, want it to mention %q", tt.args, err, w)
				}
			}
		})
	}
}

// TestListeningNamesCatalog checks that the start's "listening" line says
// which catalog the service serves: the embedded sample one when no -data
// names a file, the file, or the database.
func TestListeningNamesCatalog(t *testing.T) {
	file := filepath.Join(t.TempDir(), "mine.json")
	if err := os.WriteFile(file, []byte(`[{"name": "Fern", "readers": ["*"]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	keys := edKeyFile(t)
	tests := []struct {
		name string
		args func(t *testing.T) []string
		want string
	}{
		{"no -data", func(*testing.T) []string { return []string{"-jwt-key-file", keys} }, "the embedded sample catalog"},
		{"-data", func(*testing.T) []string { return []string{"-jwt-key-file", keys, "-data", file} }, file},
		{"-database-url", func(t *testing.T) []string {
			return []string{"-jwt-key-file", keys, "-database-url", migratedDatabase(t)}
		}, "the PostgreSQL database of -database-url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := startServe(t, nil, tt.args(t)...)
			for _, line := range logLines(t, in.stderr.String()) {
				if line["msg"] == "listening" && line["catalog"] != tt.want {
					t.Errorf("the listening line says catalog %q; want %q", line["catalog"], tt.want)
				}
			}
		})
	}
}

// mintTestToken makes a key pair with keygen and a token with the token
// command, and returns the token and the public JWKS path.
func mintTestToken(t testing.TB, alg string, tokenArgs ...string) (token, jwksPath string) {
	t.Helper()
	prefix := filepath.Join(t.TempDir(), "key")
	if err := run(context.Background(), []string{"keygen", "-alg", alg, "-out", prefix}, envOf(nil), nil, io.Discard, io.Discard); err != nil {
		t.Fatalf("keygen -alg %s: %v", alg, err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), append([]string{"token", "-key", prefix + ".key"}, tokenArgs...), envOf(nil), nil, &out, io.Discard); err != nil {
		t.Fatalf("token %q: %v", tokenArgs, err)
	}
	token = strings.TrimSuffix(out.String(), "\n")
	if strings.Contains(token, "\n") || token == "" {
		t.Fatalf("token printed %q, want one line", out.String())
	}
	return token, prefix + ".jwks.json"
}

// TestKeygenAndToken checks that keys and tokens made by the CLI verify in
// the service, for every keygen algorithm.
func TestKeygenAndToken(t *testing.T) {
	for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
		t.Run(alg, func(t *testing.T) {
			token, jwks := mintTestToken(t, alg, "-sub", "bob", "-groups", "gardeners", "-aud", "plants-api", "-iss", "https://idp.example", "-scope", "plants:read other", "-ttl", "5m")
			in := startServe(t, nil, "-jwt-key-file", jwks, "-jwt-issuer", "https://idp.example",
				"-jwt-audience", "plants-api", "-jwt-required-scope", "plants:read")
			status, body, _ := get(t, in.api+"/plants", token)
			if status != http.StatusOK {
				t.Fatalf("GET /plants with a %s token from the token command = %d %s, want 200", alg, status, body)
			}
			want := expectedPlants(plants.SampleCatalog(), plants.Caller{Subject: "bob", Groups: []string{"gardeners"}})
			var got []wirePlant
			if err := json.Unmarshal(body, &got); err != nil || !slices.Equal(got, want) {
				t.Errorf("GET /plants = %s (%v), want %v", body, err, want)
			}
		})
	}
	t.Run("keygen refuses to overwrite, but with -force", func(t *testing.T) {
		prefix := filepath.Join(t.TempDir(), "k")
		args := []string{"keygen", "-alg", "EdDSA", "-out", prefix}
		if err := run(context.Background(), args, envOf(nil), nil, io.Discard, io.Discard); err != nil {
			t.Fatal(err)
		}
		before := mustRead(t, prefix+".key")
		err := run(context.Background(), args, envOf(nil), nil, io.Discard, io.Discard)
		want := prefix + ".key and " + prefix + ".jwks.json already exist: -force replaces " + prefix + ".key and " + prefix + ".jwks.json with a new key pair (tokens of the old key are then refused), or choose another -out"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("second keygen -out %s = %v; want an error holding %q", prefix, err, want)
		}
		if !bytes.Equal(before, mustRead(t, prefix+".key")) {
			t.Errorf("second keygen changed %s.key", prefix)
		}
		// A private key made readable to all is replaced by a file of
		// mode 0600, not written into.
		if err := os.Chmod(prefix+".key", 0o644); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := run(context.Background(), append(args, "-force"), envOf(nil), nil, &out, io.Discard); err != nil {
			t.Fatalf("keygen -force: %v", err)
		}
		if bytes.Equal(before, mustRead(t, prefix+".key")) || !strings.HasPrefix(out.String(), "wrote ") {
			t.Errorf("keygen -force printed %q and left %s.key as it was; want a new key", out.String(), prefix)
		}
		if fi, err := os.Stat(prefix + ".key"); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("keygen -force: %s.key mode %v (%v); want 0600", prefix, fi.Mode().Perm(), err)
		}
		// The new pair is a pair: a token of the new key verifies with
		// the new public key set.
		var token bytes.Buffer
		if err := run(context.Background(), []string{"token", "-key", prefix + ".key", "-sub", "bob"}, envOf(nil), nil, &token, io.Discard); err != nil {
			t.Fatal(err)
		}
		in := startServe(t, nil, "-jwt-key-file", prefix+".jwks.json")
		if status, body, _ := get(t, in.api+"/plants", strings.TrimSpace(token.String())); status != http.StatusOK {
			t.Errorf("a token of the key keygen -force wrote: GET /plants = %d %s; want 200", status, body)
		}
		// Half a pair is refused too, naming the file that is there.
		other := filepath.Join(t.TempDir(), "half")
		if err := os.WriteFile(other+".jwks.json", []byte(`{"keys":[]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		err = run(context.Background(), []string{"keygen", "-out", other}, envOf(nil), nil, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), other+".jwks.json already exists: -force") {
			t.Errorf("keygen -out %s beside %s.jwks.json = %v; want it refused naming that file", other, other, err)
		}
		if _, err := os.Stat(other + ".key"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the refused keygen left %s.key (%v)", other, err)
		}
	})
	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"token", "-sub", "x"},
			{"token", "-key", "k"},
			{"token", "-key", "k", "-sub", "x", "-ttl", "0s"},
			{"keygen", "-alg", "HS256", "-out", "x"},
			{"keygen"},
			{"nosuchcommand"},
			{"version", "extra"},
		} {
			if err := run(context.Background(), args, envOf(nil), nil, io.Discard, io.Discard); !errors.Is(err, errUsage) {
				t.Errorf("run(%q) = %v, want a usage error", args, err)
			}
		}
	})
}

// hmacSecretFile writes a 32-byte HMAC secret and returns its path.
func hmacSecretFile(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(strings.Repeat("k", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeTemp writes content to a file of its own and returns its path.
func writeTemp(t testing.TB, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// edKeyFile writes a JWKS file with one Ed25519 key and returns its path.
func edKeyFile(t testing.TB) string {
	t.Helper()
	_, jwks := mintTestToken(t, "EdDSA", "-sub", "x")
	return jwks
}

// TestUnknownEnvWarned: a PLANTSTORE_* variable that names no flag is
// named in one warning line at start; Kubernetes service links and the
// known variables are not.
func TestUnknownEnvWarned(t *testing.T) {
	in := startServe(t, map[string]string{
		"PLANTSTORE_JWT_AUDIANCE":          "x", // a typo
		"PLANTSTORE_LOG_LEVEL":             "info",
		"PLANTSTORE_SERVICE_HOST":          "10.0.0.1",
		"PLANTSTORE_SERVICE_PORT":          "8080",
		"PLANTSTORE_SERVICE_PORT_HTTP":     "8080",
		"PLANTSTORE_PORT":                  "tcp://10.0.0.1:8080",
		"PLANTSTORE_PORT_8080_TCP_ADDR":    "10.0.0.1",
		"PLANTSTORE_METRICS_SERVICE_HOST":  "10.0.0.2",
		"PLANTSTORE_METRICS_PORT_9090_TCP": "tcp://10.0.0.2:9090",
		"PLANTSTORE_DEV":                   "true",
		"OTHER_VARIABLE":                   "x",
	}, "-dev")
	var warnings []map[string]any
	for _, l := range logLines(t, in.stderr.String()) {
		if l["level"] == "warn" {
			warnings = append(warnings, l)
		}
	}
	if len(warnings) != 1 {
		t.Fatalf("%d warning lines at start, want 1:\n%s", len(warnings), in.stderr)
	}
	var names []string
	for _, n := range warnings[0]["names"].([]any) {
		names = append(names, n.(string))
	}
	slices.Sort(names)
	if want := []string{"PLANTSTORE_DEV", "PLANTSTORE_JWT_AUDIANCE"}; !slices.Equal(names, want) {
		t.Errorf("warning names %q, want %q", names, want)
	}
}

// TestTokenCommand checks what the token command's flags put in a token:
// an expired or not-yet-valid token, groups at a nested claim, a token
// signed with the HMAC secret file the service verifies with.
func TestTokenCommand(t *testing.T) {
	secret := hmacSecretFile(t)
	mint := func(args ...string) map[string]any {
		t.Helper()
		var out bytes.Buffer
		if err := run(context.Background(), append([]string{"token"}, args...), nil, nil, &out, io.Discard); err != nil {
			t.Fatalf("token %q: %v", args, err)
		}
		parts := strings.Split(strings.TrimSpace(out.String()), ".")
		if len(parts) != 3 {
			t.Fatalf("token %q printed %q", args, out.String())
		}
		payload, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil {
			t.Fatal(err)
		}
		var c map[string]any
		if err := json.Unmarshal(payload, &c); err != nil {
			t.Fatal(err)
		}
		c["_raw"] = strings.TrimSpace(out.String())
		return c
	}
	now := float64(time.Now().Unix())
	expired := mint("-hmac-secret-file", secret, "-sub", "a", "-ttl", "-1h")
	if exp := expired["exp"].(float64); exp > now-3500 || exp < now-3700 {
		t.Errorf("-ttl -1h: exp %v, want an hour ago", exp)
	}
	later := mint("-hmac-secret-file", secret, "-sub", "a", "-nbf", "10m")
	if nbf := later["nbf"].(float64); nbf < now+590 || nbf > now+610 {
		t.Errorf("-nbf 10m: nbf %v, want ten minutes from now", nbf)
	}
	nested := mint("-hmac-secret-file", secret, "-sub", "a", "-groups", "x,y", "-groups-claim", "realm_access.roles")
	if ra, _ := nested["realm_access"].(map[string]any); fmt.Sprint(ra["roles"]) != "[x y]" || nested["groups"] != nil {
		t.Errorf("-groups-claim realm_access.roles: claims %v", nested)
	}
	in := startServe(t, nil, "-jwt-hmac-secret-file", secret, "-jwt-groups-claim", "realm_access.roles")
	for _, tt := range []struct {
		name   string
		token  any
		status int
	}{
		{"signed with the secret file", nested["_raw"], http.StatusOK},
		{"expired", expired["_raw"], http.StatusUnauthorized},
		{"not yet valid", later["_raw"], http.StatusUnauthorized},
	} {
		if status, body, _ := get(t, in.api+"/plants", tt.token.(string)); status != tt.status {
			t.Errorf("%s: GET /plants = %d %s, want %d", tt.name, status, body, tt.status)
		}
	}
	for _, args := range [][]string{
		{"-sub", "a"},
		{"-sub", "a", "-key", "k", "-hmac-secret-file", secret},
		{"-hmac-secret-file", secret, "-sub", "a", "-ttl", "0s"},
		{"-hmac-secret-file", secret, "-sub", "a", "-ttl", "10"},
		{"-hmac-secret-file", secret, "-sub", "a", "-alg", "RS256"},
	} {
		if err := run(context.Background(), append([]string{"token"}, args...), nil, nil, io.Discard, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("token %q = %v, want a usage error", args, err)
		}
	}
}

// TestCommandMistakes checks what the commands other than serve say to
// the mistakes a new user makes: a public key where the private one is
// needed (with the file to use instead), a proof for a URL or method that
// no request has, an unknown flag.
func TestCommandMistakes(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "demo")
	if err := run(t.Context(), []string{"keygen", "-alg", "ES256", "-out", prefix}, nil, nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.jwks.json") // no other.key beside it
	if err := os.WriteFile(other, mustRead(t, prefix+".jwks.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	url := "http://127.0.0.1:8080/plants"
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"token signed with the public JWKS", []string{"token", "-key", prefix + ".jwks.json", "-sub", "alice"}, "the file holds a public key, not a private one; use " + prefix + ".key, the private key that plantstore keygen wrote beside it"},
		{"token bound to the public JWKS", []string{"token", "-key", prefix + ".key", "-sub", "alice", "-dpop-key", prefix + ".jwks.json"}, "use " + prefix + ".key"},
		{"token with a public JWKS of no known private key", []string{"token", "-key", other, "-sub", "alice"}, "give the private key file (PKCS#8 PEM or a private JWK), such as the PREFIX.key that plantstore keygen writes"},
		{"proof with the public JWKS", []string{"proof", "-key", prefix + ".jwks.json", "-url", url}, "use " + prefix + ".key"},
		{"proof URL without a scheme", []string{"proof", "-key", prefix + ".key", "-url", "127.0.0.1:8080/plants"}, `invalid value "127.0.0.1:8080/plants" for flag -url: want the absolute URL of the request, such as http://127.0.0.1:8080/plants`},
		{"proof URL of another scheme", []string{"proof", "-key", prefix + ".key", "-url", "ftp://127.0.0.1/plants"}, "want the absolute URL"},
		{"proof method in lower case", []string{"proof", "-key", prefix + ".key", "-url", url, "-method", "get"}, `invalid value "get" for flag -method: methods are case-sensitive, and the request's method is compared as it is sent; want GET`},
		{"proof method not a token", []string{"proof", "-key", prefix + ".key", "-url", url, "-method", "GET /plants"}, "want an HTTP method"},
		{"import flag misspelt", []string{"import", "-upsrt", "catalog.json"}, "did you mean -upsert? (plantstore import -h lists the flags)"},
		{"version with an argument", []string{"version", "now"}, "version takes no arguments"},
		{"help for no such command", []string{"help", "nope"}, `help: unknown command "nope"`},
	}
	for _, tt := range tests {
		var stdout bytes.Buffer
		err := run(t.Context(), tt.args, nil, nil, &stdout, io.Discard)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %q = %v; want a usage error holding %q", tt.name, tt.args, err, tt.want)
		}
		if stdout.Len() > 0 {
			t.Errorf("%s: %q printed %q", tt.name, tt.args, stdout.String())
		}
	}
	// The same proof with what it asked for works.
	var out bytes.Buffer
	if err := run(t.Context(), []string{"proof", "-key", prefix + ".key", "-url", url, "-method", "HEAD"}, nil, nil, &out, io.Discard); err != nil || strings.Count(out.String(), ".") != 2 {
		t.Errorf("proof -method HEAD = %q, %v; want a JWT", out.String(), err)
	}
}

// mustRead returns the content of the file at path.
func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHelpCommand checks "plantstore help COMMAND": the command's flags
// on stdout, exit 0, as "COMMAND -h" prints them.
func TestHelpCommand(t *testing.T) {
	for _, cmd := range []string{"serve", "token", "proof", "keygen", "migrate", "import", "version"} {
		var help, dashH bytes.Buffer
		if err := run(t.Context(), []string{"help", cmd}, nil, nil, &help, io.Discard); err != nil {
			t.Errorf("help %s = %v; want nil (exit 0)", cmd, err)
		}
		if err := run(t.Context(), []string{cmd, "-h"}, nil, nil, io.Discard, &dashH); err != nil {
			t.Errorf("%s -h = %v; want nil (exit 0)", cmd, err)
		}
		if !strings.HasPrefix(help.String(), "usage: plantstore "+cmd) || help.String() != dashH.String() {
			t.Errorf("help %s printed %q; want what %s -h prints, %q", cmd, help.String(), cmd, dashH.String())
		}
	}
	var help bytes.Buffer
	if err := run(t.Context(), []string{"help", "help"}, nil, nil, &help, io.Discard); err != nil || !strings.Contains(help.String(), "commands:") {
		t.Errorf("help help = %q, %v; want the list of commands", help.String(), err)
	}
}

// TestHelpTypes checks that -h of every command gives each flag that takes
// a value the kind of value it takes, never the flag package's "value".
func TestHelpTypes(t *testing.T) {
	kinds := []string{"string", "list", "duration", "int", "number", "size", "host:port", "prefixes", "mode", "origins", "tokens", "json"}
	flagLine := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)(?: (\S+))?$`)
	for _, cmd := range []string{"serve", "token", "proof", "keygen", "migrate", "import", "version"} {
		var help bytes.Buffer
		if err := run(t.Context(), []string{cmd, "-h"}, nil, nil, io.Discard, &help); err != nil {
			t.Fatalf("%s -h: %v", cmd, err)
		}
		for _, m := range flagLine.FindAllStringSubmatch(help.String(), -1) {
			if m[2] != "" && !slices.Contains(kinds, m[2]) {
				t.Errorf("%s -h: -%s takes %q; want one of %q", cmd, m[1], m[2], kinds)
			}
		}
	}
	// Spot checks: these take values of these kinds.
	for cmd, want := range map[string][]string{
		"serve":  {"-rate-limit number", "-jwt-leeway duration", "-jwt-cache-bytes size", "-addr host:port", "-jwt-audience list", "-db-max-conns int", "-jwt-dpop mode", "-cors-origins origins"},
		"token":  {"-ttl duration", "-groups list", "-key string"},
		"import": {"-max-catalog-bytes size", "-database-url string"},
	} {
		var help bytes.Buffer
		if err := run(t.Context(), []string{cmd, "-h"}, nil, nil, io.Discard, &help); err != nil {
			t.Fatalf("%s -h: %v", cmd, err)
		}
		for _, w := range want {
			if !strings.Contains(help.String(), "\n  "+w+"\n") {
				t.Errorf("%s -h lacks the line %q", cmd, w)
			}
		}
	}
}

// TestVersion checks the version command and --version.
func TestVersion(t *testing.T) {
	var help bytes.Buffer
	if err := run(t.Context(), []string{"version", "-h"}, nil, nil, io.Discard, &help); err != nil || help.String() != "usage: plantstore version\n" {
		t.Errorf("version -h = %q, %v; want its usage and nil (exit 0)", help.String(), err)
	}
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, nil, nil, &out, io.Discard); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if !strings.HasPrefix(out.String(), "plantstore ") || !strings.Contains(out.String(), "go1.") {
			t.Errorf("%q printed %q, want \"plantstore <version> (revision <rev>, go...)\"", args, out.String())
		}
	}
}

// TestHelp checks that plantstore -h lists the commands and that -h
// prints each command's flags, with their defaults, the variables serve's
// flags read and the arguments after the flags, and succeeds.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		var stdout bytes.Buffer
		if err := run(context.Background(), args, nil, nil, &stdout, io.Discard); err != nil {
			t.Errorf("%q = %v, want nil (exit 0)", args, err)
		}
		for _, cmd := range []string{"serve", "token", "proof", "keygen", "migrate", "import", "version"} {
			if !strings.Contains(stdout.String(), "\n  "+cmd+" ") {
				t.Errorf("%q does not list %s:\n%s", args, cmd, stdout.String())
			}
		}
	}
	tests := []struct {
		cmd  string
		want []string
		not  []string
	}{
		{"serve", []string{"usage: plantstore serve [flags]", "-jwt-leeway", `default "30s"`, "env PLANTSTORE_JWT_LEEWAY", "env PLANTSTORE_DATABASE_URL", `default "32MiB"`}, []string{"PLANTSTORE_DEV"}},
		{"token", []string{"usage: plantstore token [flags]", "-hmac-secret-file", "-groups-claim", "-nbf"}, []string{"env PLANTSTORE_"}},
		{"keygen", []string{"usage: plantstore keygen [flags]", `default "RS256"`}, nil},
		{"proof", []string{"usage: plantstore proof [flags]", "-url", "-token", "-nonce", `default "GET"`}, []string{"env PLANTSTORE_"}},
		{"migrate", []string{"usage: plantstore migrate [flags]", "-status", "env PLANTSTORE_DATABASE_URL"}, []string{"PLANTSTORE_STATUS"}},
		{"import", []string{"usage: plantstore import [flags] FILE", "-replace", "env PLANTSTORE_DATABASE_URL"}, []string{"PLANTSTORE_REPLACE"}},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		if err := run(context.Background(), []string{tt.cmd, "-h"}, nil, nil, io.Discard, &stderr); err != nil {
			t.Errorf("%s -h = %v, want nil (exit 0)", tt.cmd, err)
		}
		for _, w := range tt.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%s -h lacks %q:\n%s", tt.cmd, w, stderr.String())
			}
		}
		for _, n := range tt.not {
			if strings.Contains(stderr.String(), n) {
				t.Errorf("%s -h mentions %q:\n%s", tt.cmd, n, stderr.String())
			}
		}
	}
}

// migratedDatabase returns the DSN of a fresh schema, migrated with the
// migrate command.
func migratedDatabase(t *testing.T) string {
	t.Helper()
	dsn := pgtest.NewSchema(t)
	if err := run(context.Background(), []string{"migrate", "-database-url", dsn}, nil, nil, io.Discard, io.Discard); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return dsn
}

// TestPostgresCommands runs migrate and import from the command line, then
// serves from the database and checks that each sample user gets what the
// memory store gives.
func TestPostgresCommands(t *testing.T) {
	dsn := pgtest.NewSchema(t)
	ctx := context.Background()
	cmd := func(args []string, env map[string]string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, args, envOf(env), nil, &out, io.Discard)
		return out.String(), err
	}
	if out, err := cmd([]string{"migrate", "-status", "-database-url", dsn}, nil); !errors.Is(err, errPending) || !strings.Contains(out, "schema version 0") || !strings.Contains(out, "pending: versions 1, 2 and 3") {
		t.Errorf("migrate -status before migrating = %q, %v; want version 0, versions 1, 2 and 3 pending, exit 1", out, err)
	}
	if out, err := cmd([]string{"migrate", "-database-url", dsn}, nil); err != nil || out != "applied versions 1, 2 and 3\nschema version 3\n" {
		t.Fatalf("first migrate = %q, %v; want the version it applied", out, err)
	}
	if out, err := cmd([]string{"migrate"}, map[string]string{"PLANTSTORE_DATABASE_URL": dsn}); err != nil || out != "schema version 3 is up to date; nothing applied\n" {
		t.Fatalf("migrate again, DSN from PLANTSTORE_DATABASE_URL = %q, %v; want nothing applied", out, err)
	}
	if out, err := cmd([]string{"migrate", "-status", "-database-url", dsn}, nil); err != nil || !strings.Contains(out, "up to date") {
		t.Errorf("migrate -status after migrating = %q, %v; want up to date, exit 0", out, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`[{"name":"Fern","readers":["*"]},{"name":"Fig","readers":[]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cmd([]string{"import", "-database-url", dsn, bad}, nil); err == nil || !strings.Contains(err.Error(), "bad.json: entry 2:") {
		t.Fatalf("import of a bad file = %v, want an error naming it and entry 2 (counted from 1)", err)
	}
	sample := filepath.Join("plants", "sample_catalog.json")
	n := plants.SampleCatalog().Len()
	if out, err := cmd([]string{"import", "-database-url", dsn, sample, "-replace"}, nil); err != nil || out != fmt.Sprintf("imported %d plants: %d added, 0 updated, 0 unchanged, 0 removed\n", n, n) {
		t.Fatalf("import -replace = %q, %v", out, err)
	}
	for _, args := range [][]string{{"import", sample}, {"import", "-database-url", dsn}, {"import", "-database-url", dsn, sample, sample}, {"import", "-upsert", "-replace", "-database-url", dsn, sample}, {"migrate", "-database-url", dsn, "x"}, {"migrate", "-database-url", "mysql://x/y"}} {
		if _, err := cmd(args, nil); !errors.Is(err, errUsage) {
			t.Errorf("run(%q) = %v, want a usage error", args, err)
		}
	}

	secret := hmacSecretFile(t)
	in := startServe(t, nil, "-jwt-hmac-secret-file", secret, "-database-url", dsn)
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	for _, u := range plants.SampleUsers() {
		out, err := cmd([]string{"token", "-hmac-secret-file", secret, "-sub", u.Subject, "-groups", strings.Join(u.Groups, ",")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		status, body, _ := get(t, in.api+"/plants", strings.TrimSpace(out))
		var got []wirePlant
		if err := json.Unmarshal(body, &got); status != http.StatusOK || err != nil {
			t.Fatalf("%s: GET /plants = %d %s", u.Subject, status, body)
		}
		if want := expectedPlants(plants.SampleCatalog(), u); !slices.Equal(got, want) {
			t.Errorf("%s from PostgreSQL: got %v, want %v", u.Subject, got, want)
		}
	}
}

// TestImportCommand runs import as an operator would, in each mode: what
// it prints, and what it says when it refuses a file.
func TestImportCommand(t *testing.T) {
	dsn := migratedDatabase(t)
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	first := file("first.json", `[{"id": "fern", "name": "Fern", "readers": ["*"]}]`)
	second := file("second.json", `[{"id": "fern", "name": "Fern", "tag": "green", "readers": ["*"]}, {"id": "ivy", "name": "Ivy", "readers": ["*"]}]`)
	noIDs := file("no-ids.json", `[{"name": "Moss", "readers": ["*"]}]`)
	tests := []struct {
		name    string
		args    []string
		want    string // the output, or a part of the error
		wantErr bool
	}{
		{"add", []string{first}, "imported 1 plant\n", false},
		{"add a stored id", []string{second}, `second.json: postgres: plant id "fern" is already in the catalog; -upsert updates the stored plants of the file's ids, -replace swaps the whole catalog`, true},
		{"add without ids", []string{noIDs}, `no-ids.json: postgres: plants without an id: 1 plant of the file has none, and the catalog is not empty (1 plant): ids generated from positions in the file would clash with those stored; give every plant an "id" (then -upsert adds and updates by id), or use -replace`, true},
		{"upsert without ids", []string{"-upsert", noIDs}, `give every plant an "id", or use -replace`, true},
		{"dry run", []string{"-upsert", "-dry-run", second}, "dry run: would add 1 plant, update 1 plant and remove 0 plants; nothing changed\n", false},
		{"upsert", []string{"-upsert", second}, "imported 2 plants: 1 added, 1 updated, 0 unchanged\n", false},
		{"dry run of a replace", []string{"-replace", "-dry-run", noIDs}, "dry run: would add 1 plant, update 0 plants and remove 2 plants; nothing changed\n", false},
		{"upsert again", []string{second, "-upsert"}, "imported 2 plants: 0 added, 0 updated, 2 unchanged\n", false},
		{"replace", []string{"-replace", noIDs}, "imported 1 plant: 1 added, 0 updated, 0 unchanged, 2 removed\n", false},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		err := run(t.Context(), append([]string{"import", "-database-url", dsn}, tt.args...), nil, nil, &out, io.Discard)
		switch {
		case tt.wantErr && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: import %q = %q, %v; want an error holding %q", tt.name, tt.args, out.String(), err, tt.want)
		case !tt.wantErr && (err != nil || out.String() != tt.want):
			t.Errorf("%s: import %q = %q, %v; want %q", tt.name, tt.args, out.String(), err, tt.want)
		}
	}
}

// TestNoCommandIsServe checks that flags alone run serve, as "go run ."
// does (SPEC §6): a serve flag's bad value is serve's usage error.
func TestNoCommandIsServe(t *testing.T) {
	err := run(t.Context(), []string{"-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0", "-dev", "-jwt-leeway", "soon"}, nil, nil, io.Discard, io.Discard)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "serve: invalid value \"soon\" for flag -jwt-leeway") {
		t.Errorf("run(flags only) = %v; want serve's usage error for -jwt-leeway", err)
	}
}

// twoOpaqueIssuers writes an issuers file of two issuers that both take
// opaque tokens.
func twoOpaqueIssuers(t testing.TB) string {
	t.Helper()
	secret := hmacSecretFile(t)
	var b strings.Builder
	b.WriteString("issuers:\n")
	for _, name := range []string{"a", "b"} {
		fmt.Fprintf(&b, "  - name: %s\n    issuer: https://%s.example\n    hmac_secret_file: %s\n    introspection:\n      tokens: opaque\n      endpoint: http://127.0.0.1:1/i\n      client_id: ps\n      client_secret_file: %s\n", name, name, secret, secret)
	}
	return writeTemp(t, b.String())
}
