package observability

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The request headers Middleware reads, in canonical form, so that lookups
// need not canonicalize them again.
const (
	requestIDHeader    = "X-Request-Id"
	forwardedForHeader = "X-Forwarded-For"
	userAgentHeader    = "User-Agent"
)

// headerValue is h.Get(key) for a key in canonical form, which it need not
// canonicalize again.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// requestState is what Middleware keeps per request; it is pooled, so a
// request costs no allocation for it.
type requestState struct {
	w      entryWriter
	access accessEntry
	line   []byte
	fields [12]zap.Field
}

// Middleware returns the gin middleware that must come first in the chain.
// For each request it:
//
//   - sets X-Request-ID on the response, before the handlers run: the
//     caller's value when it is 1 to 128 characters of [A-Za-z0-9._-],
//     else 32 new random hex digits;
//   - makes [Annotate] work for the handlers;
//   - records plantstore_http_requests_total,
//     plantstore_http_request_duration_seconds and
//     plantstore_http_requests_in_flight on reg, labelled with the method
//     (one of the standard methods or OTHER), the route template (or
//     "unmatched") and the status code, so no label comes from the request;
//   - writes one access log line, msg "request", at Info below status 500
//     and at Error from 500 on, with method, route, path (the URL path: the
//     query string is never logged, so no credential or parameter in it is
//     either), status, duration (seconds), bytes (body bytes written),
//     request_id, remote_ip, user_agent, and sub, auth_failure and plants
//     when a handler set them. No request header other than
//     X-Request-ID, User-Agent and X-Forwarded-For is read.
//
// remote_ip is the peer's address, unless the peer is within trusted: then
// it is the rightmost X-Forwarded-For entry that is not within trusted (see
// [ParseTrustedProxies]). With no trusted prefixes X-Forwarded-For is
// ignored.
//
// A panic passing through is still logged and counted (at Error, status 500
// when nothing was written) and then continues up the stack.
//
// gin's trailing-slash and fixed-path redirects are answered before any
// middleware runs, so they are neither logged nor counted; an engine using
// Middleware should turn them off.
func Middleware(log *zap.Logger, reg prometheus.Registerer, trusted []netip.Prefix) gin.HandlerFunc {
	if log == nil {
		log = zap.NewNop()
	}
	m := newHTTPMetrics(reg)
	trusted = slices.Clone(trusted)
	fast := accessOutput(log)
	pool := &sync.Pool{New: func() any { return new(requestState) }}

	return func(c *gin.Context) {
		start := time.Now()
		m.inFlight.Inc()

		// The caller's header value is echoed by sharing its slice, capped
		// so that an Add on the response copies instead of writing into
		// the request; only a new ID costs a slice.
		var id string
		if v := c.Request.Header[requestIDHeader]; len(v) > 0 && validRequestID(v[0]) {
			id = v[0]
			c.Writer.Header()[requestIDHeader] = v[:1:1]
		} else {
			id = newRequestID()
			c.Writer.Header()[requestIDHeader] = []string{id}
		}

		st := pool.Get().(*requestState)
		st.w.ResponseWriter = c.Writer
		st.w.entry = Entry{}
		c.Writer = &st.w

		panicking := true
		defer func() {
			w := st.w.ResponseWriter
			c.Writer = w
			elapsed := time.Since(start)

			status, size := w.Status(), w.Size()
			if panicking && !w.Written() {
				status = http.StatusInternalServerError
			}
			size = max(size, 0)
			route := c.FullPath()
			if route == "" {
				route = st.w.entry.route
			}
			if route == "" {
				route = "unmatched"
			}
			s := m.series(methodLabel(c.Request.Method), route, status)
			s.requests.Inc()
			s.duration.Observe(elapsed.Seconds())

			lvl := zapcore.InfoLevel
			if status >= 500 || panicking {
				lvl = zapcore.ErrorLevel
			}
			a := &st.access
			*a = accessEntry{
				method:    c.Request.Method,
				route:     route,
				path:      c.Request.URL.Path,
				status:    status,
				duration:  elapsed.Seconds(),
				bytes:     size,
				requestID: id,
				remoteIP:  clientIP(c.Request.RemoteAddr, c.Request.Header[forwardedForHeader], trusted),
				userAgent: headerValue(c.Request.Header, userAgentHeader),
				Entry:     st.w.entry,
			}
			if fast != nil {
				if fast.Enabled(lvl) {
					st.line = a.appendJSON(st.line[:0], lvl, start.Add(elapsed))
					_, _ = fast.out.Write(st.line)
				}
			} else if ce := log.Check(lvl, accessMsg); ce != nil {
				f := a.fields(st.fields[:0])
				ce.Write(f...)
				clear(f)
			}
			*a = accessEntry{}
			if cap(st.line) > 4<<10 { // a huge user agent grew it
				st.line = nil
			}

			m.inFlight.Dec()
			st.w.ResponseWriter = nil
			st.w.entry = Entry{}
			pool.Put(st)
		}()

		c.Next()
		panicking = false
	}
}

// RequestID returns the X-Request-ID of the request c is serving, as
// [Middleware] set it on the response, or "" without Middleware.
func RequestID(c *gin.Context) string {
	if v := c.Writer.Header()[requestIDHeader]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Unwrap returns the writer underneath, for [http.ResponseController].
func (w *entryWriter) Unwrap() http.ResponseWriter {
	return w.ResponseWriter
}

// validRequestID reports whether a caller's X-Request-ID is 1 to 128
// characters of [A-Za-z0-9._-], which is safe to echo and to log.
func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '.', b == '_', b == '-':
		default:
			return false
		}
	}
	return true
}

// newRequestID returns 128 random bits as 32 hex digits. The runtime's
// per-thread ChaCha8 source behind math/rand/v2 is lock-free and cheap, and
// an ID needs to be unique, not secret.
func newRequestID() string {
	var raw [16]byte
	binary.LittleEndian.PutUint64(raw[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(raw[8:], rand.Uint64())
	var out [32]byte
	hex.Encode(out[:], raw[:])
	return string(out[:])
}
