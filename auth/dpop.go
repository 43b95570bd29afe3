package auth

import (
	"crypto/sha256"
	"encoding/base64"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/plantstore/plantstore/observability/setting"
)

// DPoPMode is how an issuer's tokens are sender-constrained (RFC 9449).
// The zero value is DPoPOptional.
type DPoPMode = BindingMode

// The DPoP modes.
const (
	// DPoPOptional accepts bearer tokens, and DPoP-bound tokens (cnf.jkt)
	// with a valid proof.
	DPoPOptional = BindingOptional
	// DPoPOff accepts bearer tokens only; a bound token is refused.
	DPoPOff = BindingOff
	// DPoPRequired accepts DPoP-bound tokens with a valid proof only.
	DPoPRequired = BindingRequired
)

// DefaultDPoPWindow is how old a DPoP proof may be, by its iat.
const DefaultDPoPWindow = 60 * time.Second

// DefaultDPoPAlgorithms returns the algorithms a DPoP proof may be signed
// with when [Options] name none: every asymmetric algorithm the service
// verifies, never "none" nor an HMAC (a proof key is the client's public
// key, not a secret the two share). Ed25519 is EdDSA under its
// fully-specified name (RFC 9864), which newer clients sign proofs with.
func DefaultDPoPAlgorithms() []string {
	return []string{"ES256", "ES384", "ES512", "EdDSA", "Ed25519", "PS256", "PS384", "PS512", "RS256", "RS384", "RS512"}
}

// checkDPoPAlgorithms returns algs in order without repeats, or
// [DefaultDPoPAlgorithms] when it is empty, or the *ConfigError of an
// algorithm a proof may not use: "none", an HMAC or an unknown one.
func checkDPoPAlgorithms(algs []string) ([]string, error) {
	known := DefaultDPoPAlgorithms()
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

// accessTokenHash is a proof's ath for token: the base64url SHA-256 of its
// ASCII (RFC 9449 §4.2).
func accessTokenHash(token string) string {
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

// dpopError returns the 401 invalid_dpop_proof refusal for r.
func dpopError(r Reason) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: "invalid_dpop_proof", Reason: r, DPoP: true}
}

// dpopTokenError returns the 401 invalid_token refusal for r, under the
// DPoP scheme.
func dpopTokenError(r Reason) *Error {
	e := invalidToken(r)
	e.DPoP = true
	return e
}

// bind applies the binding of the token e to a request r that presented
// it under the scheme of c (RFC 8705 §3, RFC 9449 §7), then admits the
// request ([Admitter]). It is where the rule of [bindingOf] is enforced,
// every time, cached token or not: a token bound to a certificate needs
// that certificate ([Verifier.bindCert]), a token bound to a key the DPoP
// scheme and a valid proof ([Verifier.bindProof]), a token bound both
// ways both, the certificate first since it costs no signature; an
// unbound token the Bearer scheme, where the issuer's modes allow it. A
// bearer request is admitted only when the rate is limited, so that it
// costs nothing otherwise.
func (v *Verifier) bind(r *http.Request, c credential, e *cacheEntry) error {
	if e.bound.cert() || e.iss.cfg.MTLS == MTLSRequired {
		if err := v.bindCert(r, c, e); err != nil {
			return err
		}
	}
	mode := e.iss.cfg.DPoP
	bound := e.bound.dpop()
	switch {
	case bound && mode == DPoPOff:
		return invalidToken(ReasonDPoPBound)
	case bound && !c.dpop:
		// RFC 9449 §7.2: a bound token presented as a bearer token.
		return invalidToken(ReasonDPoPBound)
	case !bound && c.dpop:
		return dpopTokenError(ReasonDPoPUnbound)
	case !bound && mode == DPoPRequired:
		return dpopTokenError(ReasonDPoPRequired)
	case !bound && v.opts.RateLimit == nil:
		return nil
	case !bound:
		return v.admitter.Admit(r.Context(), Admission{Caller: e.caller, Now: v.now()})
	}
	return v.bindProof(r, c, e)
}

// bindProof checks the one DPoP proof of r for the bound token e, in the
// order that makes a caller pay for what it asks of the service: the
// checks that cost no signature ([parseProof]), then admission, which
// takes one request from the caller's rate and refuses a proof already
// used, then the signature, and only when it verified is the proof's jti
// recorded. A caller over its rate so never gets a signature verified, and
// a proof that does not verify never spends the jti of the one that will.
func (v *Verifier) bindProof(r *http.Request, c credential, e *cacheEntry) error {
	proofs := r.Header.Values("DPoP")
	if len(proofs) != 1 {
		return dpopError(ReasonDPoPMissing)
	}
	now := v.now()
	p, err := parseProof(proofs[0], &dpopRequest{
		method: r.Method, uri: v.resourceURI(r), ath: e.ath, jkt: e.bound.jkt,
		algs: v.opts.DPoPAlgorithms, now: now, window: v.opts.DPoPWindow, leeway: v.opts.Leeway,
		nonces: v.opts.Nonces,
	})
	if err != nil {
		return err
	}
	a := Admission{
		Caller: e.caller, DPoP: true, Client: e.client, Proof: proofKey(e.client, p.jti),
		Expires: p.iat.Add(v.opts.DPoPWindow + 2*v.opts.Leeway), Now: now, ID: rand.Uint64(),
	}
	ctx := r.Context()
	if err := v.admitter.Admit(ctx, a); err != nil {
		return err
	}
	verified := p.verify()
	settled := v.admitter.Settle(ctx, a, verified)
	if !verified {
		return dpopError(ReasonDPoPInvalid)
	}
	return settled
}

// resourceURI returns the htu a proof for r must carry: the resource's
// origin and path prefix ([Verifier.origin]) with r's path, normalized.
func (v *Verifier) resourceURI(r *http.Request) string {
	origin, prefix := v.origin(r)
	path := r.URL.EscapedPath()
	if plainOrigin(origin) && strings.HasPrefix(path, "/") {
		// Already in normal form: no parsing.
		return origin + prefix + path
	}
	n, _ := normalizeHTU(origin + prefix + path)
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
