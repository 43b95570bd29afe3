package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/plantstore/plantstore/auth/dpop"
)

// maxCredential is the largest Authorization header, and so the largest
// token, that is looked at; anything longer is refused unparsed.
const maxCredential = 8 << 10

// Authenticate checks the credential of r and returns the caller it
// names. It is the one way in to verification ([Middleware] calls it),
// and it does, in order, the cheap refusals first:
//
//  1. the header: the one Authorization header, "Bearer <token>" (RFC 6750
//     §2.1) or "DPoP <token>" (RFC 9449 §7.1), the scheme in any case, one
//     or more spaces; over 8 KiB it is refused unparsed;
//  2. the cache: a token verified before, still in the cache, whose exp,
//     nbf and iat still hold now, of an issuer still configured, whose
//     Authenticator says its verdict holds (for keys: they have not
//     changed since, nor, with MaxStale, gone unconfirmed for longer),
//     goes on to step 9 as it was, revocations checked again;
//  3. the form: RFC 6750 b64token characters;
//  4. the issuer: for a JWS in compact form, the unnamed one, or the one
//     whose iss the token names ([ReasonUnknownIssuer] for none, at once,
//     with no key fetch); for any other token, the issuer whose Opaque
//     Trust takes such tokens ([ReasonMalformed] when none does);
//  5. the issuer's [Authenticator], which turns the token into claims the
//     way the issuer's tokens are trusted; for a JWS, package jws: the
//     JOSE header (alg in the issuer's allow-list, never "none"; no crit;
//     typ an access-token type, and one of the issuer's TokenTypes when it
//     names some; kid a string), the key by kid from the issuer's keys
//     only, of the algorithm's family (jku, jwk, x5u and x5c never read;
//     with MaxStale, fetched keys that no fetch confirmed for longer are
//     none), and the signature;
//  6. the registered claims, whatever trusted them (see
//     registered in claims.go): exp required, and exp, nbf and iat numbers
//     from 0 to 253402300799 held to the leeway (iat never in the
//     future); iss and aud as the issuer's Config says;
//  7. the issuer's rules on the claims, in order (see [Config.rules]):
//     exp at most MaxLifetime after iat (or now) ([ReasonLifetime]);
//     client_id, or without it azp, one of the issuer's Clients
//     ([ReasonClient]); each of the issuer's claim rules ([ReasonClaim]);
//  8. the caller (see claims.go): sub a non-empty string, no sign that
//     the groups were left out ([ReasonGroupsOverage]), groups (a string
//     or an array of strings at the groups claim, at most MaxGroups),
//     scope and scp (a string split at U+0020 only, the items of an array
//     taken whole), and the required scope (403 when missing); and the
//     binding its cnf names (see binding.go): cnf.jkt, cnf.x5t#S256, both
//     or nothing, since a binding this service does not check would leave
//     a bearer token ([ReasonUnknownBinding]);
//  9. the binding, every time, cached or not: a token bound to a
//     certificate (cnf.x5t#S256) needs the client certificate of that
//     thumbprint in Options.ClientCertHeader from a trusted proxy (see
//     [Verifier.bindCert]), as does any token where the issuer requires
//     mTLS; a token bound to a key
//     (cnf.jkt) needs the DPoP scheme and one valid DPoP proof header,
//     checked as RFC 9449 §4.3 says, the checks that cost no signature
//     first (see [dpop.Parse]: the form, typ, an alg of
//     Options.DPoPAlgorithms, no crit, a public jwk of a sound shape whose
//     thumbprint is cnf.jkt, htm, htu, iat within the window, ath, and
//     last, with Options.Nonces, a server nonce issued within its
//     lifetime: [ReasonDPoPNonce], 401 use_dpop_nonce); an
//     unbound token needs the Bearer scheme, and is refused where the
//     issuer requires DPoP;
//  10. revocations: with Options.Revocations, a token they name (by its
//     jti, or a cutoff for its subject, client or issuer after its iat)
//     is refused with [ReasonRevoked], whether it came from the cache or
//     was verified now;
//  11. for a proof, the budget of failed signatures of its caller and
//     key ([ReasonDPoPBlocked], 429, once either spent it); admission
//     ([Admitter]): one request taken from the caller's rate when
//     Options.RateLimit is set, and, for a proof, its jti not seen before
//     on this replica and room for it in the caller's and key's share;
//     then the proof's signature, and its jti recorded once the signature
//     verified (in Options.Shared first, the one round trip it costs).
//
// A token that passed steps 3 to 8 is cached until it expires, within the
// cache's byte budget, when its Authenticator's verdict may be cached;
// refusals are never cached. Every error is an
// *[Error], but for a caller over its rate: 401 with [ReasonMissing] when
// there is no credential, 401 invalid_token for a credential that fails a
// check, 401 invalid_dpop_proof for a bad proof, 403 insufficient_scope
// for a valid token without the required scope, and 429 for
// [ReasonDPoPQuota] and [ReasonDPoPBlocked]; a *[RateLimitError] (429)
// for a caller over its rate.
// The returned Identity is shared with other requests that present the
// same token and must not be modified.
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
		var ae *Error
		var rl *RateLimitError
		switch {
		case errors.As(err, &ae):
			ae.Issuer, ae.routed, ae.Subject = e.id.Issuer, true, e.id.Subject
		case errors.As(err, &rl):
			rl.Issuer, rl.Subject = e.id.Issuer, e.id.Subject
		}
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

// verify is steps 2 to 8 of [Verifier.Authenticate] for token.
func (v *Verifier) verify(ctx context.Context, token string) (*cacheEntry, *Error) {
	if len(token) > maxCredential {
		return nil, invalidToken(ReasonTooLarge)
	}
	var h uint64
	if v.cache != nil {
		h = v.cache.hashOf(token)
		if e := v.cache.get(token, h); e != nil && !e.iss.retired.Load() {
			if now := v.now(); e.validAt(now, v.opts.Leeway) && e.src.Holds(e.stamp, now) {
				// A revocation made after the token was cached applies.
				if err := v.revoked(e, now); err != nil {
					return nil, err
				}
				return e, nil
			}
		}
	}
	if !isB64Token(token) {
		return nil, invalidToken(ReasonMalformed)
	}
	is, a, err := v.route(token)
	if err != nil {
		return nil, err
	}
	e, err := v.verifyWith(ctx, is, a, token, h)
	if err != nil {
		err.Issuer, err.routed = is.name, true
		return nil, err
	}
	if err := v.revoked(e, v.now()); err != nil {
		return nil, err
	}
	return e, nil
}

// verifyWith has a, an Authenticator of is, turn token into claims, holds
// them to the rules every token meets, and caches the token under h when
// it passed and a's verdict may be cached.
func (v *Verifier) verifyWith(ctx context.Context, is *issuer, a Authenticator, token string, h uint64) (*cacheEntry, *Error) {
	vd, ae := a.Authenticate(ctx, token)
	if ae != nil {
		return nil, ae
	}
	claims := vd.Claims
	now := v.now()
	if r := is.registered(claims, now, v.opts.Leeway); r != "" {
		return nil, invalidToken(r)
	}
	var audit audited
	if vd.Unlisted {
		audit.add(invalidToken(ReasonTokenType))
	}
	for _, r := range is.rules {
		if ae := r.check(claims, now, v.opts.Leeway); ae != nil {
			if !r.audited {
				return nil, ae
			}
			audit.add(ae)
		}
	}
	id, ae := v.identity(is, claims)
	if ae != nil {
		return nil, ae
	}
	id.Introspected = vd.Introspected
	id.audit = audit
	e := &cacheEntry{id: id, hash: h, iss: is, src: a, stamp: vd.Stamp, caller: CallerKey(is.name, id.Subject),
		clientID: clientOf(claims), jti: stringClaim(claims, "jti")}
	e.exp, e.nbf, e.iat = claims.times()
	if e.bound, ae = bindingOf(claims); ae != nil {
		return nil, ae
	}
	if e.bound.dpop() {
		e.ath, e.client = dpop.AccessTokenHash(token), dpop.ClientKey(e.bound.jkt)
	}
	if v.cache != nil && vd.Cacheable {
		// A copy, so that the cache holds no request memory.
		e.token = strings.Clone(token)
		if vd.Digest {
			e.token, e.digest, e.hash2 = "", true, v.cache.hash2Of(token)
		}
		v.cache.put(e, now)
	}
	return e, nil
}

// route returns the issuer a token goes to, and its Authenticator of the
// token's form: for a JWS, the unnamed issuer when there is one, else the
// one whose iss the token's payload names; for any other token, the
// issuer that takes opaque tokens, when one does. The payload is read
// here only to choose; the chosen issuer verifies everything.
func (v *Verifier) route(token string) (*issuer, Authenticator, *Error) {
	t := v.issuers.Load()
	if strings.Count(token, ".") != 2 {
		// Not three segments: no JWS in compact form.
		if t.opaque == nil {
			return nil, nil, invalidToken(ReasonMalformed)
		}
		return t.opaque, t.opaque.opaque, nil
	}
	is := t.unnamed
	if is == nil {
		iss, ok := peekIssuer(token)
		if !ok {
			return nil, nil, invalidToken(ReasonMalformed)
		}
		if is = t.byIss[iss]; is == nil {
			return nil, nil, invalidToken(ReasonUnknownIssuer)
		}
	}
	if is.jws == nil {
		// An issuer of opaque tokens only.
		return nil, nil, invalidToken(ReasonMalformed)
	}
	return is, is.jws, nil
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

// invalidToken returns the 401 invalid_token refusal for r.
func invalidToken(r Reason) *Error { return InvalidToken(r) }

// InvalidToken returns the 401 invalid_token refusal for r: what an
// [Authenticator] refuses a token with.
func InvalidToken(r Reason) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Reason: r}
}
