package auth

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
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

// maxProof bounds a DPoP header: a proof is a few hundred bytes, its jwk
// included; an RSA key of 4096 bits makes it about 1.5 KiB.
const maxProof = 4 << 10

// maxJTI bounds the jti of a proof; RFC 9449 §4.2 asks for 96 bits of
// randomness, which any client fits in far less.
const maxJTI = 256

// proofParser parses DPoP proofs: only the allowed algorithms, canonical
// base64, and no claims validation (checkProof makes its own). It knows
// Ed25519 once a Verifier exists (see registerEd25519).
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
// window, so that none is accepted twice on this replica. It never forgets
// a proof before its window ends: its memory is bounded by refusing new
// proofs instead. A proof key (jkt) holding keyQuota entries or more may
// add more only while the cache is less than half full, so that one
// client, flooding with its own bound token, cannot fill the cache for the
// others: the second half fills only with keys under their quota, and it
// takes maxSize/2/keyQuota of them at their quota, each with a token of
// its own, to fill it.
//
// The entries sit in a ring in the order they were added, which grows up
// to maxSize; an entry leaves from the front once it has expired. A proof
// added again after its window leaves its old entry behind, dead, to be
// dropped when it reaches the front. It is safe for concurrent use.
type replayCache struct {
	mu     sync.Mutex
	index  map[[16]byte]int // proof → its live entry's position in ring
	perKey map[uint64]int   // live entries by proof key
	ring   []replayEntry
	head   int // the position of the oldest entry
	n      int // entries in the ring, dead ones included
	seed   maphash.Seed
	// maxSize is the most entries; keyQuota the most of one proof key.
	maxSize, keyQuota int
}

type replayEntry struct {
	key     [16]byte
	jkt     uint64
	expires int64 // Unix nanoseconds
	dead    bool
}

// replayCacheEntries is the most jti values remembered: at most about
// 32 MiB (BenchmarkReplayCacheMemory), or about 2,000 DPoP requests a
// second per replica over the default window and twice the leeway (2 min).
// replayKeyQuota is what one proof key holds once the cache is half full:
// about 130 requests a second from one key over the same time.
const (
	replayCacheEntries = 1 << 18
	replayKeyQuota     = replayCacheEntries / 16
)

func newReplayCache(maxSize, keyQuota int) *replayCache {
	return &replayCache{
		index: make(map[[16]byte]int), perKey: make(map[uint64]int),
		seed: maphash.MakeSeed(), maxSize: maxSize, keyQuota: keyQuota,
	}
}

// What replayCache.add found.
type replayVerdict int

const (
	replayFresh replayVerdict = iota // not seen: recorded
	replaySeen                       // seen within its window: a replay
	replayFull                       // not seen, but the key or the cache has no room left
)

// add records the proof (jkt, jti) as used until expires, unless it was
// seen before and has not expired, or there is no room for it; then wait
// is how long until the oldest proof it remembers expires.
func (c *replayCache) add(jkt, jti string, expires, now time.Time) (v replayVerdict, wait time.Duration) {
	h := sha256.Sum256([]byte(jkt + "\x00" + jti))
	var key [16]byte
	copy(key[:], h[:16])
	k := maphash.String(c.seed, jkt)
	t := now.UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(t)
	if i, ok := c.index[key]; ok {
		if c.ring[i].expires > t {
			return replaySeen, 0
		}
		// Expired but not yet at the front: its entry stays, dead, so
		// that dropping it later cannot forget the proof recorded now.
		c.forget(i)
	}
	if c.n >= c.maxSize || c.perKey[k] >= c.keyQuota && c.n >= c.maxSize/2 {
		return replayFull, time.Duration(c.ring[c.head].expires - t)
	}
	if c.n == len(c.ring) {
		c.grow()
	}
	i := (c.head + c.n) % len(c.ring)
	c.ring[i] = replayEntry{key: key, jkt: k, expires: expires.UnixNano()}
	c.n++
	c.index[key] = i
	c.perKey[k]++
	return replayFresh, 0
}

// expire drops the entries at the front that are dead or expired at t
// (Unix nanoseconds). c.mu is held.
func (c *replayCache) expire(t int64) {
	for c.n > 0 && (c.ring[c.head].dead || c.ring[c.head].expires <= t) {
		c.forget(c.head)
		c.head = (c.head + 1) % len(c.ring)
		c.n--
	}
}

// fill returns the entries the cache holds, less those at its front that
// the next add drops (dead, or expired now), and the most it may hold, at
// which add refuses every new proof: plantstore_dpop_replay_entries and
// ..._limit. It changes nothing.
func (c *replayCache) fill() (entries, limit int) {
	t := time.Now().UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	for i := c.head; n > 0 && (c.ring[i].dead || c.ring[i].expires <= t); i = (i + 1) % len(c.ring) {
		n--
	}
	return n, c.maxSize
}

// forget marks the entry at i dead and drops it from the index and its
// key's count, if it was live. c.mu is held.
func (c *replayCache) forget(i int) {
	e := &c.ring[i]
	if e.dead {
		return
	}
	e.dead = true
	delete(c.index, e.key)
	if n := c.perKey[e.jkt] - 1; n > 0 {
		c.perKey[e.jkt] = n
	} else {
		delete(c.perKey, e.jkt)
	}
}

// grow doubles the ring, up to maxSize, keeping the entries in order from
// position 0. c.mu is held and the ring is full.
func (c *replayCache) grow() {
	ring := make([]replayEntry, min(max(2*len(c.ring), 64), c.maxSize))
	for j := range c.n {
		e := c.ring[(c.head+j)%len(c.ring)]
		ring[j] = e
		if !e.dead {
			c.index[e.key] = j
		}
	}
	c.ring, c.head = ring, 0
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
	switch verdict, wait := v.replays.add(e.jkt, jti, iat.Add(v.opts.DPoPWindow+2*v.opts.Leeway), now); verdict {
	case replaySeen:
		return dpopError(ReasonDPoPReplay)
	case replayFull:
		// A proof this replica could not remember could be replayed:
		// refused, as a rate (429) the client can wait out.
		return &Error{Status: http.StatusTooManyRequests, Reason: ReasonDPoPQuota, DPoP: true, RetryAfter: wait}
	}
	return nil
}

// resourceURI returns the htu a proof for r must carry: the resource's
// origin and path prefix ([Verifier.origin]) with r's path, normalized.
func (v *Verifier) resourceURI(r *http.Request) string {
	origin, prefix := v.origin(r)
	n, _ := normalizeHTU(origin + prefix + r.URL.EscapedPath())
	return n
}
