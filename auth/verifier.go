package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// This file answers "how is a token verified": [Verifier.Authenticate] is
// the one entry point; everything it does, in order, is below it.

// maxCredential is the largest Authorization header, and so the largest
// token, that is looked at; anything longer is refused unparsed.
const maxCredential = 8 << 10

// Defaults of [Options].
const (
	DefaultMaxGroups  = 256
	DefaultCacheBytes = 32 << 20
)

// maxNumericDate is 9999-12-31T23:59:59Z, the latest NumericDate accepted.
const maxNumericDate = 253402300799

// Config is the verification policy of one issuer. Its zero value accepts
// any iss and aud with the default algorithms, groups at "groups" and no
// required scope.
type Config struct {
	// Issuer, when set, is the value the iss claim must equal.
	Issuer string
	// Audiences, when set, are the values of which the aud claim (a string
	// or an array) must contain at least one. A blank entry is an error.
	Audiences []string
	// Algorithms is the allow-list of JWS alg values; nil or empty means
	// [DefaultAlgorithms].
	Algorithms []string
	// GroupsClaim is the claim holding the caller's groups: a top-level
	// name, or a dotted path into nested objects ("realm_access.roles").
	// A top-level claim whose name contains dots is found by its full name
	// first. Empty means "groups".
	GroupsClaim string
	// RequiredScope, when set, is a scope the token must carry in its
	// scope or scp claim; without it the request is refused with 403.
	RequiredScope string
	// DPoP is whether the issuer's tokens may or must be bound to a key
	// the client proves it holds (RFC 9449).
	DPoP DPoPMode
}

// An Issuer is a trusted issuer: the policy its tokens must meet and the
// keys that verify them. Keys of one issuer never verify a token routed to
// another.
type Issuer struct {
	// Name qualifies the issuer's callers ([Identity.Issuer]): "" for the
	// one unnamed issuer, else 1 to 32 of [a-z0-9-].
	Name string
	// Config is the policy.
	Config Config
	// Keys finds the verification keys.
	Keys Keys
}

// Options are the settings a [Verifier] applies to every issuer.
type Options struct {
	// Leeway is the clock skew allowed on exp, nbf and iat.
	Leeway time.Duration
	// MaxGroups is the most groups a token may carry; more is refused with
	// [ReasonTooManyGroups]. 0 means [DefaultMaxGroups].
	MaxGroups int
	// CacheBytes bounds the memory of the verified-token cache, everything
	// it holds counted. 0 means [DefaultCacheBytes]; a negative value turns
	// the cache off.
	CacheBytes int64
	// DPoPWindow is how old a DPoP proof may be, by its iat; 0 means
	// [DefaultDPoPWindow].
	DPoPWindow time.Duration
	// PublicURL is the URL callers reach the service at (the gateway's),
	// which DPoP proofs name and the resource metadata describes. Nil means
	// the scheme and host of each request, as TrustedProxies report them.
	PublicURL *url.URL
	// TrustedProxies are the peers whose X-Forwarded-Proto and
	// X-Forwarded-Host are believed when PublicURL is nil.
	TrustedProxies []netip.Prefix
}

// DefaultAlgorithms returns the algorithms a [Verifier] allows when a
// Config names none: every JWS signature algorithm golang-jwt implements
// except "none". A key is still only used with its own family.
func DefaultAlgorithms() []string {
	return []string{
		"RS256", "RS384", "RS512",
		"PS256", "PS384", "PS512",
		"ES256", "ES384", "ES512",
		"EdDSA",
		"HS256", "HS384", "HS512",
	}
}

// Verifier checks credentials against its issuers. It is safe for
// concurrent use.
type Verifier struct {
	opts    Options
	issuers atomic.Pointer[issuerTable]
	cache   *tokenCache
	replays *replayCache
	// now is the clock of every time check; tests replace it.
	now func() time.Time
}

// issuerTable is the set of issuers a Verifier routes to. It is replaced
// whole by [Verifier.SetIssuers].
type issuerTable struct {
	// unnamed takes every token when it is set: the -jwt-* flags' issuer.
	unnamed *issuer
	// byIss routes a token by its exact iss when there is no unnamed one.
	byIss map[string]*issuer
	all   []*issuer
}

// issuer is an [Issuer] ready to verify.
type issuer struct {
	name       string
	cfg        Config
	keys       Keys
	parser     *jwt.Parser
	groupsPath []string
	// gen is the generation of keys, or nil when keys does not count its
	// changes (then its tokens are never cached).
	gen func() uint64
	// retired is set when SetIssuers dropped or replaced the issuer: its
	// cached tokens stop counting.
	retired atomic.Bool
}

// NewVerifier returns a Verifier for the given issuers, which must be
// either exactly one unnamed issuer or one or more named ones with
// distinct names and distinct iss values. It returns an error for a
// negative leeway or MaxGroups, and for an issuer whose Config does not
// hold (see [Verifier.SetIssuers]).
func NewVerifier(o Options, issuers ...Issuer) (*Verifier, error) {
	if o.Leeway < 0 {
		return nil, configErr("", "leeway", "negative duration %s", o.Leeway)
	}
	if o.MaxGroups < 0 {
		return nil, configErr("", "max_groups", "negative number %d", o.MaxGroups)
	}
	if o.MaxGroups == 0 {
		o.MaxGroups = DefaultMaxGroups
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.DPoPWindow < 0 {
		return nil, configErr("", "dpop_window", "negative duration %s", o.DPoPWindow)
	}
	if o.DPoPWindow == 0 {
		o.DPoPWindow = DefaultDPoPWindow
	}
	if u := o.PublicURL; u != nil && (u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "") {
		return nil, configErr("", "public_url", "want an http or https URL without user, query or fragment")
	}
	v := &Verifier{opts: o, now: time.Now, cache: newTokenCache(o.CacheBytes), replays: newReplayCache(replayCacheEntries, replayKeyQuota)}
	if err := v.SetIssuers(issuers...); err != nil {
		return nil, err
	}
	return v, nil
}

// SetIssuers makes v verify against issuers from now on; on an error v
// keeps the issuers it had. An issuer whose name, Config and Keys are those
// of a current one keeps its cached tokens; the tokens of the others stop
// counting at once. It returns an error when there is no issuer, when an
// unnamed issuer comes with others, for a repeated or invalid name, a
// repeated iss, a named issuer without iss, a nil Keys, a blank audience,
// the algorithm "none" or an unknown one, a groups claim with an empty path
// element, or a required scope that is not one RFC 6749 scope token.
func (v *Verifier) SetIssuers(issuers ...Issuer) error {
	if len(issuers) == 0 {
		return configErr("", "issuers", "no issuer")
	}
	old := v.issuers.Load()
	t := &issuerTable{byIss: make(map[string]*issuer, len(issuers))}
	names := make(map[string]bool, len(issuers))
	for _, is := range issuers {
		if is.Name == "" && len(issuers) > 1 {
			return configErr("", "name", "the unnamed issuer cannot be combined with others")
		}
		if is.Name != "" && !validIssuerName(is.Name) {
			return configErr("", "name", "issuer name %q: want 1 to 32 of a-z, 0-9 and -", is.Name)
		}
		if names[is.Name] {
			return configErr("", "name", "issuer name %q appears twice", is.Name)
		}
		names[is.Name] = true
		if is.Name != "" {
			if is.Config.Issuer == "" {
				return configErr(is.Name, "issuer", "no iss value")
			}
			if _, dup := t.byIss[is.Config.Issuer]; dup {
				return configErr(is.Name, "issuer", "issuer %q has the same iss %q", t.byIss[is.Config.Issuer].name, is.Config.Issuer)
			}
		}
		n, err := v.newIssuer(is, old)
		if err != nil {
			return err
		}
		if is.Name == "" {
			t.unnamed = n
		} else {
			t.byIss[is.Config.Issuer] = n
		}
		t.all = append(t.all, n)
	}
	v.issuers.Store(t)
	if old != nil {
		for _, o := range old.all {
			if !slices.Contains(t.all, o) {
				o.retired.Store(true)
			}
		}
	}
	return nil
}

// validIssuerName reports whether name is 1 to 32 of [a-z0-9-].
func validIssuerName(name string) bool {
	return len(name) >= 1 && len(name) <= 32 && strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

// newIssuer checks is and returns it ready to verify, or the equal issuer
// of old.
func (v *Verifier) newIssuer(is Issuer, old *issuerTable) (*issuer, error) {
	if is.Keys == nil {
		return nil, configErr(is.Name, "keys", "no key source")
	}
	cfg, err := cleanConfig(is.Name, is.Config)
	if err != nil {
		return nil, err
	}
	if err := checkStatic(is.Keys, cfg.Algorithms); err != nil {
		return nil, &ConfigError{Issuer: is.Name, Field: "keys", Err: err}
	}
	if old != nil {
		for _, o := range old.all {
			if o.name == is.Name && o.keys == is.Keys && sameConfig(o.cfg, cfg) {
				return o, nil
			}
		}
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(cfg.Algorithms),
		jwt.WithLeeway(v.opts.Leeway),
		jwt.WithExpirationRequired(),
		// golang-jwt checks iat only on request; with it, an iat later than
		// now plus leeway fails with ErrTokenUsedBeforeIssued.
		jwt.WithIssuedAt(),
		// Canonical base64 only, so one token has one encoding.
		jwt.WithStrictDecoding(),
		jwt.WithTimeFunc(func() time.Time { return v.now() }),
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if len(cfg.Audiences) > 0 {
		// WithAudience passes when aud contains any one of them.
		opts = append(opts, jwt.WithAudience(cfg.Audiences...))
	}
	n := &issuer{
		name:       is.Name,
		cfg:        cfg,
		keys:       is.Keys,
		parser:     jwt.NewParser(opts...),
		groupsPath: strings.Split(cfg.GroupsClaim, "."),
	}
	if gen, ok := generationOf(is.Keys); ok {
		n.gen = gen
	}
	return n, nil
}

// cleanConfig checks c, the Config of the issuer named name, and fills in
// its defaults. Errors are *ConfigError.
func cleanConfig(name string, c Config) (Config, error) {
	known := DefaultAlgorithms()
	algs := c.Algorithms
	if len(algs) == 0 {
		algs = known
	}
	clean := make([]string, 0, len(algs))
	for _, a := range algs {
		if strings.EqualFold(a, "none") {
			return c, configErr(name, "algorithms", `algorithm "none" is never allowed`)
		}
		if !slices.Contains(known, a) {
			return c, configErr(name, "algorithms", "unknown algorithm %q (want some of %s)", a, strings.Join(known, ", "))
		}
		if !slices.Contains(clean, a) {
			clean = append(clean, a)
		}
	}
	c.Algorithms = clean
	for _, a := range c.Audiences {
		if strings.TrimSpace(a) == "" {
			return c, configErr(name, "audiences", "blank audience: a list of blanks would check nothing")
		}
	}
	c.Audiences = slices.Clone(c.Audiences)
	if c.GroupsClaim == "" {
		c.GroupsClaim = "groups"
	}
	if slices.Contains(strings.Split(c.GroupsClaim, "."), "") {
		return c, configErr(name, "groups_claim", "%q has an empty path element", c.GroupsClaim)
	}
	if c.RequiredScope != "" && !isScopeToken(c.RequiredScope) {
		return c, configErr(name, "required_scope", "%q is not a single scope token", c.RequiredScope)
	}
	return c, nil
}

func sameConfig(a, b Config) bool {
	return a.Issuer == b.Issuer && slices.Equal(a.Audiences, b.Audiences) &&
		slices.Equal(a.Algorithms, b.Algorithms) && a.GroupsClaim == b.GroupsClaim &&
		a.RequiredScope == b.RequiredScope && a.DPoP == b.DPoP
}

// Ready returns nil when every issuer has usable keys, and otherwise an
// error naming each issuer that has none, with the cause. It is the keys'
// part of readiness: a source that fetches its keys (a JWKS) is not ready
// until a first fetch yielded a usable set, and stays ready on the last
// good set when later fetches fail.
func (v *Verifier) Ready() error {
	var errs []error
	for _, is := range v.issuers.Load().all {
		if err := keysReady(is.keys); err != nil {
			if is.name != "" {
				err = fmt.Errorf("issuer %s: %w", is.name, err)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// keysReady returns the first error of the parts of k that say whether
// they are ready.
func keysReady(k Keys) error {
	if m, ok := k.(multiKeys); ok {
		for _, part := range m {
			if err := keysReady(part); err != nil {
				return err
			}
		}
		return nil
	}
	if r, ok := k.(interface{ Ready() error }); ok {
		return r.Ready()
	}
	return nil
}

// Authenticate checks the credential of r and returns the caller it
// names. It is what [Middleware] calls, and it does, in order:
//
//  1. read the one Authorization header: "Bearer <token>" (RFC 6750 §2.1)
//     or "DPoP <token>" (RFC 9449 §7.1), the scheme in any case, one or
//     more spaces, at most 8 KiB;
//  2. [Verifier.Verify] the token;
//  3. apply the DPoP mode of the token's issuer: a token bound to a key
//     (cnf.jkt) needs the DPoP scheme and one valid DPoP proof header,
//     checked as RFC 9449 §4.3 says (typ, an asymmetric alg, a public jwk
//     whose thumbprint is cnf.jkt, the signature, htm, htu, iat within the
//     window, ath, a jti not seen before on this replica); an unbound token
//     needs the Bearer scheme, and is refused where DPoP is required.
//
// Every error is an *[Error]: 401 with [ReasonMissing] when there is no
// credential, 401 invalid_token for a credential that fails a check, 401
// invalid_dpop_proof for a bad proof, and 403 insufficient_scope for a
// valid token without the required scope. The returned Identity is shared
// with other requests that present the same token and must not be
// modified.
func (v *Verifier) Authenticate(r *http.Request) (*Identity, error) {
	c, err := credentialOf(r.Header)
	if err != nil {
		return nil, err
	}
	e, err := v.verify(r.Context(), c.token)
	if err != nil {
		err.DPoP = c.dpop
		return nil, err
	}
	// A token verified before still needs a proof of its own, every time.
	if err := v.bind(r, c, e); err != nil {
		err.Issuer, err.routed, err.Subject = e.id.Issuer, true, e.id.Subject
		return nil, err
	}
	return &e.id, nil
}

// credential is the token of an Authorization header and its scheme.
type credential struct {
	token string
	dpop  bool // the DPoP scheme rather than Bearer
}

// credentialOf returns the credential of the one Authorization header of
// h.
func credentialOf(h http.Header) (credential, *Error) {
	values := h.Values("Authorization")
	switch len(values) {
	case 0:
		return credential{}, &Error{Status: http.StatusUnauthorized, Reason: ReasonMissing}
	case 1:
	default:
		return credential{}, invalidToken(ReasonMalformed)
	}
	v := values[0]
	if len(v) > maxCredential {
		return credential{}, invalidToken(ReasonTooLarge)
	}
	scheme, rest, ok := strings.Cut(v, " ")
	var c credential
	switch {
	case !ok:
		return credential{}, invalidToken(ReasonMalformed)
	case strings.EqualFold(scheme, "Bearer"):
	case strings.EqualFold(scheme, "DPoP"):
		c.dpop = true
	default:
		return credential{}, invalidToken(ReasonMalformed)
	}
	// RFC 6750 §2.1 and RFC 9449 §7.1: the scheme, 1*SP, a b64token.
	c.token = strings.TrimLeft(rest, " ")
	if c.token == "" {
		e := invalidToken(ReasonMalformed)
		e.DPoP = c.dpop
		return credential{}, e
	}
	return c, nil
}

// Verify checks a bearer token and returns the caller it names:
//
//  1. a token over 8 KiB is refused unparsed;
//  2. a token verified before, still in the cache, whose exp, nbf and iat
//     still hold now, of an issuer still configured whose keys have not
//     changed since, is accepted as it was;
//  3. the token must be RFC 6750 b64token characters and a JWS in compact
//     form;
//  4. it is routed to an issuer: the unnamed one, or the one whose iss it
//     names ([ReasonUnknownIssuer] for none, at once, with no key fetch);
//  5. the header: alg in the issuer's allow-list (never "none"), no crit,
//     typ absent or an access token type, kid a string;
//  6. the key: by kid from the issuer's keys only, of the algorithm's
//     family ([ReasonUnknownKey] otherwise); jku, jwk, x5u and x5c are never
//     read;
//  7. the signature;
//  8. the claims: exp required, and exp, nbf and iat numbers from 0 to
//     253402300799 held to the leeway (iat never in the future); iss and
//     aud as the issuer's Config says;
//  9. the caller: sub a non-empty string, groups (a string or an array of
//     strings at the groups claim, at most MaxGroups), scope and scp (a
//     string split at U+0020 only, the items of an array taken whole);
//  10. the required scope (403 when missing).
//
// A token that passed is cached until it expires, within the cache's byte
// budget. Refusals are never cached. Errors are *[Error], as for
// [Verifier.Authenticate]; the Identity is shared and must not be
// modified.
func (v *Verifier) Verify(ctx context.Context, token string) (*Identity, error) {
	e, err := v.verify(ctx, token)
	if err != nil {
		return nil, err
	}
	return &e.id, nil
}

func (v *Verifier) verify(ctx context.Context, token string) (*cacheEntry, *Error) {
	if len(token) > maxCredential {
		return nil, invalidToken(ReasonTooLarge)
	}
	var h uint64
	if v.cache != nil {
		h = v.cache.hashOf(token)
		if e := v.cache.get(token, h); e != nil && e.live() && e.validAt(v.now(), v.opts.Leeway) {
			return e, nil
		}
	}
	if !isB64Token(token) {
		return nil, invalidToken(ReasonMalformed)
	}
	is, err := v.route(token)
	if err != nil {
		return nil, err
	}
	e, err := v.verifyWith(ctx, is, token, h)
	if err != nil {
		err.Issuer, err.routed = is.name, true
		return nil, err
	}
	return e, nil
}

// verifyWith verifies token with the keys and rules of is, and caches it
// under h when it passed.
func (v *Verifier) verifyWith(ctx context.Context, is *issuer, token string, h uint64) (*cacheEntry, *Error) {
	// The generation is read before the keys are: an entry can only claim
	// a generation whose keys it was checked against, or an older one.
	var gen uint64
	if is.gen != nil {
		gen = is.gen()
	}
	claims := claimSet{}
	tok, err := is.parser.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
		return is.key(ctx, t)
	})
	if err != nil {
		return nil, is.classify(tok, claims, err)
	}
	id, ae := v.identity(is, claims)
	if ae != nil {
		return nil, ae
	}
	e := &cacheEntry{id: id, hash: h, iss: is, gen: gen}
	if e.jkt, ae = confirmation(claims); ae != nil {
		return nil, ae
	}
	if v.cache != nil && is.gen != nil {
		e.exp, e.nbf, e.iat = claims.times()
		// A copy, so that the cache holds no request memory.
		e.token = strings.Clone(token)
		v.cache.put(e)
	}
	return e, nil
}

// route returns the issuer a token goes to: the unnamed one when there is
// one, else the one whose iss the token's payload names. The payload is
// read here only to choose; the chosen issuer verifies everything.
func (v *Verifier) route(token string) (*issuer, *Error) {
	t := v.issuers.Load()
	if t.unnamed != nil {
		return t.unnamed, nil
	}
	iss, ok := peekIssuer(token)
	if !ok {
		return nil, invalidToken(ReasonMalformed)
	}
	is := t.byIss[iss]
	if is == nil {
		return nil, invalidToken(ReasonUnknownIssuer)
	}
	return is, nil
}

// peekIssuer returns the iss of a compact JWS without verifying anything:
// "" when the payload has none, and false when the payload is not a
// base64url JSON object or iss is not a string.
func peekIssuer(token string) (string, bool) {
	_, rest, ok := strings.Cut(token, ".")
	if !ok {
		return "", false
	}
	payload, _, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(payload)
	if err != nil {
		return "", false
	}
	var p struct {
		Iss *string `json:"iss"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return "", false
	}
	if p.Iss == nil {
		return "", true
	}
	return *p.Iss, true
}

// key is the jwt.Keyfunc: it runs after the parser has checked alg against
// the allow-list, and picks the key by kid from the issuer's keys only.
func (is *issuer) key(ctx context.Context, t *jwt.Token) (any, error) {
	if _, ok := t.Header["crit"]; ok {
		// No extension is understood, so any crit list must be refused
		// (RFC 7515 section 4.1.11).
		return nil, invalidToken(ReasonCrit)
	}
	if raw, ok := t.Header["typ"]; ok {
		// RFC 8725 §3.11: a token that says it is another kind of JWT (a
		// JWE, a security event, a logout or DPoP proof) is not an access
		// token, whoever signed it.
		if typ, ok := raw.(string); !ok || !accessTokenType(typ) {
			return nil, invalidToken(ReasonMalformed)
		}
	}
	var kid string
	if raw, ok := t.Header["kid"]; ok {
		s, ok := raw.(string)
		if !ok {
			return nil, invalidToken(ReasonMalformed)
		}
		kid = s
	}
	alg := t.Method.Alg()
	k, err := is.keys.Key(ctx, kid, alg)
	switch {
	case err == nil:
	case errors.Is(err, ErrUnknownKey), errors.Is(err, ErrAmbiguousKey), errors.Is(err, ErrKeyMismatch):
		return nil, invalidToken(ReasonUnknownKey)
	default:
		return nil, invalidToken(ReasonKeysUnavailable)
	}
	// Checked again whatever the source: an RSA or EC public key must never
	// reach the HMAC verifier as a secret, nor an empty secret at all.
	if !k.Fits(alg) {
		return nil, invalidToken(ReasonUnknownKey)
	}
	return k.Public, nil
}

// accessTokenType reports whether typ, a JWS typ header, names an access
// token: "JWT" (RFC 7519 §5.1) or "at+jwt" (RFC 9068 §2.1), compared
// without regard to case and with an optional "application/" prefix
// (RFC 7515 §4.1.9).
func accessTokenType(typ string) bool {
	t := strings.ToLower(typ)
	t = strings.TrimPrefix(t, "application/")
	return t == "jwt" || t == "at+jwt"
}

// classify turns a golang-jwt parse error into the refusal it stands for.
func (is *issuer) classify(tok *jwt.Token, claims claimSet, err error) *Error {
	var ae *Error
	switch {
	case errors.As(err, &ae):
		// Raised by key.
		return ae
	case errors.Is(err, jwt.ErrTokenMalformed):
		return invalidToken(ReasonMalformed)
	case tok == nil:
		return invalidToken(ReasonMalformed)
	case tok.Method == nil:
		// alg missing, not a string, or not an algorithm golang-jwt knows
		// ("None", "NONE", ...).
		return invalidToken(ReasonAlgorithm)
	case !slices.Contains(is.cfg.Algorithms, tok.Method.Alg()):
		// golang-jwt reports a refused alg as ErrTokenSignatureInvalid.
		return invalidToken(ReasonAlgorithm)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return invalidToken(ReasonBadSignature)
	case errors.Is(err, jwt.ErrTokenInvalidClaims):
		return invalidToken(is.claimsReason(claims, err))
	}
	return invalidToken(ReasonMalformed)
}

// claimsReason names the claim check that err, a validation error from
// golang-jwt, failed. When several failed, the first in this order wins:
// types and ranges, exp, nbf and iat, iss, aud.
func (is *issuer) claimsReason(claims claimSet, err error) Reason {
	switch {
	case errors.Is(err, jwt.ErrInvalidType), errors.Is(err, errNumericDate):
		return ReasonClaims
	case errors.Is(err, jwt.ErrTokenExpired):
		return ReasonExpired
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		// Raised for exp, and for iss and aud when they are expected; the
		// claims say which one is absent.
		if _, ok := claims["exp"]; !ok {
			return ReasonMissingExp
		}
		if iss, _ := jwt.MapClaims(claims).GetIssuer(); is.cfg.Issuer != "" && iss == "" {
			return ReasonIssuer
		}
		return ReasonAudience
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return ReasonNotYetValid
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return ReasonIssuer
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return ReasonAudience
	}
	return ReasonClaims
}

// identity builds the caller from verified claims and applies the checks
// golang-jwt does not make: sub, the groups (type and count) and scope
// types, and the required scope.
func (v *Verifier) identity(is *issuer, claims claimSet) (Identity, *Error) {
	id := Identity{Issuer: is.name}
	switch sub := claims["sub"].(type) {
	case nil:
		return Identity{}, invalidToken(ReasonNoSubject)
	case string:
		if sub == "" {
			return Identity{}, invalidToken(ReasonNoSubject)
		}
		id.Subject = sub
	default:
		return Identity{}, invalidToken(ReasonClaims)
	}

	raw, err := lookupPath(claims, is.cfg.GroupsClaim, is.groupsPath)
	if err != nil {
		return Identity{}, invalidToken(ReasonClaims)
	}
	if list, ok := raw.([]any); ok && len(list) > v.opts.MaxGroups {
		// Counted before anything is made of them: no valid token may make
		// a request cost much more than an ordinary one.
		return Identity{}, invalidToken(ReasonTooManyGroups)
	}
	var ok bool
	if id.Groups, ok = appendStrings(nil, raw, false); !ok {
		return Identity{}, invalidToken(ReasonClaims)
	}

	if id.Scopes, ok = appendStrings(nil, claims["scope"], true); !ok {
		return Identity{}, invalidToken(ReasonClaims)
	}
	if id.Scopes, ok = appendStrings(id.Scopes, claims["scp"], true); !ok {
		return Identity{}, invalidToken(ReasonClaims)
	}

	if s := is.cfg.RequiredScope; s != "" && !slices.Contains(id.Scopes, s) {
		return Identity{}, &Error{Status: http.StatusForbidden, Code: "insufficient_scope", Reason: ReasonScope,
			Scope: s, Subject: id.Subject, Issuer: is.name}
	}
	return id, nil
}

// confirmation returns the cnf.jkt of a token (RFC 9449 §6.1): the
// thumbprint of the key it is bound to, "" for an unbound token.
func confirmation(claims claimSet) (string, *Error) {
	raw, ok := claims["cnf"]
	if !ok {
		return "", nil
	}
	cnf, ok := raw.(map[string]any)
	if !ok {
		return "", invalidToken(ReasonClaims)
	}
	j, ok := cnf["jkt"]
	if !ok {
		return "", nil // another kind of confirmation: nothing DPoP checks
	}
	jkt, ok := j.(string)
	if !ok || jkt == "" {
		return "", invalidToken(ReasonClaims)
	}
	return jkt, nil
}

// lookupPath returns the claim named name, or, when there is none, the
// value at path through nested objects. A missing or null value is nil; a
// non-object on the way is an error.
func lookupPath(claims map[string]any, name string, path []string) (any, error) {
	if v, ok := claims[name]; ok || len(path) == 1 {
		return v, nil
	}
	var cur any = claims
	for _, p := range path {
		if cur == nil {
			return nil, nil
		}
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, errors.New("not an object")
		}
		cur = obj[p]
	}
	return cur, nil
}

// appendStrings appends to dst the strings of v, a string or an array of
// strings, skipping empty and repeated values; split divides a string (not
// the items of an array, which are taken whole) at the space character
// U+0020 only (RFC 6749 §3.3 scope lists). It reports false when v has
// another type. Past a few values, repeats are found with a map: comparing
// each of 256 groups (or of the thousands of words an 8 KiB scope can
// hold) with all before it cost more than verifying the token.
func appendStrings(dst []string, v any, split bool) ([]string, bool) {
	n := len(dst)
	switch x := v.(type) {
	case []any:
		n += len(x)
	case string:
		if split {
			n += strings.Count(x, " ") + 1
		}
	}
	var seen map[string]struct{}
	if n > 8 {
		seen = make(map[string]struct{}, n)
		for _, s := range dst {
			seen[s] = struct{}{}
		}
	}
	add := func(s string) {
		if s == "" {
			return
		}
		if seen != nil {
			if _, dup := seen[s]; dup {
				return
			}
			seen[s] = struct{}{}
		} else if slices.Contains(dst, s) {
			return
		}
		dst = append(dst, s)
	}
	switch x := v.(type) {
	case nil:
	case string:
		if !split {
			add(x)
			break
		}
		for f := range strings.SplitSeq(x, " ") {
			add(f)
		}
	case []any:
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return dst, false
			}
			add(s)
		}
	default:
		return dst, false
	}
	return dst, true
}

// claimSet is the payload of a token as golang-jwt decodes it, with the
// NumericDate getters held to the range the contract allows, so that no
// overflow ever turns a far-future nbf or iat into the past.
type claimSet map[string]any

// errNumericDate: a time claim is not a number from 0 to 253402300799.
var errNumericDate = errors.New("numeric date out of range")

func (c claimSet) GetExpirationTime() (*jwt.NumericDate, error) { return c.date("exp") }
func (c claimSet) GetNotBefore() (*jwt.NumericDate, error)      { return c.date("nbf") }
func (c claimSet) GetIssuedAt() (*jwt.NumericDate, error)       { return c.date("iat") }
func (c claimSet) GetIssuer() (string, error)                   { return jwt.MapClaims(c).GetIssuer() }
func (c claimSet) GetSubject() (string, error)                  { return jwt.MapClaims(c).GetSubject() }
func (c claimSet) GetAudience() (jwt.ClaimStrings, error)       { return jwt.MapClaims(c).GetAudience() }

// date returns the NumericDate claim name: nil when absent, an error
// wrapping errNumericDate when it is not a number from 0 to year 9999.
func (c claimSet) date(name string) (*jwt.NumericDate, error) {
	raw, ok := c[name]
	if !ok {
		return nil, nil
	}
	f, ok := raw.(float64)
	if !ok || !(f >= 0 && f <= maxNumericDate) {
		return nil, fmt.Errorf("%w: %s", errNumericDate, name)
	}
	sec, frac := math.Modf(f)
	return jwt.NewNumericDate(time.Unix(int64(sec), int64(frac*1e9))), nil
}

// times returns exp, nbf and iat of verified claims in Unix nanoseconds
// (nbf and iat math.MinInt64 when absent). Verified claims hold them in
// range, and year 9999 fits an int64 of nanoseconds only up to 2262, so a
// later date is held at the end of the range: "never" for exp.
func (c claimSet) times() (exp, nbf, iat int64) {
	nanos := func(name string) int64 {
		d, err := c.date(name)
		if err != nil || d == nil {
			return math.MinInt64
		}
		if d.Time.After(time.Unix(0, math.MaxInt64)) {
			return math.MaxInt64
		}
		return d.Time.UnixNano()
	}
	return nanos("exp"), nanos("nbf"), nanos("iat")
}

// isB64Token reports whether s matches RFC 6750's
// b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' {
			continue
		}
		break
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}

// isScopeToken reports whether s is one RFC 6749 scope-token, which also
// makes it safe inside a quoted-string of the challenge.
func isScopeToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return s != ""
}

// invalidToken returns the 401 invalid_token refusal for r.
func invalidToken(r Reason) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Reason: r}
}
