// Package api is the HTTP edge of the Plant Store: the streaming GET
// /plants handler, the limit parameter, the wire shape of a plant, the
// error contract (the one place an error becomes a status), the header
// limit, panic recovery, CORS for browser callers and the embedded OpenAPI
// document.
package api

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/plants"
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
// lists the plants the caller (the [auth.Identity] the auth middleware put
// in the context) may read, and streams them as a JSON array of {"name",
// "tag"} objects, in chunks of a few tens of KiB, so its memory does not
// grow with the catalog. A response that fits in one chunk gets a
// Content-Length; a HEAD request gets the headers of GET without a body.
//
// writeTimeout, when positive, is the time each chunk may take to be
// written: before each write the connection's write and read deadlines
// move to now plus writeTimeout, so a client that keeps reading gets the
// whole list however long it takes, and one that stops reading is cut off
// after writeTimeout (the server's own ReadTimeout and WriteTimeout set the
// first deadline).
//
// When the store fails before the first chunk is written, the handler sets
// Retry-After (for [plants.ErrUnavailable] and context errors) and pushes
// the error for [RenderErrors]. When it fails later, the status can no
// longer change, and the handler panics with [http.ErrAbortHandler] to cut
// the response short, so the client sees a broken transfer rather than a
// complete-looking body. It records plantstore_plants_returned and the
// plants log field.
func ListHandler(store plants.Store, m *Metrics, writeTimeout time.Duration) gin.HandlerFunc {
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
		id, ok := auth.FromContext(c.Request.Context())
		if !ok {
			c.Error(errNoIdentity)
			c.Abort()
			return
		}
		caller := plants.Caller{Issuer: id.Issuer, Subject: id.Subject, Groups: id.Groups}
		h := c.Writer.Header()
		h["Content-Type"] = contentType[:1:1]
		h["Cache-Control"] = noStore[:1:1]
		if v := h["Vary"]; v != nil { // Origin, with CORS on
			h["Vary"] = append(v, vary[0])
		} else {
			h["Vary"] = vary[:1:1]
		}

		s := pool.Get().(*listState)
		s.c, s.limit, s.head, s.complete = c, limit, c.Request.Method == http.MethodHead, true
		s.timeout = writeTimeout
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
		store.List(ctx, plants.Query{Caller: caller, Limit: limit})(s.yield)
		n := s.n
		switch {
		case s.err != nil:
			if s.written {
				observability.Annotate(c).SetPlants(n)
				panic(http.ErrAbortHandler)
			}
			c.Error(s.err) // RenderErrors answers 503 with Retry-After
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
			s.extendDeadlines()
			c.Writer.Write(buf) // a failure means the client is gone
			m.observeReturned(n)
		}
		observability.Annotate(c).SetPlants(n)
	}
}

// listState is the state of one listing. It is pooled with its buffer and
// its yield function, so that a listing allocates neither.
type listState struct {
	c       *gin.Context
	buf     []byte
	limit   int
	timeout time.Duration // of each write; 0 for none
	n       int
	head    bool
	// written: a chunk went out; complete: every plant is in buf or was
	// written (false when a HEAD stopped at the first chunk); gone: the
	// client stopped reading.
	written, complete, gone bool
	err                     error // from the store
	yield                   func(plants.Plant, error) bool
}

// extendDeadlines gives the next write s.timeout from now (see
// [ListHandler]). The first write has the deadline the server set when the
// request came, so only a response of several writes pays for this.
func (s *listState) extendDeadlines() {
	if s.timeout <= 0 || !s.written {
		return
	}
	rc := http.NewResponseController(s.c.Writer)
	d := time.Now().Add(s.timeout)
	if rc.SetWriteDeadline(d) != nil {
		// The writer cannot take deadlines (a test recorder): the server's
		// own timeouts apply, and there is no use asking again.
		s.timeout = 0
		return
	}
	_ = rc.SetReadDeadline(d)
}

// add is the yield function of the store's listing: it appends p to the
// buffer and writes the buffer out when it is full.
func (s *listState) add(p plants.Plant, err error) bool {
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
		s.extendDeadlines()
		if _, err := s.c.Writer.Write(s.buf); err != nil {
			s.gone = true
			return false
		}
		s.written, s.buf = true, s.buf[:0]
	}
	return true
}
