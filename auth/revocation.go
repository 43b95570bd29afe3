package auth

import (
	"math"
	"time"
)

// Revocations says whether a token that passed every other check was
// revoked after it was issued: by its jti, or by a cutoff for its subject,
// its client or its whole issuer. The [Verifier] asks on every request
// that would be accepted, cached tokens included, so that a revocation
// applies whatever way of trust accepted the token. Implementations are
// safe for concurrent use and answer with a hash lookup.
type Revocations interface {
	Revoked(t Revocable, now time.Time) bool
}

// Revocable is what of a verified token a revocation can name.
type Revocable struct {
	// Issuer is the configured name of the token's issuer, "" for the
	// unnamed one.
	Issuer string
	// Subject is the token's sub.
	Subject string
	// Client is the token's client_id, or without it its azp; "" when it
	// has neither as a string.
	Client string
	// ID is the token's jti, "" when it has none as a string.
	ID string
	// IssuedAt is the token's iat in Unix nanoseconds, [NoIssuedAt] when
	// it has none.
	IssuedAt int64
}

// NoIssuedAt is the [Revocable.IssuedAt] of a token without iat.
const NoIssuedAt = math.MinInt64

// revocable returns what of e a revocation can name.
func (e *cacheEntry) revocable() Revocable {
	return Revocable{Issuer: e.id.Issuer, Subject: e.id.Subject, Client: e.clientID, ID: e.jti, IssuedAt: e.iat}
}

// revoked refuses e when v's revocations name it.
func (v *Verifier) revoked(e *cacheEntry, now time.Time) *Error {
	if v.opts.Revocations == nil || !v.opts.Revocations.Revoked(e.revocable(), now) {
		return nil
	}
	err := invalidToken(ReasonRevoked)
	err.Issuer, err.routed, err.Subject = e.id.Issuer, true, e.id.Subject
	return err
}

// stringClaim returns the claim name of c when it is a string, else "".
func stringClaim(c Claims, name string) string {
	s, _ := c[name].(string)
	return s
}

// clientOf returns the client a token was issued to: its client_id (RFC
// 9068 §2.2), or without it its azp; "" for neither.
func clientOf(c Claims) string {
	if _, ok := c["client_id"]; ok {
		return stringClaim(c, "client_id")
	}
	return stringClaim(c, "azp")
}

// IssuerConfig returns the checked Config of the configured issuer name
// ("" for the unnamed one), and false when no such issuer is configured
// now. It is safe to call concurrently with [Verifier.SetIssuers].
func (v *Verifier) IssuerConfig(name string) (Config, bool) {
	for _, is := range v.issuers.Load().all {
		if is.name == name {
			return is.cfg, true
		}
	}
	return Config{}, false
}

// IssuerOf returns the configured issuer whose Config.Issuer is iss, as
// it is now, for what else an issuer signs (security events): false when
// none is, and for "" (an unnamed issuer without -jwt-issuer names none).
func (v *Verifier) IssuerOf(iss string) (Issuer, bool) {
	if iss == "" {
		return Issuer{}, false
	}
	for _, is := range v.issuers.Load().all {
		if is.cfg.Issuer == iss {
			return Issuer{Name: is.name, Config: is.cfg, JWS: is.trusts[0], Opaque: is.trusts[1]}, true
		}
	}
	return Issuer{}, false
}
