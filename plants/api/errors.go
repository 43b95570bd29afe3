package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/plants"
)

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
	body = observability.AppendJSONString(body, msg)
	body = append(body, "}\n"...)
	c.Status(status)
	c.Writer.Write(body)
}

// statusError is an error of this package that carries its status and its
// public message, which [RenderErrors] sends as they are. is, when set, is
// the exported error it is a case of, for [errors.Is].
type statusError struct {
	status int
	msg    string
	is     error
}

func (e *statusError) Error() string        { return e.msg }
func (e *statusError) HTTPStatus() int      { return e.status }
func (e *statusError) Is(target error) bool { return e.is != nil && target == e.is }

// The errors of the routing handlers.
var (
	errNotFound         = &statusError{status: http.StatusNotFound, msg: "not found"}
	errMethodNotAllowed = &statusError{status: http.StatusMethodNotAllowed, msg: "method not allowed"}
	errHeaderTooLarge   = &statusError{status: http.StatusRequestHeaderFieldsTooLarge, msg: "request header fields too large"}
)

// NotFound is the handler of every path but /plants (gin's NoRoute): it
// pushes a 404 for [RenderErrors].
func NotFound(c *gin.Context) {
	c.Error(errNotFound)
	c.Abort()
}

// MethodNotAllowed is the handler of other methods on /plants (gin's
// NoMethod): it sets Allow: GET, HEAD, unless an earlier handler of the
// route set its own, and pushes a 405 for [RenderErrors].
func MethodNotAllowed(c *gin.Context) {
	if c.Writer.Header().Get("Allow") == "" {
		c.Header("Allow", "GET, HEAD")
	}
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
//   - an error of this package ([ErrInvalidLimit] with its reason, 404,
//     405, 431): its status and its message;
//   - another error with an HTTPStatus() int method (auth's refusals):
//     that status, with a fixed message for it (never the token);
//   - [plants.ErrUnavailable]: 503 "store unavailable";
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
		// Below 500 the access line says all there is: the fields are made
		// only for the lines written, not on every refused credential.
		if status >= 500 {
			fields := []zap.Field{zap.Int("status", status), zap.String("method", c.Request.Method),
				zap.String("route", c.FullPath()), zap.String("request_id", observability.RequestID(c)), zap.Error(err)}
			if errors.Is(err, context.Canceled) {
				log.Info("request canceled", fields...)
			} else {
				log.Error(msg, fields...)
			}
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
		se *statusError
		hs interface{ HTTPStatus() int }
	)
	switch {
	case errors.As(err, &se):
		return se.status, se.msg
	case errors.As(err, &hs):
		return hs.HTTPStatus(), statusMessage(hs.HTTPStatus())
	case errors.Is(err, plants.ErrUnavailable):
		return http.StatusServiceUnavailable, plants.ErrUnavailable.Error()
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
