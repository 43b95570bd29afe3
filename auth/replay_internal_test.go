package auth

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestReplayCache checks that a proof is refused while its window lasts,
// accepted again once it has expired, never accepted twice while live
// even when the cache is full, and that a full cache, or a caller or a key
// at its share, refuses new proofs instead of forgetting live ones.
func TestReplayCache(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type step struct {
		name           string
		caller, client string
		jti            string
		expires        int
		now            int
		want           replayVerdict
	}
	admission := func(s step) Admission {
		client := clientKey(s.client)
		return Admission{Caller: CallerKey("", s.caller), DPoP: true, Client: client, Proof: proofKey(client, s.jti), Expires: at(s.expires), Now: at(s.now)}
	}
	run := func(t *testing.T, c *replayCache, steps []step) {
		t.Helper()
		for _, s := range steps {
			a := admission(s)
			checked, _ := c.check(a)
			if got, _ := c.add(a); got != s.want || checked != s.want {
				t.Fatalf("%s: check = %d, add = %d; want %d", s.name, checked, got, s.want)
			}
		}
		live, callers, clients := 0, 0, 0
		for j := range c.n {
			if !c.ring[(c.head+j)%len(c.ring)].dead {
				live++
			}
		}
		for _, n := range c.callers {
			callers += int(n)
		}
		for _, n := range c.clients {
			clients += int(n)
		}
		if m := len(c.index); live != m || live != callers || live != clients || c.n > c.maxSize {
			t.Errorf("ring holds %d live entries of %d, index %d, caller counts %d, key counts %d: want the same, within %d", live, c.n, m, callers, clients, c.maxSize)
		}
	}

	t.Run("window", func(t *testing.T) {
		run(t, newReplayCache(8), []step{
			{"first use of x, live long", "alice", "k", "x", 1000, 0, replayFresh},
			{"first use of b", "alice", "k", "b", 10, 0, replayFresh},
			{"b again inside its window", "alice", "k", "b", 10, 5, replaySeen},
			// b expired, but x, older, still holds the front of the
			// queue: b's old entry is not removed by age yet.
			{"b again after its window", "alice", "k", "b", 2000, 20, replayFresh},
			{"b replayed", "alice", "k", "b", 2000, 21, replaySeen},
			// x expires: removing it and whatever stale entry follows
			// must not forget the live b.
			{"y after x expired", "alice", "k", "y", 3000, 1001, replayFresh},
			{"b replayed after the removal", "alice", "k", "b", 2000, 1002, replaySeen},
			{"b replayed by another caller", "bob", "k", "b", 2000, 1002, replaySeen},
			{"x again after its window", "alice", "k", "x", 3000, 1003, replayFresh},
			{"the same jti from another key", "alice", "other", "x", 3000, 1004, replayFresh},
		})
	})
	t.Run("full cache", func(t *testing.T) {
		c := newReplayCache(2)
		run(t, c, []step{
			{"p", "a", "ka", "p", 100, 0, replayFresh},
			{"q", "b", "kb", "q", 200, 0, replayFresh},
			{"r finds no room", "c", "kc", "r", 300, 1, replayFull},
			{"p, live, is still remembered", "a", "ka", "p", 100, 2, replaySeen},
			{"q, live, is still remembered", "b", "kb", "q", 200, 2, replaySeen},
		})
		if v, wait := c.add(admission(step{"", "c", "kc", "r", 300, 40, 0})); v != replayFull || wait != 60*time.Second {
			t.Errorf("full at 40 s: %d, wait %v; want full, 60s, until p expires", v, wait)
		}
		run(t, c, []step{
			{"r once p expired", "c", "kc", "r", 300, 100, replayFresh},
			{"r replayed", "c", "kc", "r", 300, 101, replaySeen},
		})
	})
	t.Run("fair shares", func(t *testing.T) {
		// 8 places: a caller or a key may add while it holds fewer than
		// the places left free.
		run(t, newReplayCache(8), []step{
			{"f1", "flood", "k1", "1", 100, 0, replayFresh},
			{"f2, another key", "flood", "k2", "2", 200, 0, replayFresh},
			{"f3, another key", "flood", "k3", "3", 300, 0, replayFresh},
			{"f4, another key: 3 held, 5 free", "flood", "k4", "4", 300, 0, replayFresh},
			{"f5, another key: 4 held, 4 free", "flood", "k5", "5", 300, 1, replayFull},
			{"another caller has room", "victim", "v", "1", 300, 1, replayFresh},
			{"and is remembered", "victim", "v", "1", 300, 2, replaySeen},
			{"its second: 1 held, 3 free", "victim", "v", "2", 300, 2, replayFresh},
			{"its third: 2 held, 2 free", "victim", "v", "3", 300, 2, replayFull},
			{"a key of two callers, its first", "x", "shared", "1", 300, 2, replayFresh},
			{"its second caller: the key holds 1 of 1 free", "y", "shared", "2", 300, 2, replayFull},
			{"a caller and key holding none", "late", "l", "1", 300, 3, replayFresh},
			{"the cache is full", "later", "m", "1", 300, 3, replayFull},
			{"f1 still remembered", "flood", "k1", "1", 100, 3, replaySeen},
			{"f5 once f1 expired: 3 held, 1 free", "flood", "k5", "5", 300, 100, replayFull},
			{"later, holding none, once f1 expired", "later", "m", "1", 300, 100, replayFresh},
			{"f5 once f2 expired too: 2 held, 1 free", "flood", "k5", "5", 300, 200, replayFull},
		})
	})
	t.Run("growing ring", func(t *testing.T) {
		// Past the first ring of 64, with a dead entry inside when it
		// grows: every live proof is still found after the copy.
		c := newReplayCache(400)
		var steps []step
		steps = append(steps, step{"d, short-lived", "alice", "k", "d", 1, 0, replayFresh})
		for i := range 150 {
			steps = append(steps, step{fmt.Sprint("p", i), "alice", "k", fmt.Sprint("p", i), 1000, 0, replayFresh})
		}
		steps = append(steps, step{"d again after its window", "alice", "k", "d", 1000, 2, replayFresh})
		for i := range 150 {
			steps = append(steps, step{fmt.Sprint("p", i, " replayed"), "alice", "k", fmt.Sprint("p", i), 1000, 3, replaySeen})
		}
		steps = append(steps, step{"d replayed", "alice", "k", "d", 1000, 3, replaySeen})
		run(t, c, steps)
	})
}

// TestReplayCacheShares floods a cache with one caller's proofs under 17
// keys, then one key's under 17 callers, then both at once; none of them
// fills it, and a caller with a key of its own still finds room.
func TestReplayCacheShares(t *testing.T) {
	const size = 1024
	now := time.Unix(1_800_000_000, 0)
	add := func(c *replayCache, caller, client string, i int) replayVerdict {
		k := clientKey(client)
		v, _ := c.add(Admission{Caller: CallerKey("attackers", caller), DPoP: true, Client: k, Proof: proofKey(k, fmt.Sprint(i)), Expires: now.Add(time.Hour), Now: now})
		return v
	}
	for _, tt := range []struct {
		name     string
		attacker func(i int) (caller, client string)
		maxHeld  int
	}{
		{"one caller, 17 keys", func(i int) (string, string) { return "mallory", fmt.Sprint("key-", i%17) }, size / 2},
		{"one key, 17 callers", func(i int) (string, string) { return fmt.Sprint("user-", i%17), "key" }, size / 2},
		// 17 callers each with a key of its own: each may hold what is
		// left free, 1/18 of the cache, rounded up.
		{"17 callers, 17 keys", func(i int) (string, string) { return fmt.Sprint("user-", i%17), fmt.Sprint("key-", i%17) }, 17 * ((size + 17) / 18)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newReplayCache(size)
			held := 0
			for i := range 10 * size {
				caller, client := tt.attacker(i)
				if add(c, caller, client, i) == replayFresh {
					held++
				}
			}
			if held > tt.maxHeld || held < tt.maxHeld-17 {
				t.Errorf("the flood holds %d of %d places; want about %d", held, size, tt.maxHeld)
			}
			for i := range 3 {
				if v := add(c, "victim", "victim-key", -1-i); v != replayFresh {
					t.Fatalf("the victim's proof %d after the flood: %d; want room", i, v)
				}
			}
		})
	}
}

// BenchmarkReplayCacheMemory reports the heap a full replay cache holds,
// every entry from another caller and another key (the most the counts
// hold):
//
//	go test ./auth -run '^$' -bench ReplayCacheMemory -benchtime 1x
func BenchmarkReplayCacheMemory(b *testing.B) {
	for range b.N {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		c := newReplayCache(replayCacheEntries)
		now := time.Now()
		for i := range replayCacheEntries {
			k := clientKey(fmt.Sprint("key-", i))
			a := Admission{Caller: CallerKey("", fmt.Sprint("user-", i)), DPoP: true, Client: k, Proof: proofKey(k, "jti"), Expires: now.Add(time.Hour), Now: now}
			if v, _ := c.add(a); v != replayFresh {
				b.Fatalf("proof %d refused", i)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/(1<<20), "MiB/full")
		runtime.KeepAlive(c)
	}
}
