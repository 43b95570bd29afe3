package observability

import (
	"context"
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
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap/zapcore"

	"github.com/plantstore/plantstore/auth/edge"
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
	span   trace.Span // the server span, with tracing on
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
//     plantstore_http_requests_in_flight in m, labelled with the method
//     (one of the standard methods or OTHER), the route template (or
//     "unmatched") and the status code, so no label comes from the request;
//   - writes one line to access, msg "request", at Info below status 500
//     and at Error from 500 on, with method, route, path (the URL path: the
//     query string is never logged, so no credential or parameter in it is
//     either), status, duration (seconds), bytes (body bytes written),
//     request_id, remote_ip, user_agent, and iss, sub, auth_failure and
//     plants when a handler set them, and trace_id and span_id when
//     tracing is on. No request header other than X-Request-ID,
//     User-Agent, X-Forwarded-For and, with tracing on, traceparent and
//     tracestate is read;
//   - with tracing on (tr enabled, see [NewTracing]), makes the request's
//     server span, the child of the caller's W3C traceparent when it has a
//     valid one (its tracestate dropped when over 512 bytes), named
//     "GET /plants" (the method alone for an unmatched path). Whether it is
//     sampled is the configured sampler's decision, which follows the
//     traceparent's sampled flag (parentbased_* samplers) only when the peer
//     is within trusted: a public caller's trace is continued, but sampled
//     as a trace that starts here would be. It carries
//     http.request.method, http.route, http.response.status_code,
//     url.path, url.scheme, client.address (remote_ip), user_agent.original,
//     network.protocol.version, plantstore.request_id, plantstore.plants and
//     plantstore.auth_failure; enduser.id and plantstore.issuer only with
//     [TracingOptions].Subject. The span never carries a request header
//     other than User-Agent, so never a token. A sampled span is in the
//     request's context, for the handlers' child spans, and its trace and
//     span ids are the exemplar of the duration observation.
//
// remote_ip is the peer's address, unless the peer is within trusted: then
// it is the rightmost X-Forwarded-For entry that is not within trusted (see
// [edge.ParseTrustedProxies]). With no trusted prefixes X-Forwarded-For is
// ignored.
//
// A panic passing through is still logged and counted (at Error, status 500
// when nothing was written) and then continues up the stack.
//
// gin's trailing-slash and fixed-path redirects are answered before any
// middleware runs, so they are neither logged nor counted; an engine using
// Middleware should turn them off.
func Middleware(access *AccessLog, m *HTTPMetrics, trusted []netip.Prefix, tr *Tracing) gin.HandlerFunc {
	trusted = slices.Clone(trusted)
	pool := &sync.Pool{New: func() any { return new(requestState) }}
	traced := tr.Enabled()

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
		if traced {
			// Only a request with a traceparent has a sampled flag to trust.
			fromProxy := false
			if len(c.Request.Header["Traceparent"]) > 0 {
				_, fromProxy = edge.TrustedPeer(c.Request.RemoteAddr, trusted)
			}
			var ctx context.Context
			ctx, st.span = tr.startServerSpan(c.Request.Context(), traceHeaders(c.Request.Header), tr.spanName(c.Request.Method, c.FullPath()), fromProxy)
			// An unsampled span has no children to record: the request
			// keeps its context, and its copy is saved.
			if st.span.IsRecording() {
				c.Request = c.Request.WithContext(ctx)
			}
		}

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
			remoteIP := edge.ClientIP(c.Request.RemoteAddr, c.Request.Header[forwardedForHeader], trusted)
			var sc trace.SpanContext
			if span := st.span; span != nil {
				sc = span.SpanContext()
				if span.IsRecording() {
					tr.endServerSpan(span, c, route, status, remoteIP, id, &st.w.entry)
				}
				span.End()
				st.span = nil
			}
			s := m.series(methodLabel(c.Request.Method), route, status)
			s.requests.Inc()
			if sc.IsSampled() {
				s.duration.(prometheus.ExemplarObserver).ObserveWithExemplar(elapsed.Seconds(), prometheus.Labels{
					"trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String(),
				})
			} else {
				s.duration.Observe(elapsed.Seconds())
			}

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
				remoteIP:  remoteIP,
				userAgent: headerValue(c.Request.Header, userAgentHeader),
				trace:     sc,
				Entry:     st.w.entry,
			}
			if access.enabled(lvl) {
				st.line = access.write(st.line, a, lvl, start.Add(elapsed))
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

// spanName is the name of a server span: the method and the route
// template, or the method alone for an unmatched path ("HTTP" for a method
// outside the standard ones), as OpenTelemetry's HTTP conventions say.
func spanName(method, route string) string {
	method = methodLabel(method)
	if method == "OTHER" {
		method = "HTTP"
	}
	if route == "" || route == "unmatched" {
		return method
	}
	return method + " " + route
}

// endServerSpan sets what the request came to on its recording server
// span: the attributes Middleware documents, the final name (a NoMethod
// route is known only now) and an error status from 500 on.
func (t *Tracing) endServerSpan(span trace.Span, c *gin.Context, route string, status int, remoteIP, requestID string, e *Entry) {
	r := c.Request
	method := methodLabel(r.Method)
	if method == "OTHER" {
		method = "_OTHER"
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	attrs := make([]attribute.KeyValue, 0, 14)
	attrs = append(attrs,
		semconv.HTTPRequestMethodKey.String(method),
		semconv.HTTPResponseStatusCode(status),
		semconv.URLPath(r.URL.Path),
		semconv.URLScheme(scheme),
		semconv.ClientAddress(remoteIP),
		semconv.NetworkProtocolVersion(protocolVersion(r)),
		requestIDKey.String(requestID),
	)
	if route != "unmatched" {
		attrs = append(attrs, semconv.HTTPRoute(route))
		// Started under c.FullPath(); only a route set later (NoMethod's)
		// renames the span.
		if route != c.FullPath() {
			span.SetName(t.spanName(r.Method, route))
		}
	}
	if ua := headerValue(r.Header, userAgentHeader); ua != "" {
		attrs = append(attrs, semconv.UserAgentOriginal(ua))
	}
	if e.authFailure != "" {
		attrs = append(attrs, authFailureKey.String(e.authFailure))
	}
	if e.hasPlants {
		attrs = append(attrs, plantsKey.Int(e.plants))
	}
	if t.subject && e.subject != "" {
		attrs = append(attrs, semconv.EnduserID(e.subject))
		if e.issuer != "" {
			attrs = append(attrs, issuerKey.String(e.issuer))
		}
	}
	span.SetAttributes(attrs...)
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
}

// protocolVersion is network.protocol.version: "1.1", "2", "1.0".
func protocolVersion(r *http.Request) string {
	switch {
	case r.ProtoMajor == 1 && r.ProtoMinor == 1:
		return "1.1"
	case r.ProtoMajor == 2:
		return "2"
	case r.ProtoMajor == 1 && r.ProtoMinor == 0:
		return "1.0"
	}
	return r.Proto
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
