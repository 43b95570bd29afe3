package check

import "strings"

// servedSettings are the serve flags of the plantstore binary as built
// today, by name without the dash; each is read from PLANTSTORE_<FLAG> too.
// -dev has no variable.
var servedSettings = []string{
	"addr", "admin-addr", "data", "database-url",
	"db-max-conns", "db-connect-timeout", "db-query-timeout",
	"jwt-issuer", "jwt-jwks-url", "jwt-key-file", "jwt-hmac-secret-file",
	"jwt-audience", "jwt-algorithms", "jwt-leeway", "jwt-groups-claim", "jwt-required-scope",
	"jwks-refresh", "jwks-min-refresh", "trusted-proxies",
	"log-level", "log-format", "shutdown-delay", "shutdown-timeout", "pprof",
	"rate-limit", "rate-burst", "write-timeout",
	"jwt-issuers-file", "jwt-max-groups", "jwt-cache-bytes", "jwt-dpop", "dpop-window", "dpop-algorithms", "public-url",
	"database-snapshot", "database-poll", "trace-subject",
	"jwt-token-types", "jwt-clients", "jwt-max-lifetime", "jwks-max-stale", "jwt-claims", "jwt-audit",
	"dpop-nonce-key-file", "dpop-nonce-lifetime",
	"cors-origins",
	"client-cert-header", "jwt-mtls",
	"redis-url", "redis-timeout", "redis-key-file",
	"jwt-introspection", "jwt-introspection-url", "jwt-introspection-client-id",
	"jwt-introspection-secret-file", "jwt-introspection-key-file", "jwt-introspection-cache",
	"jwt-introspection-jwt", "introspection-max-rate", "introspection-max-inflight", "introspection-timeout",
	"revocations-file", "revocation-retention", "ssf-path",
}

// SettingVariable returns the environment variable of a serve flag:
// PLANTSTORE_ and the name in upper case with "-" as "_".
func SettingVariable(flag string) string {
	return "PLANTSTORE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// ServedSettings returns the serve flags the binary has today.
func ServedSettings() []string {
	return append([]string(nil), servedSettings...)
}

// knownVariable reports whether name is the variable of a serve flag.
func knownVariable(name string) bool {
	for _, f := range servedSettings {
		if SettingVariable(f) == name {
			return true
		}
	}
	return false
}
