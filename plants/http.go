package plants

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/observability"
)

// flushSize is the size at which the list handler hands its buffer to the
// response writer: the memory a response holds, whatever the plant count.
const flushSize = 32 << 10

// netHTTPBuffer is the size of the buffer net/http keeps a response body in
// before it must choose between a Content-Length and chunking (its
// bufferBeforeChunkingSize): a handler that writes no more than that and
// returns gets the Content-Length set by net/http.
const netHTTPBuffer = 2048

// errNoIdentity means the handler was reached without the auth middleware:
// a wiring bug, so a 500.
var errNoIdentity = errors.New("list plants: no identity in the request context")

// ListHandler returns the GET and HEAD /plants handler. It parses limit
// before anything else (an invalid one pushes an [ErrInvalidLimit] error),
// lists the plants the caller's identity (from the auth middleware) may see
// and streams them as a JSON array of {"name", "tag"} objects, in chunks of
// a few tens of KiB, so its memory does not grow with the catalog. A
// response that fits in one chunk gets a Content-Length; a HEAD request gets
// the headers of GET without a body.
//
// When the store fails before the first chunk is written, the handler sets
// Retry-After (for [ErrUnavailable] and context errors) and pushes the error
// for [RenderErrors]. When it fails later, the status can no longer change,
// and the handler panics with [http.ErrAbortHandler] to cut the response
// short, so the client sees a broken transfer rather than a complete-looking
// body. It records plantstore_plants_returned and the plants log field.
func ListHandler(store Store, log *zap.Logger, m *Metrics) gin.HandlerFunc {
	pool := sync.Pool{New: func() any {
		s := &listState{buf: make([]byte, 0, flushSize+1024)}
		s.yield = s.add
		return s
	}}
	// The header values are the same for every response: shared slices,
	// capped so that an Add copies instead of writing into them.
	contentType := []string{"application/json"}
	noStore := []string{"no-store"}
	vary := []string{"Authorization"}
	return func(c *gin.Context) {
		limit, err := ParseLimit(c.Request.URL.RawQuery)
		if err != nil {
			c.Error(err)
			c.Abort()
			return
		}
		principals, ok := auth.PrincipalsFromContext(c.Request.Context())
		if !ok {
			c.Error(errNoIdentity)
			c.Abort()
			return
		}
		h := c.Writer.Header()
		h["Content-Type"] = contentType[:1:1]
		h["Cache-Control"] = noStore[:1:1]
		h["Vary"] = vary[:1:1]

		s := pool.Get().(*listState)
		s.c, s.limit, s.head, s.complete = c, limit, c.Request.Method == http.MethodHead, true
		s.buf = append(s.buf[:0], '[')
		defer func() {
			buf := s.buf
			*s = listState{yield: s.yield}
			if cap(buf) <= 2*flushSize { // don't keep a buffer one huge plant grew
				s.buf = buf[:0]
				pool.Put(s)
			}
		}()
		ctx := c.Request.Context()
		store.List(ctx, Query{Principals: principals, Limit: limit})(s.yield)
		n := s.n
		switch {
		case s.err != nil:
			if s.written {
				observability.Annotate(c).SetPlants(n)
				panic(http.ErrAbortHandler)
			}
			if errors.Is(s.err, ErrUnavailable) || ctx.Err() != nil {
				h.Set("Retry-After", "1")
			}
			c.Error(s.err)
			c.Abort()
			return
		case s.gone:
			observability.Annotate(c).SetPlants(n)
			return // the client is gone; nothing left to tell it
		}
		buf := append(s.buf, ']')
		s.buf = buf
		// net/http sets the Content-Length of a body that fits in its
		// first buffer, without allocating; a larger one, or a HEAD that
		// writes none, needs it from here.
		if !s.written && s.complete && (s.head || len(buf) > netHTTPBuffer) {
			h["Content-Length"] = []string{strconv.Itoa(len(buf))}
		}
		c.Status(http.StatusOK)
		if s.head {
			n = 0
			c.Writer.WriteHeaderNow()
		} else {
			c.Writer.Write(buf) // a failure means the client is gone
			m.observeReturned(n)
		}
		observability.Annotate(c).SetPlants(n)
	}
}

// listState is the state of one listing. It is pooled with its buffer and
// its yield function, so that a listing allocates neither.
type listState struct {
	c     *gin.Context
	buf   []byte
	limit int
	n     int
	head  bool
	// written: a chunk went out; complete: every plant is in buf or was
	// written (false when a HEAD stopped at the first chunk); gone: the
	// client stopped reading.
	written, complete, gone bool
	err                     error // from the store
	yield                   func(Plant, error) bool
}

// add is the yield function of the store's listing: it appends p to the
// buffer and writes the buffer out when it is full.
func (s *listState) add(p Plant, err error) bool {
	if err != nil {
		s.err = err
		return false
	}
	if s.n == s.limit { // the store's business, but cheap to hold it to
		return false
	}
	if s.n > 0 {
		s.buf = append(s.buf, ',')
	}
	s.buf = appendPlantJSON(s.buf, p)
	s.n++
	if len(s.buf) >= flushSize {
		if s.head { // the length is all a HEAD could still learn
			s.complete = false
			return false
		}
		if _, err := s.c.Writer.Write(s.buf); err != nil {
			s.gone = true
			return false
		}
		s.written, s.buf = true, s.buf[:0]
	}
	return true
}

// Error is the body of every error response, the seed's Error shape.
type Error struct {
	// Status is the HTTP status code.
	Status int `json:"error"`
	// Message is a short text that never contains the token, a stack, SQL
	// or a path.
	Message string `json:"message"`
}

// WriteError writes an error response with status and the [Error] body
// {"error": status, "message": msg}, as application/json and not cacheable.
// Headers set before (WWW-Authenticate, Retry-After, Allow) are kept.
func WriteError(c *gin.Context, status int, msg string) {
	h := c.Writer.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Length")
	body := make([]byte, 0, 64+len(msg))
	body = append(body, `{"error":`...)
	body = strconv.AppendInt(body, int64(status), 10)
	body = append(body, `,"message":`...)
	body = appendJSONString(body, msg)
	body = append(body, "}\n"...)
	c.Status(status)
	c.Writer.Write(body)
}

// statusError is an error of this package that carries its status and its
// public message.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string   { return e.msg }
func (e *statusError) HTTPStatus() int { return e.status }

// The errors of the routing handlers.
var (
	errNotFound         = &statusError{http.StatusNotFound, "not found"}
	errMethodNotAllowed = &statusError{http.StatusMethodNotAllowed, "method not allowed"}
	errHeaderTooLarge   = &statusError{http.StatusRequestHeaderFieldsTooLarge, "request header fields too large"}
)

// NotFound is the handler of every path but /plants (gin's NoRoute): it
// pushes a 404 for [RenderErrors].
func NotFound(c *gin.Context) {
	c.Error(errNotFound)
	c.Abort()
}

// MethodNotAllowed is the handler of other methods on /plants (gin's
// NoMethod): it sets Allow: GET, HEAD and pushes a 405 for [RenderErrors].
func MethodNotAllowed(c *gin.Context) {
	c.Header("Allow", "GET, HEAD")
	c.Error(errMethodNotAllowed)
	c.Abort()
}

// HeaderLimit returns a middleware that refuses, with 431 in the Error
// shape, a request whose header is over maxBytes: the request line, the
// Host line and every header line, each with its CRLF, as net/http's
// MaxHeaderBytes counts them. The server's own MaxHeaderBytes, which answers
// in plain text, should be set higher, so that this check answers first.
func HeaderLimit(maxBytes int) gin.HandlerFunc {
	return func(c *gin.Context) {
		if headerBytes(c.Request) > maxBytes {
			c.Error(errHeaderTooLarge)
			c.Abort()
		}
	}
}

// headerBytes returns the size of r's header as it came on the wire
// (HTTP/1.1 framing).
func headerBytes(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2
	n += len("Host: ") + len(r.Host) + 2
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n + 2
}

// RenderErrors returns the middleware that turns errors into responses: the
// one place an error becomes a status. After the handlers ran, if one pushed
// an error (c.Error) and nothing was written, it writes the last one with
// [WriteError]:
//   - an [ErrInvalidLimit]: 400 with the reason;
//   - an error with an HTTPStatus() int method (auth's refusals, 404, 405,
//     431): that status, with a fixed message for it (never the token);
//   - [ErrUnavailable]: 503 "store unavailable";
//   - a context error (the client left or a deadline passed): 503;
//   - anything else: 500 "internal error".
//
// Retry-After is set on a 503 if the code that knew had not set it. Errors
// of 500 and above are logged at Error with their cause (a canceled request
// at Info); 4xx are left to the access log.
//
// It also recovers panics of the handlers after it: the panic is logged at
// Error with its stack, and the client gets a 500 in the Error shape, or,
// when the response had started, a cut connection. [http.ErrAbortHandler]
// is panicked again untouched.
func RenderErrors(log *zap.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			r := recover()
			if r == nil {
				return
			}
			if err, ok := r.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(r)
			}
			log.Error("panic serving request",
				zap.Any("panic", r),
				zap.String("method", c.Request.Method),
				zap.String("route", c.FullPath()),
				zap.String("request_id", observability.RequestID(c)),
				zap.Stack("stack"))
			c.Abort()
			if c.Writer.Written() {
				panic(http.ErrAbortHandler)
			}
			WriteError(c, http.StatusInternalServerError, "internal error")
		}()
		c.Next()
		if len(c.Errors) == 0 {
			return
		}
		err := c.Errors.Last().Err
		status, msg := classify(err)
		fields := []zap.Field{zap.Int("status", status), zap.String("method", c.Request.Method),
			zap.String("route", c.FullPath()), zap.String("request_id", observability.RequestID(c)), zap.Error(err)}
		switch {
		case status < 500: // the access log has it
		case errors.Is(err, context.Canceled):
			log.Info("request canceled", fields...)
		default:
			log.Error(msg, fields...)
		}
		if c.Writer.Written() {
			return
		}
		if status == http.StatusServiceUnavailable && c.Writer.Header().Get("Retry-After") == "" {
			c.Header("Retry-After", "1")
		}
		WriteError(c, status, msg)
	}
}

// classify maps an error to its status and public message. The message
// comes from the matched error, never from the wrapped chain, so context
// added with %w stays in the logs.
func classify(err error) (int, string) {
	var (
		le *limitError
		se *statusError
		hs interface{ HTTPStatus() int }
	)
	switch {
	case errors.As(err, &le):
		return http.StatusBadRequest, le.Error()
	case errors.Is(err, ErrInvalidLimit):
		return http.StatusBadRequest, ErrInvalidLimit.Error()
	case errors.As(err, &se):
		return se.status, se.msg
	case errors.As(err, &hs):
		return hs.HTTPStatus(), statusMessage(hs.HTTPStatus())
	case errors.Is(err, ErrUnavailable):
		return http.StatusServiceUnavailable, ErrUnavailable.Error()
	case errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, "request canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "request timed out"
	}
	return http.StatusInternalServerError, "internal error"
}

// statusMessage is the public message of an error that only tells its
// status.
func statusMessage(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "malformed request"
	case http.StatusUnauthorized:
		return "missing or invalid credential"
	case http.StatusForbidden:
		return "insufficient scope"
	case http.StatusRequestHeaderFieldsTooLarge:
		return "request header fields too large"
	case http.StatusServiceUnavailable:
		return "service unavailable"
	}
	if status >= 500 || http.StatusText(status) == "" {
		return "internal error"
	}
	return strings.ToLower(http.StatusText(status))
}
