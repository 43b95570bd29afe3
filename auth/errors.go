package auth

import "net/http"

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
	ReasonUnknownKey      Reason = "unknown_key"      // no key for kid, or several without kid
	ReasonKeysUnavailable Reason = "keys_unavailable" // no usable key set yet
	ReasonBadSignature    Reason = "bad_signature"    // signature does not verify
	ReasonExpired         Reason = "expired"          // exp missing or past
	ReasonNotYetValid     Reason = "not_yet_valid"    // nbf or iat in the future
	ReasonIssuer          Reason = "issuer"           // iss is not the configured issuer
	ReasonAudience        Reason = "audience"         // aud has none of the configured audiences
	ReasonNoSubject       Reason = "no_subject"       // sub missing or empty
	ReasonClaims          Reason = "claims"           // a claim has the wrong type
	ReasonScope           Reason = "insufficient_scope"
)

// Reasons returns every Reason, in a fixed order.
func Reasons() []Reason {
	return []Reason{
		ReasonMissing, ReasonMalformed, ReasonTooLarge, ReasonAlgorithm,
		ReasonCrit, ReasonUnknownKey, ReasonKeysUnavailable, ReasonBadSignature,
		ReasonExpired, ReasonNotYetValid, ReasonIssuer, ReasonAudience,
		ReasonNoSubject, ReasonClaims, ReasonScope,
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
	case ReasonUnknownKey:
		return "unknown signing key"
	case ReasonKeysUnavailable:
		return "verification keys unavailable"
	case ReasonBadSignature:
		return "invalid signature"
	case ReasonExpired:
		return "token expired"
	case ReasonNotYetValid:
		return "token not yet valid"
	case ReasonIssuer:
		return "issuer not accepted"
	case ReasonAudience:
		return "audience not accepted"
	case ReasonNoSubject:
		return "token has no subject"
	case ReasonClaims:
		return "claim has the wrong type"
	case ReasonScope:
		return "insufficient scope"
	}
	return "invalid token"
}

// Error is a refused credential. Code is the RFC 6750 error code
// ("invalid_token", "invalid_request" or "insufficient_scope"; empty for a
// missing credential), Scope the required scope for insufficient_scope.
type Error struct {
	Status int
	Code   string
	Reason Reason
	Scope  string
	// Subject is the token's sub when the token was valid and only lacked
	// the required scope: the caller is known, for the access log.
	Subject string
}

// Error returns a short description that never contains the token.
func (e *Error) Error() string {
	return "auth: " + string(e.Reason)
}

// HTTPStatus returns the status the API answers with: 401 or 403.
func (e *Error) HTTPStatus() int {
	if e.Status == 0 {
		return http.StatusUnauthorized
	}
	return e.Status
}
