// Package api is the HTTP edge of the Plant Store: the streaming GET
// /plants handler, the limit parameter, the wire shape of a plant, the
// error contract (the one place an error becomes a status), the header
// limit, panic recovery, CORS for browser callers and the embedded OpenAPI
// document.
package api

import (
	"context"
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
// and after before anything else (an invalid one pushes an
// [ErrInvalidLimit] or [ErrInvalidAfter] error),
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
//
// Paging: the listing starts after the key of the after cursor, and when a
// limit of 1 or more cuts it short, the response carries
// Link: <base/plants?...&after=CURSOR>; rel="next" ([appendNextLink]), base being
// the API's absolute URL prefix (-public-url without its trailing "/") or
// "" for a relative link. The handler asks the store for one plant more
// than the limit, which tells it whether any remains. A page that does not
// fit in the first chunk needs the answer before that chunk goes out with
// the headers: it then reads the keys of the rest of the page in a second
// listing (no encoding, nothing kept but the last key), and ends the page
// at the key that listing found: a plant added between the two listings
// inside the page goes to the next page instead of pushing the page's last
// plant out of both. One removed in that window (the second listing then
// reaches further) can still make the page end before the key the Link
// names, and the plants between are missed; the window is one listing long
// and only pages over the first chunk have it.
func ListHandler(store plants.Store, m *Metrics, writeTimeout time.Duration, base string) gin.HandlerFunc {
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
	paged, _ := store.(plants.PagedStore)
	var pages *pageCache
	if paged != nil {
		pages = newPageCache()
	}
	return func(c *gin.Context) {
		limit, err := ParseLimit(c.Request.URL.RawQuery)
		if err != nil {
			c.Error(err)
			c.Abort()
			return
		}
		after, err := ParseAfter(c.Request.URL.RawQuery)
		if err != nil {
			c.Error(err)
			c.Abort()
			return
		}
		id, ok := auth.FromGin(c)
		if !ok {
			c.Error(errNoIdentity)
			c.Abort()
			return
		}
		caller := plants.Caller{Issuer: id.Issuer, Subject: id.Subject, Groups: id.Groups}
		h := c.Writer.Header()
		h["Content-Type"] = contentType[:1:1]
		h["Cache-Control"] = noStore[:1:1]
		addVary(h, vary) // after Origin, with CORS on

		s := pool.Get().(*listState)
		s.c, s.limit, s.head, s.complete = c, limit, c.Request.Method == http.MethodHead, true
		s.timeout = writeTimeout
		s.store, s.caller, s.base = store, caller, base
		s.buf = append(s.buf[:0], '[')
		defer func() {
			buf, link, key := s.buf, s.link, s.key
			*s = listState{yield: s.yield, link: link[:0], key: key[:0]}
			if cap(buf) <= 2*flushSize { // don't keep a buffer one huge plant grew
				s.buf = buf[:0]
				pool.Put(s)
			}
		}()
		// A GET whose page was made before, for a caller of the same key,
		// gets that page's bytes.
		var key []byte
		if pages != nil && !s.head {
			if k, ok := paged.PageKey(s.key[:0], caller); ok {
				key = append(k, c.Request.URL.RawQuery...)
				s.key = key
				if p := pages.get(key); p != nil {
					if p.link != nil {
						h["Link"] = p.link[:1:1]
					}
					c.Status(http.StatusOK)
					c.Writer.Write(p.body) // a failure means the client is gone
					m.observeReturned(p.n)
					observability.Annotate(c).SetPlants(p.n)
					paged.Served()
					return
				}
			}
		}
		ctx := c.Request.Context()
		s.ctx = ctx
		q := plants.Query{Caller: caller, Limit: limit, After: after}
		if limit > 0 {
			q.Limit++ // one ahead: whether a next page has any plant
		}
		store.List(ctx, q)(s.yield)
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
			if key != nil && !s.written && s.complete && len(buf) <= netHTTPBuffer {
				var link []byte
				if len(s.link) > 0 {
					link = s.link
				}
				pages.put(key, buf, link, n)
			}
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

	// Paging. last is the key of the last plant in the page; end, when
	// set (ended), the key the page ends at (see [listState.settleNext]).
	store  plants.Store
	ctx    context.Context
	caller plants.Caller
	base   string
	last   plants.Key
	end    plants.Key
	link   []byte // where the Link header is made, kept with the state
	key    []byte // where the page's key is made, kept with the state
}

// setNext sets the Link header to the page after the one that ends with
// the plant of key last, unless the headers went out already.
func (s *listState) setNext(last plants.Key) {
	if s.written {
		return
	}
	s.link = appendNextLink(s.link[:0], s.base, s.c.Request.URL.RawQuery, last)
	s.c.Writer.Header()["Link"] = []string{string(s.link)}
}

// ended reports whether the page's end is settled (see
// [listState.settleNext]): end is then a plant's key, never the zero one.
func (s *listState) ended() bool { return !s.end.IsZero() }

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
	if s.n == s.limit || s.ended() && plants.KeyOf(p).Compare(s.end) > 0 {
		// Past the page: a plant remains for the next one.
		if s.limit > 0 && !s.ended() {
			s.setNext(s.last)
		}
		return false
	}
	if s.n > 0 {
		s.buf = append(s.buf, ',')
	}
	s.buf = appendPlantJSON(s.buf, p)
	s.n++
	s.last = plants.KeyOf(p)
	if len(s.buf) >= flushSize {
		if !s.written && s.limit > 0 && !s.settleNext() {
			return false
		}
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

// settleNext finds out, before the first chunk goes out with the headers,
// whether a page follows this one: it lists the keys of the plants the page
// still lacks, and one more, after the last one in the buffer. With one
// more, the page ends at the key of its last plant and the Link names it;
// without, the page ends where the store ends it, and has no Link. Either
// way the page will yield nothing past that key, so a plant added in the
// meantime inside the page goes to the next one rather than pushing the
// page's last plant out of both. It reports false, with s.err set, when
// the listing failed.
func (s *listState) settleNext() bool {
	rest := s.limit - s.n
	q := plants.Query{Caller: s.caller, Limit: rest + 1, After: s.last}
	end, n := s.last, 0
	for p, err := range s.store.List(s.ctx, q) {
		if err != nil {
			s.err = err
			return false
		}
		if n++; n > rest {
			break
		}
		end = plants.KeyOf(p)
	}
	if n > rest {
		s.end = end
		s.setNext(end)
	} else {
		// No next page: nothing after the last plant listed now.
		s.limit = s.n + n
	}
	return true
}
