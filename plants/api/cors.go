package api

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
)

// CORS is the policy for browser callers on other origins (Fetch
// standard, "CORS protocol"): the exact origins allowed to read the API's
// responses, or any origin. It never allows credentials mode
// (Access-Control-Allow-Credentials is never sent): the token travels in
// the Authorization header, which a page sets itself, never in a cookie.
//
// It is written here rather than taken from github.com/rs/cors (v1.11.1),
// whose answers differ from this API's in ways its options cannot change:
// a preflight from an origin that is not allowed gets its success status
// (204) without headers, where this API answers 403 in the Error shape;
// Access-Control-Allow-Methods echoes the method asked for, not GET, HEAD;
// Access-Control-Allow-Headers echoes the request's list as it came, and a
// preflight that asks for one header not allowed gets no CORS header at
// all; and it answers preflights on every path, where an unknown path is
// 404 here.
type CORS struct {
	// origins are the allowed origins, each as a browser serializes it;
	// nil with any.
	origins map[string]bool
	// any allows every origin, answered with Access-Control-Allow-Origin: *.
	any bool
	// list is the configured list, for String.
	list []string
}

// The CORS header values, shared by every response: slices capped so that
// an append copies instead of writing into them.
var (
	corsAnyOrigin     = []string{"*"}
	corsVaryOrigin    = []string{"Origin"}
	corsExposeHeaders = []string{"Link, WWW-Authenticate, DPoP-Nonce, X-Request-ID, Retry-After"}
	corsAllowMethods  = []string{"GET, HEAD"}
	corsMaxAge        = []string{"600"}
)

// corsRequestHeaders are the request headers a preflight may be allowed,
// in the order Access-Control-Allow-Headers names them.
var corsRequestHeaders = [...]string{"Authorization", "DPoP", "traceparent", "tracestate", "X-Request-ID"}

// errOriginNotAllowed answers a preflight from an origin that is not
// allowed. Its message names no origin: the log and the response stay free
// of what the caller sent.
var errOriginNotAllowed = &statusError{status: http.StatusForbidden, msg: "origin not allowed"}

// NewCORS returns the policy allowing origins: each an exact origin,
// scheme://host or scheme://host:port as a browser sends it in Origin
// (lower case, no path, not even a trailing slash, no default port), or
// the one item "*" for any origin. An empty list is an error: no policy is
// a nil *CORS.
func NewCORS(origins []string) (*CORS, error) {
	if len(origins) == 0 {
		return nil, errors.New("no origin")
	}
	p := &CORS{list: origins}
	if len(origins) == 1 && origins[0] == "*" {
		p.any = true
		return p, nil
	}
	p.origins = make(map[string]bool, len(origins))
	for _, o := range origins {
		if o == "*" {
			return nil, errors.New(`"*" allows every origin: give it alone, or list exact origins`)
		}
		if err := checkOrigin(o); err != nil {
			return nil, fmt.Errorf("origin %q: %w", o, err)
		}
		p.origins[o] = true
	}
	return p, nil
}

// checkOrigin reports why s is not an origin as browsers serialize it.
func checkOrigin(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Scheme == "" || u.Opaque != "" || !strings.Contains(s, "://"):
		return errors.New("want scheme://host[:port], such as https://app.example.com")
	case u.User != nil:
		return errors.New("an origin has no user information")
	case u.Path != "" || u.RawPath != "":
		return errors.New("an origin has no path, not even a trailing slash")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(s, "?#"):
		return errors.New("an origin has no query or fragment")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("no host")
	case s != u.Scheme+"://"+u.Host:
		return errors.New("write the scheme in lower case, as browsers send it")
	}
	host := u.Hostname()
	if strings.HasPrefix(u.Host, "[") {
		if ip := net.ParseIP(host); ip == nil || ip.To4() != nil {
			return errors.New("not an IPv6 address between the brackets")
		}
	} else if strings.ToLower(host) != host {
		return errors.New("write the host in lower case, as browsers send it")
	} else if strings.Trim(host, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" {
		return errors.New("the host may hold only a-z, 0-9, '.' and '-' (a name that is not ASCII in its xn-- form)")
	}
	if port := u.Port(); port != "" || strings.HasSuffix(u.Host, ":") {
		n, err := strconv.Atoi(port)
		switch {
		case err != nil || n < 1 || n > 65535 || port[0] == '0':
			return errors.New("want a port from 1 to 65535")
		case u.Scheme == "https" && n == 443 || u.Scheme == "http" && n == 80:
			return fmt.Errorf("leave out the default port %d: browsers do", n)
		}
	}
	return nil
}

// String returns the origins as configured, a comma list.
func (p *CORS) String() string {
	if p == nil {
		return ""
	}
	return strings.Join(p.list, ",")
}

// allowed returns the Access-Control-Allow-Origin value for r: r's one
// Origin if it is allowed, or "*" when every origin is. ok is false when r
// has no Origin, more than one, or one not allowed.
func (p *CORS) allowed(r *http.Request) (value []string, ok bool) {
	origin := r.Header["Origin"]
	if len(origin) != 1 || origin[0] == "" {
		return nil, false
	}
	if p.any {
		return corsAnyOrigin[:1:1], true
	}
	if p.origins[origin[0]] {
		return origin[:1:1], true
	}
	return nil, false
}

// isPreflight reports whether r is a CORS preflight: OPTIONS with an Origin
// and an Access-Control-Request-Method. Another OPTIONS is a method the
// API does not serve.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && len(r.Header["Access-Control-Request-Method"]) > 0
}

// addVary adds one, a one-element slice the caller keeps, to the Vary
// header of h, keeping what it names; a header that has none takes one
// itself, without an allocation.
func addVary(h http.Header, one []string) {
	if v := h["Vary"]; v != nil {
		h["Vary"] = append(v, one[0])
		return
	}
	h["Vary"] = one[:1:1]
}

// Headers returns the middleware that adds, to every response but a
// preflight's, Vary: Origin and, for an allowed origin,
// Access-Control-Allow-Origin and Access-Control-Expose-Headers (Link,
// WWW-Authenticate, DPoP-Nonce, X-Request-ID, Retry-After), so that a page
// can read a 200 and the refusals (401, 403, 429, 503) alike. They are set
// before the handlers run, so every answer carries them, whoever writes
// it. Preflights are [CORS.Preflight]'s.
func (p *CORS) Headers() gin.HandlerFunc {
	return func(c *gin.Context) {
		if isPreflight(c.Request) {
			return
		}
		h := c.Writer.Header()
		addVary(h, corsVaryOrigin)
		if origin, ok := p.allowed(c.Request); ok {
			h["Access-Control-Allow-Origin"] = origin
			h["Access-Control-Expose-Headers"] = corsExposeHeaders[:1:1]
		}
	}
}

// Preflight is the handler of OPTIONS on the routes browsers may call. A
// preflight from an allowed origin gets 204 with
// Access-Control-Allow-Origin, Access-Control-Allow-Methods: GET, HEAD,
// Access-Control-Allow-Headers, Access-Control-Max-Age: 600 and Vary:
// Origin; one from another origin gets 403 in the Error shape without any
// of them. It needs no credential and checks none. An OPTIONS request that
// is no preflight is a method not allowed, as [MethodNotAllowed] answers.
//
// Access-Control-Allow-Headers names, of Authorization, DPoP, traceparent,
// tracestate and X-Request-ID, those that Access-Control-Request-Headers
// asks for (compared without regard to case, spelled and ordered as here),
// or all of them when it asks for none; it is left out when the preflight
// asks only for others. A header asked for
// and not named makes the browser refuse the request, as a method other
// than GET or HEAD does.
func (p *CORS) Preflight(c *gin.Context) {
	if !isPreflight(c.Request) {
		MethodNotAllowed(c)
		return
	}
	origin, ok := p.allowed(c.Request)
	if !ok {
		c.Error(errOriginNotAllowed)
		c.Abort()
		return
	}
	h := c.Writer.Header()
	h["Access-Control-Allow-Origin"] = origin
	h["Access-Control-Allow-Methods"] = corsAllowMethods[:1:1]
	if allow := allowHeaders(c.Request.Header["Access-Control-Request-Headers"]); allow != "" {
		h["Access-Control-Allow-Headers"] = []string{allow}
	}
	h["Access-Control-Max-Age"] = corsMaxAge[:1:1]
	addVary(h, corsVaryOrigin)
	c.Status(http.StatusNoContent)
	c.Writer.WriteHeaderNow()
}

// allowHeaders returns the Access-Control-Allow-Headers value for the
// Access-Control-Request-Headers values asked (one list, or several when a
// proxy split it): the headers of corsRequestHeaders asked for, in their
// order there, or all of them when none is asked for; "" when only others
// are.
func allowHeaders(asked []string) string {
	var (
		named    [len(corsRequestHeaders)]bool
		askedAny bool
	)
	for _, v := range asked {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.Trim(name, " \t")
			if name == "" {
				continue
			}
			askedAny = true
			for i, h := range corsRequestHeaders {
				if strings.EqualFold(name, h) {
					named[i] = true
				}
			}
		}
	}
	if !askedAny {
		return strings.Join(corsRequestHeaders[:], ", ")
	}
	var b strings.Builder
	for i, h := range corsRequestHeaders {
		if named[i] {
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			b.WriteString(h)
		}
	}
	return b.String()
}
