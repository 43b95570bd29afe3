package auth

import (
	"testing"
	"time"
)

// TestReplayCache checks that a proof is refused while its window lasts,
// accepted again once it has expired, never accepted twice while live even
// after older entries are evicted around it, and that the cache stays
// within its size by forgetting the proofs nearest to expiry.
func TestReplayCache(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	steps := []struct {
		name     string
		jti      string
		expires  int
		now      int
		accepted bool
	}{
		{"first use of x, live long", "x", 1000, 0, true},
		{"first use of b", "b", 10, 0, true},
		{"b again inside its window", "b", 10, 5, false},
		// b expired, but x, older, still holds the front of the queue:
		// b's old entry is not evicted by age yet.
		{"b again after its window", "b", 2000, 20, true},
		{"b replayed", "b", 2000, 21, false},
		// x expires: evicting it and whatever stale entry follows must not
		// forget the live b.
		{"y evicts x", "y", 3000, 1001, true},
		{"b replayed after the eviction", "b", 2000, 1002, false},
		{"x again after its window", "x", 3000, 1003, true},
	}
	c := newReplayCache(8)
	for _, s := range steps {
		if got := c.add("jkt", s.jti, at(s.expires), at(s.now)); got != s.accepted {
			t.Fatalf("%s: add = %t, want %t", s.name, got, s.accepted)
		}
	}
	if n, m := c.byAge.Len(), len(c.seen); n != m {
		t.Errorf("queue holds %d entries, index %d: want the same", n, m)
	}

	// Bounded: past maxSize the nearest to expiry is forgotten first.
	small := newReplayCache(2)
	for i, jti := range []string{"p", "q", "r"} {
		if !small.add("jkt", jti, at(100+i), at(0)) {
			t.Fatalf("first use of %s refused", jti)
		}
	}
	if small.byAge.Len() != 2 {
		t.Errorf("cache of 2 holds %d entries", small.byAge.Len())
	}
	if small.add("jkt", "r", at(200), at(1)) {
		t.Error("r, the newest, was forgotten; want p, the oldest")
	}
	if !small.add("jkt", "p", at(200), at(1)) {
		t.Error("p, the oldest, is still remembered past the bound")
	}
}
