// Package observability owns what operators see of the service: the zap
// logger and its output, the access log line, the HTTP metrics, tracing, the
// registry with the Go, process and build collectors, and the admin
// listener (/metrics, /livez and /healthz, /readyz, /openapi.json, /docs,
// pprof).
package observability

import "github.com/gin-gonic/gin"

// Entry collects what the handlers of one request learn about it, for that
// request's access log line. Its zero value logs nothing extra. The methods
// are safe on a nil *Entry, so callers never check.
type Entry struct {
	route       string
	issuer      string
	subject     string
	authFailure string
	claimRule   string
	audit       string
	plants      int
	hasPlants   bool
	// introspected: the issuer was asked about the token (RFC 7662).
	introspected bool
	// caller is what the auth middleware learned of the caller, for the
	// handlers after it: held here, it spares a copy of the request made
	// only to carry it in a new context.
	caller any
}

// SetCaller keeps v, what authentication learned of the caller, with the
// request for the handlers after it (see [Entry.Caller]); it is never
// logged. v should be a pointer, which an interface holds without
// allocating.
func (e *Entry) SetCaller(v any) {
	if e != nil {
		e.caller = v
	}
}

// Caller returns what [Entry.SetCaller] kept, or nil.
func (e *Entry) Caller() any {
	if e == nil {
		return nil
	}
	return e.caller
}

// SetRoute records the route template of a request that gin matched to no
// handler, such as a known path with another method (gin's NoMethod), so
// its metrics and log line name that route instead of "unmatched". template
// must be a registered route, never a value taken from the request.
func (e *Entry) SetRoute(template string) {
	if e != nil {
		e.route = template
	}
}

// SetIssuer records the name of the issuer that vouched for the caller
// (logged as "iss"); the unnamed issuer of the flags is left out.
func (e *Entry) SetIssuer(name string) {
	if e != nil {
		e.issuer = name
	}
}

// SetSubject records the authenticated subject (logged as "sub").
func (e *Entry) SetSubject(sub string) {
	if e != nil {
		e.subject = sub
	}
}

// SetIntrospected records that the caller's issuer was asked about its
// token rather than its signature verified (logged as
// "introspected":true).
func (e *Entry) SetIntrospected() {
	if e != nil {
		e.introspected = true
	}
}

// SetAuthFailure records why the credential was refused (logged as
// "auth_failure"). reason comes from a closed set.
func (e *Entry) SetAuthFailure(reason string) {
	if e != nil {
		e.authFailure = reason
	}
}

// SetClaimRule records the path of the claim rule that refused the
// credential (logged as "claim_rule"): a path from the configuration,
// never a claim's value.
func (e *Entry) SetClaimRule(path string) {
	if e != nil {
		e.claimRule = path
	}
}

// SetAudit records the refusals that rules in audit mode would have made
// of an accepted credential (logged as "audit"), reasons joined by
// commas.
func (e *Entry) SetAudit(reasons string) {
	if e != nil {
		e.audit = reasons
	}
}

// SetPlants records how many plants the response carried (logged as
// "plants").
func (e *Entry) SetPlants(n int) {
	if e != nil {
		e.plants, e.hasPlants = n, true
	}
}

// entryWriter carries the request's Entry alongside gin's writer, so that
// Annotate finds it without allocating (gin's c.Set allocates a map).
type entryWriter struct {
	gin.ResponseWriter
	entry Entry
}

// Annotate returns the Entry of the request c is serving, or nil (which is
// safe to use) when the request did not pass through [Middleware].
func Annotate(c *gin.Context) *Entry {
	if w, ok := c.Writer.(*entryWriter); ok {
		return &w.entry
	}
	return nil
}
