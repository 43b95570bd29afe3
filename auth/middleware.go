package auth

import (
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/plantstore/plantstore/auth/dpop"
	"github.com/plantstore/plantstore/observability"
)

// realm is the protection space named in every challenge.
const realm = "plantstore"

// Middleware returns gin middleware that admits only requests whose
// credential v accepts ([Verifier.Authenticate]).
//
// On failure it sets WWW-Authenticate (Retry-After for a 429 or a 503), records
// the reason (and the subject and issuer when known) on the access log
// entry and in m, pushes the *[Error], or the *[RateLimitError] of a
// caller over its rate ([Options].RateLimit), with c.Error and aborts; it
// writes no body, which is left to the error renderer. On success it
// stores the [Identity] for the handlers after it (see [FromGin]) and
// records the subject and issuer on the access log entry. It never logs
// the header or the token. m reports the fill of v's caches from then on.
// With server nonces ([Options].Nonces), every response to a DPoP request
// (one with a DPoP header or the DPoP scheme) carries the current nonce in
// a DPoP-Nonce header, refused or not.
func Middleware(v *Verifier, m *Metrics) gin.HandlerFunc {
	m.watch(v) // the fill gauges of v's caches
	return func(c *gin.Context) {
		if n := v.opts.Nonces; n != nil && isDPoPRequest(c.Request.Header) {
			c.Header(dpop.NonceHeader, n.Issue(v.now()))
		}
		id, err := v.Authenticate(c.Request)
		if err != nil {
			var ae *Error
			var rl *RateLimitError
			switch {
			case errors.As(err, &ae):
				if ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusServiceUnavailable {
					c.Header("Retry-After", retryAfter(ae.RetryAfter))
				} else {
					for _, ch := range v.challenges(c.Request, ae) {
						c.Writer.Header().Add("WWW-Authenticate", ch)
					}
				}
				entry := observability.Annotate(c)
				entry.SetAuthFailure(string(ae.Reason))
				entry.SetClaimRule(ae.Claim)
				entry.SetIssuer(ae.Issuer)
				if ae.Subject != "" {
					entry.SetSubject(ae.Subject)
				}
				m.Failure(ae)
			case errors.As(err, &rl):
				// A caller over its rate: known, and not an authentication
				// failure.
				c.Header("Retry-After", rl.RetryAfterHeader())
				entry := observability.Annotate(c)
				entry.SetIssuer(rl.Issuer)
				entry.SetSubject(rl.Subject)
			}
			_ = c.Error(err)
			c.Abort()
			return
		}
		entry := observability.Annotate(c)
		if entry != nil {
			// Behind the access log's middleware the identity rides on its
			// entry: cheaper than a copy of the request for a new context.
			entry.SetCaller(id)
		} else {
			c.Request = c.Request.WithContext(NewContext(c.Request.Context(), id))
		}
		entry.SetIssuer(id.Issuer)
		entry.SetSubject(id.Subject)
		if id.Introspected {
			entry.SetIntrospected()
		}
		if a := id.audit; len(a.reasons) > 0 {
			// Accepted: a rule the issuer audits would have refused it.
			entry.SetAudit(a.String())
			entry.SetClaimRule(a.claim)
			m.Audit(id, v.now())
		}
		c.Next()
	}
}

// isDPoPRequest reports whether h is of a DPoP request: a DPoP header, or
// an Authorization header of the DPoP scheme.
func isDPoPRequest(h http.Header) bool {
	if len(h.Values("DPoP")) > 0 {
		return true
	}
	scheme, _, _ := strings.Cut(h.Get("Authorization"), " ")
	return strings.EqualFold(scheme, "DPoP")
}

// challenges returns the WWW-Authenticate values for e: one challenge,
// of the scheme the request used (Bearer, RFC 6750 §3, or DPoP, RFC 9449
// §7.1); for a request without a credential, Bearer unless every issuer
// requires DPoP. It names the resource metadata (RFC 9728 §5.1), where a
// client finds whether DPoP is accepted. The pieces come from the closed
// Reason set, the configuration or a host that edge.Origin
// checked, so nothing needs escaping.
func (v *Verifier) challenges(r *http.Request, e *Error) []string {
	md := `, resource_metadata="` + v.MetadataURL(r) + `"`
	params := ""
	switch e.Code {
	case "":
	case "insufficient_scope":
		params = `, error="insufficient_scope", scope="` + e.Scope + `"`
	default:
		params = `, error="` + e.Code + `", error_description="` + e.Reason.Description() + `"`
	}
	if e.DPoP || e.Code == "" && !v.bearerAccepted() {
		return []string{`DPoP realm="` + realm + `", algs="` + strings.Join(v.opts.DPoPAlgorithms, " ") + `"` + params + md}
	}
	return []string{`Bearer realm="` + realm + `"` + params + md}
}

// MetadataHandler returns the handler of [ResourceMetadataPath]: the
// document of [Verifier.Metadata] as application/json. It needs no
// credential.
func MetadataHandler(v *Verifier) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Header("Cache-Control", "max-age=60")
		c.JSON(http.StatusOK, v.Metadata(c.Request))
	}
}

// FromGin returns the Identity [Middleware] stored for the request c is
// serving and reports whether there was one: behind the access log's
// middleware ([observability.Middleware]) it is kept on the request's log
// entry, elsewhere in the request context ([FromContext]). Its slices are
// shared with other requests and must not be modified.
func FromGin(c *gin.Context) (Identity, bool) {
	if id, ok := observability.Annotate(c).Caller().(*Identity); ok && id != nil {
		return *id, true
	}
	return FromContext(c.Request.Context())
}
