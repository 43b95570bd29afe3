// Package jws trusts a token by its signature: a JWS in compact form
// (RFC 7515) whose JOSE header passes the issuer's rules and whose
// signature verifies with one of the issuer's keys. It is one way an
// issuer's tokens are trusted ([auth.Trust]); the claims it returns are
// held to every other rule by the auth pipeline.
//
// The header's rules (RFC 8725): alg in the issuer's allow-list, never
// "none"; no crit (no extension is understood); a typ, when present, that
// names an access token ("JWT", "at+jwt") and one of the issuer's token
// types when it names some; kid a string. The key is chosen by kid from
// the issuer's keys only, of the algorithm's family; jku, jwk, x5u and x5c
// are never read.
package jws

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/keys"
)

// A Trust trusts the tokens of an issuer by their signature with the keys
// it was made with. It is comparable: an issuer that keeps its Trust (and
// its Config) keeps its cached tokens across a reload.
type Trust struct {
	keys keys.Keys
}

var _ auth.Trust = (*Trust)(nil)

// New returns the Trust of tokens signed with the keys k finds.
func New(k keys.Keys) *Trust { return &Trust{keys: k} }

// Authenticator returns the authenticator of the tokens of an issuer whose
// checked Config is c. Fetched keys are held to c.MaxStale on the clock
// now (see [keys.HoldFresh]). It returns the *setting.Error of the
// issuer's algorithms (or of the file the keys come from) when static keys
// (a key set, a key file, an HMAC secret file) have none that fits one of
// them: such keys could never verify a token.
func (t *Trust) Authenticator(c auth.Config, now func() time.Time) (auth.Authenticator, error) {
	if err := keys.CheckStatic(t.keys, c.Algorithms); err != nil {
		return nil, err
	}
	a := &authenticator{
		cfg:  c,
		keys: t.keys,
		parser: jwt.NewParser(
			jwt.WithValidMethods(c.Algorithms),
			// The claims are the pipeline's to check, whatever vouched
			// for them.
			jwt.WithoutClaimsValidation(),
			// Canonical base64 only, so one token has one encoding.
			jwt.WithStrictDecoding(),
		),
	}
	if gen, ok := keys.Generation(t.keys); ok {
		a.gen = gen
	}
	a.lookup, a.fresh = keys.HoldFresh(t.keys, c.MaxStale, now)
	return a, nil
}

// authenticator verifies the tokens of one issuer.
type authenticator struct {
	cfg    auth.Config
	keys   keys.Keys
	parser *jwt.Parser
	// lookup finds keys: keys, with its fetched parts held to MaxStale,
	// and fresh says whether they are; nil when nothing bounds their age.
	lookup keys.Keys
	fresh  *keys.Freshness
	// gen is the generation of keys, or nil when keys does not count its
	// changes (then its tokens are never cached).
	gen func() uint64
	// event verifies Security Event Tokens rather than access tokens.
	event bool
}

// Authenticate verifies token's header and signature, and returns its
// claims, stamped with the generation of the keys as it was before they
// were looked at: a verdict can only claim a generation whose keys it was
// checked against, or an older one.
func (a *authenticator) Authenticate(ctx context.Context, token string) (auth.Verdict, *auth.Error) {
	var v auth.Verdict
	if a.gen != nil {
		v.Stamp, v.Cacheable = a.gen(), true
	}
	tok, err := a.parser.ParseWithClaims(token, jwt.MapClaims{}, func(t *jwt.Token) (any, error) {
		return a.key(ctx, t)
	})
	if err != nil {
		return auth.Verdict{}, a.classify(tok, err)
	}
	v.Claims = auth.Claims(tok.Claims.(jwt.MapClaims))
	typ, present := tok.Header["typ"]
	s, _ := typ.(string)
	v.Unlisted = !a.cfg.ListsType(s, present)
	return v, nil
}

// Holds reports whether the keys are of generation stamp, and their
// fetched parts fresh, at now.
func (a *authenticator) Holds(stamp uint64, now time.Time) bool {
	return a.gen != nil && a.gen() == stamp && a.fresh.Fresh(now)
}

// Ready returns nil once the keys are usable (a JWKS fetched) and fresh.
func (a *authenticator) Ready(now time.Time) error {
	if err := keys.Ready(a.keys); err != nil {
		return err
	}
	return a.fresh.Err(now)
}

// key is the jwt.Keyfunc: it runs after the parser has checked alg against
// the allow-list, and picks the key by kid from the issuer's keys only.
func (a *authenticator) key(ctx context.Context, t *jwt.Token) (any, error) {
	if _, ok := t.Header["crit"]; ok {
		// No extension is understood, so any crit list must be refused
		// (RFC 7515 section 4.1.11).
		return nil, auth.InvalidToken(auth.ReasonCrit)
	}
	// RFC 8725 §3.11: a token that says it is another kind of JWT (a
	// JWE, a security event, a logout token or a DPoP proof) is not an
	// access token, whoever signed it; nor, where the issuer requires
	// at+jwt, is a token that does not say it is one.
	raw, present := t.Header["typ"]
	typ, isString := raw.(string)
	if present && !isString {
		return nil, auth.InvalidToken(auth.ReasonMalformed)
	}
	switch {
	case a.event:
		if !isEventType(typ) {
			return nil, auth.InvalidToken(auth.ReasonTokenType)
		}
	case !a.cfg.AcceptsType(typ, present):
		return nil, auth.InvalidToken(auth.ReasonTokenType)
	}
	var kid string
	if raw, ok := t.Header["kid"]; ok {
		s, ok := raw.(string)
		if !ok {
			return nil, auth.InvalidToken(auth.ReasonMalformed)
		}
		kid = s
	}
	alg := t.Method.Alg()
	k, err := a.lookup.Key(ctx, kid, alg)
	switch {
	case err == nil:
	case errors.Is(err, keys.ErrUnknownKey), errors.Is(err, keys.ErrAmbiguousKey), errors.Is(err, keys.ErrKeyMismatch):
		return nil, auth.InvalidToken(auth.ReasonUnknownKey)
	default:
		return nil, auth.InvalidToken(auth.ReasonKeysUnavailable)
	}
	// Checked again whatever the source: an RSA or EC public key must never
	// reach the HMAC verifier as a secret, nor an empty secret at all.
	if !k.Fits(alg) {
		return nil, auth.InvalidToken(auth.ReasonUnknownKey)
	}
	return k.Public, nil
}

// classify turns a golang-jwt parse error into the refusal it stands for.
func (a *authenticator) classify(tok *jwt.Token, err error) *auth.Error {
	var ae *auth.Error
	switch {
	case errors.As(err, &ae):
		// Raised by key.
		return ae
	case errors.Is(err, jwt.ErrTokenMalformed), tok == nil:
		return auth.InvalidToken(auth.ReasonMalformed)
	case tok.Method == nil:
		// alg missing, not a string, or not an algorithm golang-jwt knows
		// ("None", "NONE", ...).
		return auth.InvalidToken(auth.ReasonAlgorithm)
	case !slices.Contains(a.cfg.Algorithms, tok.Method.Alg()):
		// golang-jwt reports a refused alg as ErrTokenSignatureInvalid.
		return auth.InvalidToken(auth.ReasonAlgorithm)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return auth.InvalidToken(auth.ReasonBadSignature)
	}
	return auth.InvalidToken(auth.ReasonMalformed)
}

// EventType is the JOSE typ of a Security Event Token (RFC 8417 §2.3).
const EventType = "secevent+jwt"

// VerifyEvent verifies a Security Event Token (RFC 8417) that the issuer
// whose checked Config is c signed with the keys of t, and returns its
// claims: the header's rules of an access token (alg, crit, kid, the key
// of the issuer's only) but for typ, which must be secevent+jwt (with or
// without application/, in any case; [auth.ReasonTokenType] otherwise), so
// that an access token is never taken for an event, as an event is never
// taken for an access token. The claims are the caller's to check.
func (t *Trust) VerifyEvent(ctx context.Context, c auth.Config, token string) (auth.Claims, *auth.Error) {
	lookup, _ := keys.HoldFresh(t.keys, c.MaxStale, time.Now)
	a := &authenticator{
		cfg: c, keys: t.keys, lookup: lookup, event: true,
		parser: jwt.NewParser(jwt.WithValidMethods(c.Algorithms), jwt.WithoutClaimsValidation(), jwt.WithStrictDecoding()),
	}
	v, err := a.Authenticate(ctx, token)
	if err != nil {
		return nil, err
	}
	return v.Claims, nil
}

// isEventType reports whether typ names a Security Event Token.
func isEventType(typ string) bool {
	if len(typ) > len("application/") && strings.EqualFold(typ[:len("application/")], "application/") {
		typ = typ[len("application/"):]
	}
	return strings.EqualFold(typ, EventType)
}
