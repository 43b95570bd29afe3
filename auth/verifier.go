package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// maxCredential is the largest Authorization header, and so the largest
// token, that is looked at; anything longer is refused unparsed.
const maxCredential = 8 << 10

// Config is the verification policy. Its zero value accepts any issuer and
// audience with the default algorithms, no leeway, groups at "groups" and no
// required scope.
type Config struct {
	// Issuer, when set, is the value the iss claim must equal.
	Issuer string
	// Audiences, when set, are the values of which the aud claim (a string
	// or an array) must contain at least one. Empty entries are ignored.
	Audiences []string
	// Algorithms is the allow-list of JWS alg values; nil or empty means
	// [DefaultAlgorithms].
	Algorithms []string
	// Leeway is the clock skew allowed on exp, nbf and iat.
	Leeway time.Duration
	// GroupsClaim is the claim holding the caller's groups: a top-level
	// name, or a dotted path into nested objects ("realm_access.roles").
	// A top-level claim whose name contains dots is found by its full name
	// first. Empty means "groups".
	GroupsClaim string
	// RequiredScope, when set, is a scope the token must carry in its
	// scope or scp claim; without it the request is refused with 403.
	RequiredScope string
	// CacheSize is the number of verified tokens kept, so that a token
	// presented again costs a lookup instead of a signature check (see
	// [Verifier.Verify]). Zero means [DefaultCacheSize]; a negative value
	// turns the cache off.
	CacheSize int
}

// DefaultAlgorithms returns the algorithms a [Verifier] allows when its
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

// Verifier checks bearer tokens against a [Config] with keys from a [Keys]
// source. It is safe for concurrent use.
type Verifier struct {
	cfg        Config
	keys       Keys
	m          *Metrics
	parser     *jwt.Parser
	groupsPath []string
	// cache is nil when turned off or when a key source does not count
	// its changes; gen is then nil too.
	cache *tokenCache
	gen   func() uint64
	// now is the clock of every time check; tests replace it.
	now func() time.Time
}

// NewVerifier returns a Verifier for cfg that finds keys in keys and whose
// [Middleware] counts failures on m (which may be nil). It returns an error
// when keys is nil, when cfg allows "none" or an algorithm it does not know,
// when Leeway is negative, when GroupsClaim has an empty path element, or
// when RequiredScope is not a single RFC 6749 scope token.
func NewVerifier(cfg Config, keys Keys, m *Metrics) (*Verifier, error) {
	if keys == nil {
		return nil, errors.New("new verifier: no key source")
	}
	known := DefaultAlgorithms()
	algs := cfg.Algorithms
	if len(algs) == 0 {
		algs = known
	}
	clean := make([]string, 0, len(algs))
	for _, a := range algs {
		if strings.EqualFold(a, "none") {
			return nil, errors.New(`new verifier: algorithm "none" is never allowed`)
		}
		if !slices.Contains(known, a) {
			return nil, fmt.Errorf("new verifier: unknown algorithm %q (want one of %s)", a, strings.Join(known, ", "))
		}
		if !slices.Contains(clean, a) {
			clean = append(clean, a)
		}
	}
	cfg.Algorithms = clean

	var auds []string
	for _, a := range cfg.Audiences {
		if a != "" {
			auds = append(auds, a)
		}
	}
	cfg.Audiences = auds

	if cfg.Leeway < 0 {
		return nil, fmt.Errorf("new verifier: negative leeway %s", cfg.Leeway)
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	path := strings.Split(cfg.GroupsClaim, ".")
	if slices.Contains(path, "") {
		return nil, fmt.Errorf("new verifier: groups claim %q has an empty path element", cfg.GroupsClaim)
	}
	if cfg.RequiredScope != "" && !isScopeToken(cfg.RequiredScope) {
		return nil, fmt.Errorf("new verifier: required scope %q is not a single scope token", cfg.RequiredScope)
	}

	opts := []jwt.ParserOption{
		jwt.WithValidMethods(cfg.Algorithms),
		jwt.WithLeeway(cfg.Leeway),
		jwt.WithExpirationRequired(),
		// golang-jwt checks iat only on request; with it, an iat later than
		// now plus leeway fails with ErrTokenUsedBeforeIssued.
		jwt.WithIssuedAt(),
		// Canonical base64 only, so one token has one encoding.
		jwt.WithStrictDecoding(),
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if len(cfg.Audiences) > 0 {
		// WithAudience passes when aud contains any one of them.
		opts = append(opts, jwt.WithAudience(cfg.Audiences...))
	}
	v := &Verifier{
		cfg:        cfg,
		keys:       keys,
		m:          m,
		groupsPath: path,
		now:        time.Now,
	}
	v.parser = jwt.NewParser(append(opts, jwt.WithTimeFunc(func() time.Time { return v.now() }))...)
	size := cfg.CacheSize
	if size == 0 {
		size = DefaultCacheSize
	}
	if gen, ok := generationOf(keys); ok && size > 0 {
		v.cache, v.gen = newTokenCache(size), gen
	}
	return v, nil
}

// Config returns the policy v enforces, with defaults filled in: the
// effective Algorithms and GroupsClaim.
func (v *Verifier) Config() Config {
	c := v.cfg
	c.Algorithms = slices.Clone(c.Algorithms)
	c.Audiences = slices.Clone(c.Audiences)
	return c
}

// Verify checks token's signature and claims and returns the caller it
// names. Every error it returns is an *[Error]: 401 invalid_token with the
// [Reason] for a token that fails a check, or 403 insufficient_scope when
// the token is valid but lacks the configured required scope. Verify does
// not count failures; [Middleware] does.
//
// A token that passed is kept in a bounded cache (Config.CacheSize) until
// it expires, and is then accepted without a signature check, as long as
// its exp, nbf and iat still hold now and no key source has changed its
// keys since: a key removed by a JWKS refresh or a key file reload stops
// its tokens at once. Refusals are never cached.
func (v *Verifier) Verify(ctx context.Context, token string) (Identity, error) {
	e, err := v.verify(ctx, token)
	if err != nil {
		return Identity{}, err
	}
	return e.identity(), nil
}

// verify is Verify without the copy of the identity: the returned entry
// may be shared with other calls.
func (v *Verifier) verify(ctx context.Context, token string) (*verified, *Error) {
	if len(token) > maxCredential {
		return nil, invalidToken(ReasonTooLarge)
	}
	e, h, gen := v.lookup(token)
	if e != nil {
		return e, nil
	}
	return v.check(ctx, token, h, gen)
}

// lookup returns the cached entry of token when it is still valid now, and
// else the hash and key generation that check needs to cache it.
func (v *Verifier) lookup(token string) (e *verified, h, gen uint64) {
	if v.cache == nil || len(token) > maxCachedToken {
		return nil, 0, 0
	}
	// The generation is read before the keys are: an entry can only claim
	// a generation whose keys it was checked against, or an older one.
	h, gen = v.cache.hash(v.cache.seed, token), v.gen()
	if e := v.cache.get(token, h, gen); e != nil && e.validAt(v.now(), v.cfg.Leeway) {
		return e, h, gen
	}
	return nil, h, gen
}

// check verifies token's signature and claims and caches the result
// under h and gen (from lookup) when it passed.
func (v *Verifier) check(ctx context.Context, token string, h, gen uint64) (*verified, *Error) {
	claims := jwt.MapClaims{}
	tok, err := v.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		return v.key(ctx, t)
	})
	if err != nil {
		return nil, v.classify(tok, claims, err)
	}
	id, ae := v.identity(claims)
	if ae != nil {
		return nil, ae
	}
	e := &verified{token: token, hash: h, gen: gen, id: id, principals: Principals(id)}
	if exp, nbf, iat, ok := timeClaims(claims); ok && v.cache != nil && len(token) <= maxCachedToken {
		// A copy, so that the cache holds no request memory.
		e.token = strings.Clone(token)
		e.exp, e.nbf, e.iat = exp, nbf, iat
		v.cache.put(e)
	}
	return e, nil
}

// key is the jwt.Keyfunc: it runs after the parser has checked alg against
// the allow-list, and picks the key by kid from the configured source only.
// jku, jwk, x5u and x5c are never read.
func (v *Verifier) key(ctx context.Context, t *jwt.Token) (any, error) {
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
	k, err := v.keys.Key(ctx, kid, alg)
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
	if secret, ok := k.Public.([]byte); ok && len(secret) == 0 {
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
func (v *Verifier) classify(tok *jwt.Token, claims jwt.MapClaims, err error) *Error {
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
	case !slices.Contains(v.cfg.Algorithms, tok.Method.Alg()):
		// golang-jwt reports a refused alg as ErrTokenSignatureInvalid.
		return invalidToken(ReasonAlgorithm)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return invalidToken(ReasonBadSignature)
	case errors.Is(err, jwt.ErrTokenInvalidClaims):
		return invalidToken(v.claimsReason(claims, err))
	}
	return invalidToken(ReasonMalformed)
}

// claimsReason names the claim check that err, a validation error from
// golang-jwt, failed. When several failed, the first in this order wins:
// types, exp, nbf and iat, iss, aud.
func (v *Verifier) claimsReason(claims jwt.MapClaims, err error) Reason {
	switch {
	case errors.Is(err, jwt.ErrInvalidType):
		return ReasonClaims
	case errors.Is(err, jwt.ErrTokenExpired):
		return ReasonExpired
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		// Raised for exp, and for iss and aud when they are expected; the
		// claims say which one is absent.
		if exp, _ := claims.GetExpirationTime(); exp == nil {
			return ReasonExpired
		}
		if iss, _ := claims.GetIssuer(); v.cfg.Issuer != "" && iss == "" {
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
// golang-jwt does not make: sub, the groups and scope types, and the
// required scope.
func (v *Verifier) identity(claims jwt.MapClaims) (Identity, *Error) {
	var id Identity
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

	raw, err := lookupPath(claims, v.cfg.GroupsClaim, v.groupsPath)
	if err != nil {
		return Identity{}, invalidToken(ReasonClaims)
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

	if s := v.cfg.RequiredScope; s != "" && !slices.Contains(id.Scopes, s) {
		return Identity{}, &Error{Status: http.StatusForbidden, Code: "insufficient_scope", Reason: ReasonScope, Scope: s, Subject: id.Subject}
	}
	return id, nil
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
// strings, skipping empty and repeated values; split divides strings at
// spaces (scope lists). It reports false when v has another type.
func appendStrings(dst []string, v any, split bool) ([]string, bool) {
	add := func(s string) {
		if split {
			for f := range strings.FieldsSeq(s) {
				if !slices.Contains(dst, f) {
					dst = append(dst, f)
				}
			}
			return
		}
		if s != "" && !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	switch x := v.(type) {
	case nil:
	case string:
		add(x)
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
