package auth

import (
	"net/http"
	"time"
)

// Reason is why a request was refused. The set is closed: it is the
// error_description of the WWW-Authenticate challenge, the reason label of
// plantstore_auth_failures_total and the auth_failure log field, so no value
// ever comes from the request.
type Reason string

// The reasons a request is refused.
const (
	ReasonMissing         Reason = "missing"          // no Authorization header
	ReasonMalformed       Reason = "malformed"        // not "Bearer <token>", two headers, or not a JWT
	ReasonTooLarge        Reason = "too_large"        // Authorization header over 8 KiB
	ReasonAlgorithm       Reason = "algorithm"        // alg not in the allow-list (none included)
	ReasonCrit            Reason = "crit"             // crit header present
	ReasonTokenType       Reason = "token_type"       // typ names another kind of JWT, or a type the issuer does not accept
	ReasonUnknownKey      Reason = "unknown_key"      // no key for kid, or several without kid
	ReasonKeysUnavailable Reason = "keys_unavailable" // no usable key set yet
	ReasonBadSignature    Reason = "bad_signature"    // signature does not verify
	ReasonExpired         Reason = "expired"          // exp past
	ReasonMissingExp      Reason = "missing_exp"      // no exp claim
	ReasonNotYetValid     Reason = "not_yet_valid"    // nbf or iat in the future
	ReasonIssuer          Reason = "issuer"           // iss is not the configured issuer
	ReasonUnknownIssuer   Reason = "unknown_issuer"   // iss names no configured issuer
	ReasonAudience        Reason = "audience"         // aud has none of the configured audiences
	ReasonClient          Reason = "client"           // client_id (or, without it, azp) is none of the issuer's clients
	ReasonLifetime        Reason = "lifetime"         // exp further after iat (or now) than the issuer's max lifetime
	ReasonClaim           Reason = "claim"            // a claim rule of the issuer does not hold
	ReasonGroupsOverage   Reason = "groups_overage"   // the token says its groups were left out (Entra ID overage)
	ReasonNoSubject       Reason = "no_subject"       // sub missing or empty
	ReasonClaims          Reason = "claims"           // a claim has the wrong type or range
	ReasonTooManyGroups   Reason = "too_many_groups"  // more groups than -jwt-max-groups
	ReasonScope           Reason = "insufficient_scope"
	ReasonRevoked         Reason = "revoked" // revoked since it was issued: its jti, or a cutoff for its subject, client or issuer

	// The refusals of RFC 9449 (DPoP).
	ReasonDPoPMissing  Reason = "dpop_missing"  // a bound token with no DPoP proof, or several
	ReasonDPoPInvalid  Reason = "dpop_invalid"  // the proof is not a valid DPoP proof JWT
	ReasonDPoPKey      Reason = "dpop_key"      // the proof's key is not the one the token is bound to
	ReasonDPoPTarget   Reason = "dpop_target"   // htm or htu is not this request's
	ReasonDPoPAth      Reason = "dpop_ath"      // ath is not the hash of this token
	ReasonDPoPIat      Reason = "dpop_iat"      // the proof's iat is outside the window
	ReasonDPoPReplay   Reason = "dpop_replay"   // the proof was used before
	ReasonDPoPNonce    Reason = "dpop_nonce"    // the proof carries no server nonce, or a stale or forged one (use_dpop_nonce); a standard client retries with the nonce it is given
	ReasonDPoPQuota    Reason = "dpop_quota"    // no room to remember the proof: its key, or the replica, sent too many (429)
	ReasonDPoPBlocked  Reason = "dpop_blocked"  // too many proofs of the key, or of the caller, failed their signature check lately (429)
	ReasonDPoPBound    Reason = "dpop_bound"    // a bound token as a bearer token, or where DPoP is off
	ReasonDPoPUnbound  Reason = "dpop_unbound"  // the DPoP scheme with a token that is not bound
	ReasonDPoPRequired Reason = "dpop_required" // an unbound token where DPoP is required

	// The refusals of RFC 8705 (certificate-bound tokens).
	ReasonCertBound    Reason = "cert_bound"    // cnf.x5t#S256 where no certificate is read: no header configured, or the issuer's mtls off
	ReasonCertMissing  Reason = "cert_missing"  // a certificate-bound token without a certificate that parses, or an unbound token where mtls is required
	ReasonCertMismatch Reason = "cert_mismatch" // the certificate is not the one the token is bound to

	// A binding the service cannot check (RFC 7800 cnf), refused rather
	// than taken as a bearer token.
	ReasonUnknownBinding Reason = "unknown_binding" // another cnf member than jkt and x5t#S256

	// The refusals of introspection (RFC 7662).
	ReasonInactive                 Reason = "inactive"                  // the issuer says the token is not active
	ReasonIntrospectionUnavailable Reason = "introspection_unavailable" // the issuer could not be asked: over the bound of calls, down or slow (503)
)

// Reasons returns every Reason, in a fixed order.
func Reasons() []Reason {
	return []Reason{
		ReasonMissing, ReasonMalformed, ReasonTooLarge, ReasonAlgorithm,
		ReasonCrit, ReasonTokenType, ReasonUnknownKey, ReasonKeysUnavailable,
		ReasonBadSignature, ReasonExpired, ReasonMissingExp, ReasonNotYetValid,
		ReasonIssuer, ReasonUnknownIssuer, ReasonAudience, ReasonClient,
		ReasonLifetime, ReasonClaim, ReasonGroupsOverage, ReasonNoSubject, ReasonClaims, ReasonTooManyGroups,
		ReasonScope,
		ReasonDPoPMissing, ReasonDPoPInvalid, ReasonDPoPKey, ReasonDPoPTarget,
		ReasonDPoPAth, ReasonDPoPIat, ReasonDPoPReplay, ReasonDPoPNonce, ReasonDPoPQuota, ReasonDPoPBlocked,
		ReasonDPoPBound, ReasonDPoPUnbound, ReasonDPoPRequired,
		ReasonCertBound, ReasonCertMissing, ReasonCertMismatch,
		ReasonUnknownBinding,
		ReasonInactive, ReasonIntrospectionUnavailable,
		ReasonRevoked,
	}
}

// Description returns a short human description of r, used as the
// error_description of the WWW-Authenticate challenge. It is plain ASCII
// without double quotes or backslashes, so it needs no escaping inside a
// quoted-string, and it never carries request-derived text.
func (r Reason) Description() string {
	switch r {
	case ReasonMissing:
		return "no bearer token"
	case ReasonMalformed:
		return "malformed bearer token"
	case ReasonTooLarge:
		return "authorization header too large"
	case ReasonAlgorithm:
		return "signing algorithm not allowed"
	case ReasonCrit:
		return "critical header not supported"
	case ReasonTokenType:
		return "not an access token of an accepted type"
	case ReasonUnknownKey:
		return "unknown signing key"
	case ReasonKeysUnavailable:
		return "verification keys unavailable"
	case ReasonBadSignature:
		return "invalid signature"
	case ReasonExpired:
		return "token expired"
	case ReasonMissingExp:
		return "token has no expiry"
	case ReasonNotYetValid:
		return "token not yet valid"
	case ReasonIssuer:
		return "issuer not accepted"
	case ReasonUnknownIssuer:
		return "issuer not known"
	case ReasonAudience:
		return "audience not accepted"
	case ReasonClient:
		return "client not accepted"
	case ReasonLifetime:
		return "token lifetime too long"
	case ReasonClaim:
		return "claim not accepted"
	case ReasonGroupsOverage:
		return "token left out the groups of the caller"
	case ReasonNoSubject:
		return "token has no subject"
	case ReasonClaims:
		return "claim has the wrong type or value"
	case ReasonTooManyGroups:
		return "too many groups"
	case ReasonScope:
		return "insufficient scope"
	case ReasonDPoPMissing:
		return "DPoP proof missing"
	case ReasonDPoPInvalid:
		return "invalid DPoP proof"
	case ReasonDPoPKey:
		return "DPoP proof key does not match the token"
	case ReasonDPoPTarget:
		return "DPoP proof is for another request"
	case ReasonDPoPAth:
		return "DPoP proof is for another token"
	case ReasonDPoPIat:
		return "DPoP proof too old or in the future"
	case ReasonDPoPReplay:
		return "DPoP proof already used"
	case ReasonDPoPNonce:
		return "DPoP proof needs the nonce of the DPoP-Nonce header"
	case ReasonDPoPQuota:
		return "too many DPoP proofs, retry later"
	case ReasonDPoPBlocked:
		return "too many DPoP proofs failed their signature check, retry later"
	case ReasonDPoPBound:
		return "DPoP-bound token must use the DPoP scheme"
	case ReasonDPoPUnbound:
		return "token is not DPoP-bound"
	case ReasonDPoPRequired:
		return "DPoP-bound token required"
	case ReasonCertBound:
		return "certificate-bound token not accepted"
	case ReasonCertMissing:
		return "client certificate bound to the token missing"
	case ReasonCertMismatch:
		return "client certificate does not match the token"
	case ReasonUnknownBinding:
		return "token bound in a way this service cannot check"
	case ReasonInactive:
		return "token not active"
	case ReasonIntrospectionUnavailable:
		return "token issuer unavailable, retry later"
	case ReasonRevoked:
		return "token revoked"
	}
	return "invalid token"
}

// Error is a refused credential. Code is the error code of RFC 6750
// ("invalid_token", "invalid_request" or "insufficient_scope"; empty for a
// missing credential) or RFC 9449 ("invalid_dpop_proof"), Scope the
// required scope for insufficient_scope. DPoP tells that the challenge is
// of the DPoP scheme (RFC 9449 §7.1) rather than Bearer.
type Error struct {
	Status int
	Code   string
	DPoP   bool
	Reason Reason
	Scope  string
	// Subject is the token's sub when the token was valid and only lacked
	// the required scope: the caller is known, for the access log.
	Subject string
	// Issuer is the name of the issuer the token was routed to ("" for the
	// unnamed one); routed tells whether it was routed at all.
	Issuer string
	routed bool
	// Claim is the path of the claim rule that refused the token, for
	// the access log: the rule's, never the claim's value.
	Claim string
	// RetryAfter is how long to wait before asking again, for a 429 or
	// a 503.
	RetryAfter time.Duration
}

// Error returns a short description that never contains the token.
func (e *Error) Error() string {
	return "auth: " + string(e.Reason)
}

// HTTPStatus returns the status the API answers with: 401 or 403, 429
// for [ReasonDPoPQuota] and [ReasonDPoPBlocked], or 503 for
// [ReasonIntrospectionUnavailable].
func (e *Error) HTTPStatus() int {
	if e.Status == 0 {
		return http.StatusUnauthorized
	}
	return e.Status
}

// Unavailable returns the 503 refusal of a token its issuer could not be
// asked about now, to be asked again after retry: never a verdict on the
// token, so never a 401.
func Unavailable(retry time.Duration) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Reason: ReasonIntrospectionUnavailable, RetryAfter: retry}
}
