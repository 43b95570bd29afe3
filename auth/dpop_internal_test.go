package auth

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestReplayCache checks that a proof is refused while its window lasts,
// accepted again once it has expired, never accepted twice while live
// even when the cache is full, and that a full cache, or a key at its
// quota, refuses new proofs instead of forgetting live ones.
func TestReplayCache(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type step struct {
		name    string
		jkt     string
		jti     string
		expires int
		now     int
		want    replayVerdict
	}
	run := func(t *testing.T, c *replayCache, steps []step) {
		t.Helper()
		for _, s := range steps {
			if got, _ := c.add(s.jkt, s.jti, at(s.expires), at(s.now)); got != s.want {
				t.Fatalf("%s: add = %d, want %d", s.name, got, s.want)
			}
		}
		live, total := 0, 0
		for j := range c.n {
			if !c.ring[(c.head+j)%len(c.ring)].dead {
				live++
			}
		}
		for _, n := range c.perKey {
			total += n
		}
		if m := len(c.index); live != m || live != total || c.n > c.maxSize {
			t.Errorf("ring holds %d live entries of %d, index %d, key counts %d: want the same, within %d", live, c.n, m, total, c.maxSize)
		}
	}

	t.Run("window", func(t *testing.T) {
		run(t, newReplayCache(8, 8), []step{
			{"first use of x, live long", "k", "x", 1000, 0, replayFresh},
			{"first use of b", "k", "b", 10, 0, replayFresh},
			{"b again inside its window", "k", "b", 10, 5, replaySeen},
			// b expired, but x, older, still holds the front of the
			// queue: b's old entry is not removed by age yet.
			{"b again after its window", "k", "b", 2000, 20, replayFresh},
			{"b replayed", "k", "b", 2000, 21, replaySeen},
			// x expires: removing it and whatever stale entry follows
			// must not forget the live b.
			{"y after x expired", "k", "y", 3000, 1001, replayFresh},
			{"b replayed after the removal", "k", "b", 2000, 1002, replaySeen},
			{"x again after its window", "k", "x", 3000, 1003, replayFresh},
			{"the same jti from another key", "other", "x", 3000, 1004, replayFresh},
		})
	})
	t.Run("full cache", func(t *testing.T) {
		c := newReplayCache(2, 2)
		run(t, c, []step{
			{"p", "k", "p", 100, 0, replayFresh},
			{"q", "k", "q", 200, 0, replayFresh},
			{"r finds no room", "k", "r", 300, 1, replayFull},
			{"r from another key finds no room", "other", "r", 300, 1, replayFull},
			{"p, live, is still remembered", "k", "p", 100, 2, replaySeen},
			{"q, live, is still remembered", "k", "q", 200, 2, replaySeen},
		})
		if v, wait := c.add("k", "r", at(300), at(40)); v != replayFull || wait != 60*time.Second {
			t.Errorf("full at 40 s: %d, wait %v; want full, 60s, until p expires", v, wait)
		}
		run(t, c, []step{
			{"r once p expired", "k", "r", 300, 100, replayFresh},
			{"r replayed", "k", "r", 300, 101, replaySeen},
		})
	})
	t.Run("key quota", func(t *testing.T) {
		// 8 entries, 2 per key once the cache is half full.
		run(t, newReplayCache(8, 2), []step{
			{"f1", "flood", "1", 100, 0, replayFresh},
			{"f2", "flood", "2", 200, 0, replayFresh},
			{"f3, over the quota in a cache under half full", "flood", "3", 300, 0, replayFresh},
			{"f4, the same", "flood", "4", 300, 0, replayFresh},
			{"f5, over the quota in a cache half full", "flood", "5", 300, 1, replayFull},
			{"another key has room", "victim", "1", 300, 1, replayFresh},
			{"and is remembered", "victim", "1", 300, 2, replaySeen},
			{"its second", "victim", "2", 300, 2, replayFresh},
			{"its third, over the quota", "victim", "3", 300, 2, replayFull},
			{"a third key", "other", "1", 300, 2, replayFresh},
			{"its second fills the cache", "other", "2", 300, 2, replayFresh},
			{"a key with none finds no room", "late", "1", 300, 3, replayFull},
			{"f1 still remembered", "flood", "1", 100, 3, replaySeen},
			{"f5 once f1 expired", "flood", "5", 300, 100, replayFull},
			{"f5 once f2 expired too: half full", "flood", "5", 300, 200, replayFull},
			{"late, under its quota, once f2 expired", "late", "1", 300, 200, replayFresh},
		})
	})

	t.Run("growing ring", func(t *testing.T) {
		// Past the first ring of 64, with a dead entry inside when it
		// grows: every live proof is still found after the copy.
		c := newReplayCache(200, 200)
		var steps []step
		steps = append(steps, step{"d, short-lived", "k", "d", 1, 0, replayFresh})
		for i := range 150 {
			steps = append(steps, step{fmt.Sprint("p", i), "k", fmt.Sprint("p", i), 1000, 0, replayFresh})
		}
		steps = append(steps, step{"d again after its window", "k", "d", 1000, 2, replayFresh})
		for i := range 150 {
			steps = append(steps, step{fmt.Sprint("p", i, " replayed"), "k", fmt.Sprint("p", i), 1000, 3, replaySeen})
		}
		steps = append(steps, step{"d replayed", "k", "d", 1000, 3, replaySeen})
		run(t, c, steps)
	})
}

// BenchmarkReplayCacheMemory reports the heap a full replay cache holds,
// every entry from another proof key (the most the key counts hold):
//
//	go test ./auth -run '^$' -bench ReplayCacheMemory -benchtime 1x
func BenchmarkReplayCacheMemory(b *testing.B) {
	for range b.N {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		c := newReplayCache(replayCacheEntries, replayKeyQuota)
		now := time.Now()
		for i := range replayCacheEntries {
			if v, _ := c.add(fmt.Sprint("key-", i), "jti", now.Add(time.Hour), now); v != replayFresh {
				b.Fatalf("proof %d refused", i)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/(1<<20), "MiB/full")
		runtime.KeepAlive(c)
	}
}
