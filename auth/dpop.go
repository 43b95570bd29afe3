package auth

import (
	"container/list"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/plantstore/plantstore/observability"
)

// DPoPMode is how an issuer's tokens are sender-constrained (RFC 9449,
// SPEC §11). The zero value is DPoPOptional.
type DPoPMode int

// The DPoP modes.
const (
	// DPoPOptional accepts bearer tokens, and DPoP-bound tokens (cnf.jkt)
	// with a valid proof.
	DPoPOptional DPoPMode = iota
	// DPoPOff accepts bearer tokens only; a bound token is refused.
	DPoPOff
	// DPoPRequired accepts DPoP-bound tokens with a valid proof only.
	DPoPRequired
)

// ParseDPoPMode returns the mode named s: off, optional or required; ""
// is optional.
func ParseDPoPMode(s string) (DPoPMode, error) {
	switch s {
	case "", "optional":
		return DPoPOptional, nil
	case "off":
		return DPoPOff, nil
	case "required":
		return DPoPRequired, nil
	}
	return 0, fmt.Errorf("%q: want off, optional or required", s)
}

// String returns the mode's name.
func (m DPoPMode) String() string {
	switch m {
	case DPoPOff:
		return "off"
	case DPoPRequired:
		return "required"
	}
	return "optional"
}

// DefaultDPoPWindow is how old a DPoP proof may be, by its iat.
const DefaultDPoPWindow = 60 * time.Second

// DPoPAlgorithms returns the algorithms a DPoP proof may be signed with:
// the asymmetric ones, never "none" nor an HMAC. Ed25519 is EdDSA under
// its fully-specified name (RFC 9864), which newer clients sign proofs
// with.
func DPoPAlgorithms() []string {
	return []string{"ES256", "ES384", "ES512", "EdDSA", "Ed25519", "PS256", "PS384", "PS512", "RS256", "RS384", "RS512"}
}

// ed25519Method is golang-jwt's EdDSA under the name Ed25519 (RFC 9864).
type ed25519Method struct{ *jwt.SigningMethodEd25519 }

func (ed25519Method) Alg() string { return "Ed25519" }

func init() {
	jwt.RegisterSigningMethod("Ed25519", func() jwt.SigningMethod { return ed25519Method{jwt.SigningMethodEdDSA} })
}

// maxProof bounds a DPoP header: a proof is a few hundred bytes, its jwk
// included; an RSA key of 4096 bits makes it about 1.5 KiB.
const maxProof = 4 << 10

// maxJTI bounds the jti of a proof; RFC 9449 §4.2 asks for 96 bits of
// randomness, which any client fits in far less.
const maxJTI = 256

// proofParser parses DPoP proofs: only the allowed algorithms, canonical
// base64, and no claims validation (checkProof makes its own).
var proofParser = jwt.NewParser(jwt.WithValidMethods(DPoPAlgorithms()), jwt.WithStrictDecoding(), jwt.WithoutClaimsValidation())

// dpopRequest is what a proof is checked against.
type dpopRequest struct {
	method, uri string // htm and htu as the request sets them
	token       string // the access token, for ath
	jkt         string // the token's cnf.jkt
	now         time.Time
	window      time.Duration
	leeway      time.Duration
}

// checkProof verifies a DPoP proof for req (RFC 9449 §4.3) and returns its
// jti and iat, or the refusal. It does not look at replays.
func checkProof(proof string, req dpopRequest) (jti string, iat time.Time, err *Error) {
	if len(proof) > maxProof {
		return "", time.Time{}, dpopError(ReasonDPoPInvalid)
	}
	var claims jwt.MapClaims
	var thumbprint string
	tok, perr := proofParser.ParseWithClaims(proof, &claims, func(t *jwt.Token) (any, error) {
		typ, _ := t.Header["typ"].(string)
		if !strings.EqualFold(typ, "dpop+jwt") {
			return nil, dpopError(ReasonDPoPInvalid)
		}
		raw, err := json.Marshal(t.Header["jwk"])
		if err != nil || t.Header["jwk"] == nil {
			return nil, dpopError(ReasonDPoPInvalid)
		}
		k, skip := decodeJWK(raw)
		if skip != nil || !k.Fits(t.Method.Alg()) {
			// Private key material, a symmetric key, a weak or unknown key.
			return nil, dpopError(ReasonDPoPInvalid)
		}
		if thumbprint, err = Thumbprint(k.Public); err != nil {
			return nil, dpopError(ReasonDPoPInvalid)
		}
		return k.Public, nil
	})
	if perr != nil || tok == nil || !tok.Valid {
		var ae *Error
		if errors.As(perr, &ae) {
			return "", time.Time{}, ae
		}
		return "", time.Time{}, dpopError(ReasonDPoPInvalid)
	}
	if thumbprint != req.jkt {
		return "", time.Time{}, dpopError(ReasonDPoPKey)
	}
	jti, _ = claims["jti"].(string)
	htm, _ := claims["htm"].(string)
	htu, _ := claims["htu"].(string)
	ath, _ := claims["ath"].(string)
	if jti == "" || len(jti) > maxJTI {
		return "", time.Time{}, dpopError(ReasonDPoPInvalid)
	}
	if htm != req.method {
		return "", time.Time{}, dpopError(ReasonDPoPTarget)
	}
	if u, ok := normalizeHTU(htu); !ok || u != req.uri {
		return "", time.Time{}, dpopError(ReasonDPoPTarget)
	}
	if ath != accessTokenHash(req.token) {
		return "", time.Time{}, dpopError(ReasonDPoPAth)
	}
	// The NumericDate rule of the token's claims (SPEC §2), iat required.
	d, derr := claimSet(claims).date("iat")
	if derr != nil || d == nil {
		return "", time.Time{}, dpopError(ReasonDPoPInvalid)
	}
	iat = d.Time
	if iat.Before(req.now.Add(-req.window-req.leeway)) || iat.After(req.now.Add(req.leeway)) {
		return "", time.Time{}, dpopError(ReasonDPoPIat)
	}
	return jti, iat, nil
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

// replayCache remembers the jti of the DPoP proofs accepted within their
// window, so that none is accepted twice on this replica. Its memory is
// bounded: past replayCacheEntries, the proofs nearest to expiry are
// forgotten first. It is safe for concurrent use.
type replayCache struct {
	mu      sync.Mutex
	seen    map[[16]byte]*list.Element
	byAge   list.List // of replayEntry, oldest first
	maxSize int
}

type replayEntry struct {
	key     [16]byte
	expires time.Time
}

// replayCacheEntries is the most jti values remembered: about 16 MiB, for
// about 4,000 DPoP requests a second per replica over the default window.
const replayCacheEntries = 1 << 18

func newReplayCache(maxSize int) *replayCache {
	return &replayCache{seen: make(map[[16]byte]*list.Element), maxSize: maxSize}
}

// add records the proof (jkt, jti) as used until expires, and reports
// false when it was seen before and has not expired.
func (c *replayCache) add(jkt, jti string, expires, now time.Time) bool {
	h := sha256.Sum256([]byte(jkt + "\x00" + jti))
	var key [16]byte
	copy(key[:], h[:16])
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.byAge.Front(); e != nil; e = c.byAge.Front() {
		old := e.Value.(replayEntry)
		if old.expires.After(now) && c.byAge.Len() < c.maxSize {
			break
		}
		c.byAge.Remove(e)
		delete(c.seen, old.key)
	}
	if e, ok := c.seen[key]; ok {
		if e.Value.(replayEntry).expires.After(now) {
			return false
		}
		// Expired but not yet at the front: its element must go with its
		// key, or evicting it later would forget the proof recorded now.
		c.byAge.Remove(e)
	}
	c.seen[key] = c.byAge.PushBack(replayEntry{key: key, expires: expires})
	return true
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

// bind applies the DPoP rules of the token's issuer to a request that
// presented the token e under the given scheme (RFC 9449 §7).
func (v *Verifier) bind(r *http.Request, c credential, e *cacheEntry) *Error {
	mode := e.iss.cfg.DPoP
	switch {
	case e.jkt != "" && mode == DPoPOff:
		return invalidToken(ReasonDPoPBound)
	case e.jkt != "" && !c.dpop:
		// RFC 9449 §7.2: a bound token presented as a bearer token.
		return invalidToken(ReasonDPoPBound)
	case e.jkt == "" && c.dpop:
		return dpopTokenError(ReasonDPoPUnbound)
	case e.jkt == "" && mode == DPoPRequired:
		return dpopTokenError(ReasonDPoPRequired)
	case e.jkt == "":
		return nil
	}
	proofs := r.Header.Values("DPoP")
	if len(proofs) != 1 {
		return dpopError(ReasonDPoPMissing)
	}
	now := v.now()
	jti, iat, err := checkProof(proofs[0], dpopRequest{
		method: r.Method, uri: v.resourceURI(r), token: c.token, jkt: e.jkt,
		now: now, window: v.opts.DPoPWindow, leeway: v.opts.Leeway,
	})
	if err != nil {
		return err
	}
	if !v.replays.add(e.jkt, jti, iat.Add(v.opts.DPoPWindow+2*v.opts.Leeway), now) {
		return dpopError(ReasonDPoPReplay)
	}
	return nil
}

// resourceURI returns the htu a proof for r must carry: -public-url's
// scheme, host and path prefix with r's path, or, without it, the scheme
// and host r came with (through trusted proxies only), normalized.
func (v *Verifier) resourceURI(r *http.Request) string {
	var s string
	if u := v.opts.PublicURL; u != nil {
		s = u.Scheme + "://" + u.Host + strings.TrimSuffix(u.EscapedPath(), "/") + r.URL.EscapedPath()
	} else {
		scheme, host := observability.Origin(r, v.opts.TrustedProxies)
		s = scheme + "://" + host + r.URL.EscapedPath()
	}
	n, _ := normalizeHTU(s)
	return n
}
