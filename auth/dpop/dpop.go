// Package dpop checks DPoP proofs (RFC 9449): a proof's form, header,
// public key and claims, cheapest first ([Parse]), then its signature
// ([Proof.Verify]); the server nonces a deployment issues ([Nonces]); and
// the replay cache that remembers the proofs used on a replica
// ([ReplayCache]). What it finds wrong is a [Problem], which the caller
// turns into its own refusal. It knows nothing of tokens or issuers: the
// caller says which key a proof must be signed with (the token's
// cnf.jkt) and what request it must name.
package dpop

import (
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"slices"
	"strings"

	"github.com/plantstore/plantstore/observability/setting"
)

// DefaultAlgorithms returns the algorithms a DPoP proof may be signed
// with when none are configured: every asymmetric algorithm the service
// verifies, never "none" nor an HMAC (a proof key is the client's public
// key, not a secret the two share). Ed25519 is EdDSA under its
// fully-specified name (RFC 9864), which newer clients sign proofs with.
func DefaultAlgorithms() []string {
	return []string{"ES256", "ES384", "ES512", "EdDSA", "Ed25519", "PS256", "PS384", "PS512", "RS256", "RS384", "RS512"}
}

// CheckAlgorithms returns algs in order without repeats, or
// [DefaultAlgorithms] when it is empty, or the *setting.Error of
// dpop_algorithms for an algorithm a proof may not use: "none", an HMAC or
// an unknown one.
func CheckAlgorithms(algs []string) ([]string, error) {
	known := DefaultAlgorithms()
	if len(algs) == 0 {
		return known, nil
	}
	clean := make([]string, 0, len(algs))
	for _, a := range algs {
		switch {
		case strings.EqualFold(a, "none"):
			return nil, setting.Errorf("dpop_algorithms", `algorithm "none" is never allowed`)
		case strings.HasPrefix(a, "HS"):
			return nil, setting.Errorf("dpop_algorithms", "%q is an HMAC: a proof is signed by the client's own key pair, want an asymmetric algorithm (%s)", a, strings.Join(known, ", "))
		case !slices.Contains(known, a):
			return nil, setting.Errorf("dpop_algorithms", "unknown algorithm %q (want some of %s)", a, strings.Join(known, ", "))
		case !slices.Contains(clean, a):
			clean = append(clean, a)
		}
	}
	return clean, nil
}

// AccessTokenHash is a proof's ath for token: the base64url SHA-256 of its
// ASCII (RFC 9449 §4.2).
func AccessTokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// normalizeHTU returns the syntax-normalized form of an htu (RFC 9449
// §4.3, RFC 3986 §6.2.2 and §6.2.3): scheme and host in lower case, the
// default port dropped, an empty path as "/", query and fragment dropped. It reports
// false for anything but an absolute http or https URL.
func normalizeHTU(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || u.User != nil {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" || u.Host == "" {
		return "", false
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if p := u.Port(); p != "" && !(scheme == "http" && p == "80" || scheme == "https" && p == "443") {
		host += ":" + p
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return scheme + "://" + host + path, true
}

// TargetURI returns the htu a proof for a request must carry: origin
// ("scheme://host[:port]") and path (escaped, from "/"), in the
// syntax-normalized form proofs are compared in.
func TargetURI(origin, path string) string {
	if plainOrigin(origin) && strings.HasPrefix(path, "/") {
		// Already in normal form: no parsing.
		return origin + path
	}
	n, _ := normalizeHTU(origin + path)
	return n
}

// plainOrigin reports whether origin, "scheme://host", is already what
// normalizeHTU makes of it: http or https, a host name or IPv4 address in
// lower case, a port only when it is not the scheme's default.
func plainOrigin(origin string) bool {
	var host string
	switch {
	case strings.HasPrefix(origin, "https://"):
		host = origin[len("https://"):]
		if strings.HasSuffix(host, ":443") {
			return false
		}
	case strings.HasPrefix(origin, "http://"):
		host = origin[len("http://"):]
		if strings.HasSuffix(host, ":80") {
			return false
		}
	default:
		return false
	}
	name, port, hasPort := strings.Cut(host, ":")
	if name == "" || hasPort && port == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	for i := 0; i < len(port); i++ {
		if c := port[i]; c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ClientKey returns the hash of a proof key, by its thumbprint (the
// token's cnf.jkt): what a [Use] names the client by.
func ClientKey(jkt string) [16]byte {
	sum := sha256.Sum256([]byte("plantstore client\x00" + jkt))
	return [16]byte(sum[:16])
}

// ProofKey returns the hash of a proof: its key's (client, see
// [ClientKey]) and its jti. The same jti from another key is another
// proof.
func ProofKey(client [16]byte, jti string) [16]byte {
	// jti is at most maxJTI bytes: the input fits the stack.
	var buf [16 + 1 + maxJTI]byte
	b := append(append(append(buf[:0], client[:]...), 0), jti...)
	sum := sha256.Sum256(b)
	return [16]byte(sum[:16])
}
