package auth

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/plantstore/plantstore/observability"
)

// realm is the protection space named in every challenge.
const realm = "plantstore"

// Middleware returns gin middleware that admits only requests bearing a
// token v accepts (RFC 6750 section 2.1).
//
// The Authorization header must appear once and read "Bearer <token>" with
// the scheme in any case, one or more spaces, and a token of RFC 6750 b64token
// characters. A header over 8 KiB is refused without being parsed. Two
// Authorization headers are refused as a malformed credential (401
// invalid_token), like any other malformed header.
//
// On failure it sets WWW-Authenticate, records the reason on the access log
// entry and in v's metrics, pushes the *[Error] with c.Error and aborts; it
// writes no body, which is left to the error renderer. On success it stores
// the [Identity] in the request context (see [FromContext]) and records the
// subject on the access log entry. It never logs the header or the token.
func Middleware(v *Verifier) gin.HandlerFunc {
	return func(c *gin.Context) {
		e, err := authenticate(c.Request, v)
		if err != nil {
			c.Header("WWW-Authenticate", challenge(err))
			observability.Annotate(c).SetAuthFailure(string(err.Reason))
			if err.Subject != "" {
				observability.Annotate(c).SetSubject(err.Subject)
			}
			v.m.Failure(err.Reason)
			_ = c.Error(err)
			c.Abort()
			return
		}
		// The shared entry goes into the context as it is: FromContext
		// copies its identity, PrincipalsFromContext reads its principals.
		c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), contextKey{}, e))
		observability.Annotate(c).SetSubject(e.id.Subject)
		c.Next()
	}
}

// LimitSubjects returns gin middleware, for after [Middleware], that
// applies l per authenticated subject: a caller over its rate gets the
// *[RateLimitError] (429) pushed with c.Error, after Retry-After is set.
func LimitSubjects(l *RateLimit) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := l.Allow(subjectFromContext(c.Request.Context())); err != nil {
			var rl *RateLimitError
			if errors.As(err, &rl) {
				c.Header("Retry-After", rl.RetryAfterHeader())
			}
			_ = c.Error(err)
			c.Abort()
		}
	}
}

// subjectFromContext returns the subject of the identity in ctx, without
// the copy of groups and scopes that FromContext makes.
func subjectFromContext(ctx context.Context) string {
	switch x := ctx.Value(contextKey{}).(type) {
	case *verified:
		return x.id.Subject
	case Identity:
		return x.Subject
	}
	return ""
}

// authenticate extracts the bearer token of r and verifies it.
func authenticate(r *http.Request, v *Verifier) (*verified, *Error) {
	token, err := bearerToken(r.Header)
	if err != nil {
		return nil, err
	}
	if len(token) > maxCredential {
		return nil, invalidToken(ReasonTooLarge)
	}
	// A cached token passed the syntax check when it was first seen, so a
	// hit skips it.
	e, h, gen := v.lookup(token)
	if e != nil {
		return e, nil
	}
	if !isB64Token(token) {
		return nil, invalidToken(ReasonMalformed)
	}
	return v.check(r.Context(), token, h, gen)
}

// bearerToken returns the token of the one Authorization header of h,
// which the caller must still check with isB64Token.
func bearerToken(h http.Header) (string, *Error) {
	values := h.Values("Authorization")
	switch len(values) {
	case 0:
		return "", &Error{Status: http.StatusUnauthorized, Reason: ReasonMissing}
	case 1:
	default:
		return "", invalidToken(ReasonMalformed)
	}
	v := values[0]
	if len(v) > maxCredential {
		return "", invalidToken(ReasonTooLarge)
	}
	const scheme = "Bearer "
	if len(v) <= len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return "", invalidToken(ReasonMalformed)
	}
	// RFC 6750 section 2.1: credentials = "Bearer" 1*SP b64token.
	token := strings.TrimLeft(v[len(scheme):], " ")
	if token == "" {
		return "", invalidToken(ReasonMalformed)
	}
	return token, nil
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

// challenge returns the WWW-Authenticate value for e. Every piece comes
// from the closed Reason set or the configuration, never from the request,
// so nothing needs escaping.
func challenge(e *Error) string {
	switch e.Code {
	case "":
		return `Bearer realm="` + realm + `"`
	case "insufficient_scope":
		return `Bearer realm="` + realm + `", error="insufficient_scope", scope="` + e.Scope + `"`
	}
	return `Bearer realm="` + realm + `", error="` + e.Code + `", error_description="` + e.Reason.Description() + `"`
}
