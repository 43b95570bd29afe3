package api

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// TestPageCacheBounded fills a cache past maxPages, then with a new
// generation: it never holds more than maxPages, and the new generation's
// first page drops the old ones. Keys of the wrong size are not kept.
func TestPageCacheBounded(t *testing.T) {
	c := newPageCache()
	key := func(gen uint64, i int) []byte {
		return fmt.Appendf(binary.LittleEndian.AppendUint64(nil, gen), "*\x00limit=%d", i)
	}
	for i := range 2 * maxPages {
		c.put(key(1, i), []byte("[]"), nil, 0)
		if n := c.len(); n > maxPages {
			t.Fatalf("%d pages after %d puts; want at most %d", n, i+1, maxPages)
		}
	}
	if c.get(key(1, 2*maxPages-1)) == nil {
		t.Error("the last page put is not there")
	}
	c.put(key(2, 0), []byte("[]"), []byte("<x>"), 0)
	if n := c.len(); n != 1 {
		t.Errorf("%d pages after a page of a new generation; want 1", n)
	}
	if p := c.get(key(2, 0)); p == nil || p.link[0] != "<x>" {
		t.Errorf("page of generation 2: %+v", p)
	}
	c.put([]byte("short"), []byte("[]"), nil, 0)
	c.put(append(key(2, 1), make([]byte, maxPageKey)...), []byte("[]"), nil, 0)
	if n := c.len(); n != 1 {
		t.Errorf("%d pages after keys of the wrong size; want 1", n)
	}
}
