package api

import (
	"bytes"
	"sync"
)

// The bounds of a [pageCache].
const (
	// maxPages is the most pages a cache holds: with a body of at most
	// netHTTPBuffer and a Link of at most maxLink, about 3 MiB.
	maxPages = 1024
	// maxPageKey is the longest key kept: a caller of many groups that
	// name plants is listed each time instead.
	maxPageKey = 1024
)

// A page is one response of the list handler, kept whole: its body, its
// Link header (nil for the last page) and the number of plants in it.
type page struct {
	body []byte
	link []string
	n    int
}

// pageCache keeps the small pages of a [plants.PagedStore]: the responses
// to a GET that fit in net/http's first buffer, by the store's key of the
// caller (the catalog's generation and the caller's principals that read
// any plant) and the raw query (which holds limit and after, all a page
// depends on besides). A request whose page is there costs a lookup and a
// write instead of a listing and its encoding; the bytes are those the
// listing made for the first caller of the key. It is bounded: past
// maxPages, a page leaves for each one that comes, and a new generation
// empties it, since no key of the old one can come again. Safe for
// concurrent use.
type pageCache struct {
	mu    sync.RWMutex
	pages map[string]*page
	gen   []byte // the generation of the pages held (the keys' first 8 bytes)
}

func newPageCache() *pageCache {
	return &pageCache{pages: make(map[string]*page)}
}

// get returns the page of key, or nil.
func (c *pageCache) get(key []byte) *page {
	c.mu.RLock()
	p := c.pages[string(key)]
	c.mu.RUnlock()
	return p
}

// put keeps a copy of body and link as the page of key.
func (c *pageCache) put(key, body []byte, link []byte, n int) {
	if len(key) < 8 || len(key) > maxPageKey {
		return
	}
	p := &page{body: bytes.Clone(body), n: n}
	if link != nil {
		p.link = []string{string(link)}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !bytes.Equal(c.gen, key[:8]) {
		clear(c.pages)
		c.gen = append(c.gen[:0], key[:8]...)
	}
	if len(c.pages) >= maxPages {
		for k := range c.pages { // one of them, as the map's order picks
			delete(c.pages, k)
			break
		}
	}
	c.pages[string(key)] = p
}

// len returns the number of pages held.
func (c *pageCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.pages)
}
