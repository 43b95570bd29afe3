package dpop

import (
	"crypto/sha256"
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
		want           Problem
	}
	admission := func(s step) Use {
		client := ClientKey(s.client)
		return Use{Caller: callerKey(s.caller), Client: client, Proof: ProofKey(client, s.jti), Expires: at(s.expires), Now: at(s.now)}
	}
	run := func(t *testing.T, c *ReplayCache, steps []step) {
		t.Helper()
		for _, s := range steps {
			a := admission(s)
			checked, _ := c.Check(a)
			if got, _ := c.Add(a); got != s.want || checked != s.want {
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
		run(t, NewReplayCache(8), []step{
			{"first use of x, live long", "alice", "k", "x", 1000, 0, 0},
			{"first use of b", "alice", "k", "b", 10, 0, 0},
			{"b again inside its window", "alice", "k", "b", 10, 5, Replayed},
			// b expired, but x, older, still holds the front of the
			// queue: b's old entry is not removed by age yet.
			{"b again after its window", "alice", "k", "b", 2000, 20, 0},
			{"b replayed", "alice", "k", "b", 2000, 21, Replayed},
			// x expires: removing it and whatever stale entry follows
			// must not forget the live b.
			{"y after x expired", "alice", "k", "y", 3000, 1001, 0},
			{"b replayed after the removal", "alice", "k", "b", 2000, 1002, Replayed},
			{"b replayed by another caller", "bob", "k", "b", 2000, 1002, Replayed},
			{"x again after its window", "alice", "k", "x", 3000, 1003, 0},
			{"the same jti from another key", "alice", "other", "x", 3000, 1004, 0},
		})
	})
	t.Run("full cache", func(t *testing.T) {
		c := NewReplayCache(2)
		run(t, c, []step{
			{"p", "a", "ka", "p", 100, 0, 0},
			{"q", "b", "kb", "q", 200, 0, 0},
			{"r finds no room", "c", "kc", "r", 300, 1, Full},
			{"p, live, is still remembered", "a", "ka", "p", 100, 2, Replayed},
			{"q, live, is still remembered", "b", "kb", "q", 200, 2, Replayed},
		})
		if v, wait := c.Add(admission(step{"", "c", "kc", "r", 300, 40, 0})); v != Full || wait != 60*time.Second {
			t.Errorf("full at 40 s: %d, wait %v; want full, 60s, until p expires", v, wait)
		}
		run(t, c, []step{
			{"r once p expired", "c", "kc", "r", 300, 100, 0},
			{"r replayed", "c", "kc", "r", 300, 101, Replayed},
		})
	})
	t.Run("fair shares", func(t *testing.T) {
		// 8 places: a caller or a key may add while it holds fewer than
		// the places left free.
		run(t, NewReplayCache(8), []step{
			{"f1", "flood", "k1", "1", 100, 0, 0},
			{"f2, another key", "flood", "k2", "2", 200, 0, 0},
			{"f3, another key", "flood", "k3", "3", 300, 0, 0},
			{"f4, another key: 3 held, 5 free", "flood", "k4", "4", 300, 0, 0},
			{"f5, another key: 4 held, 4 free", "flood", "k5", "5", 300, 1, Full},
			{"another caller has room", "victim", "v", "1", 300, 1, 0},
			{"and is remembered", "victim", "v", "1", 300, 2, Replayed},
			{"its second: 1 held, 3 free", "victim", "v", "2", 300, 2, 0},
			{"its third: 2 held, 2 free", "victim", "v", "3", 300, 2, Full},
			{"a key of two callers, its first", "x", "shared", "1", 300, 2, 0},
			{"its second caller: the key holds 1 of 1 free", "y", "shared", "2", 300, 2, Full},
			{"a caller and key holding none", "late", "l", "1", 300, 3, 0},
			{"the cache is full", "later", "m", "1", 300, 3, Full},
			{"f1 still remembered", "flood", "k1", "1", 100, 3, Replayed},
			{"f5 once f1 expired: 3 held, 1 free", "flood", "k5", "5", 300, 100, Full},
			{"later, holding none, once f1 expired", "later", "m", "1", 300, 100, 0},
			{"f5 once f2 expired too: 2 held, 1 free", "flood", "k5", "5", 300, 200, Full},
		})
	})
	t.Run("growing ring", func(t *testing.T) {
		// Past the first ring of 64, with a dead entry inside when it
		// grows: every live proof is still found after the copy.
		c := NewReplayCache(400)
		var steps []step
		steps = append(steps, step{"d, short-lived", "alice", "k", "d", 1, 0, 0})
		for i := range 150 {
			steps = append(steps, step{fmt.Sprint("p", i), "alice", "k", fmt.Sprint("p", i), 1000, 0, 0})
		}
		steps = append(steps, step{"d again after its window", "alice", "k", "d", 1000, 2, 0})
		for i := range 150 {
			steps = append(steps, step{fmt.Sprint("p", i, " replayed"), "alice", "k", fmt.Sprint("p", i), 1000, 3, Replayed})
		}
		steps = append(steps, step{"d replayed", "alice", "k", "d", 1000, 3, Replayed})
		run(t, c, steps)
	})
}

// TestReplayCacheShares floods a cache with one caller's proofs under 17
// keys, then one key's under 17 callers, then both at once; none of them
// fills it, and a caller with a key of its own still finds room.
func TestReplayCacheShares(t *testing.T) {
	const size = 1024
	now := time.Unix(1_800_000_000, 0)
	add := func(c *ReplayCache, caller, client string, i int) Problem {
		k := ClientKey(client)
		v, _ := c.Add(Use{Caller: callerKey("attackers/" + caller), Client: k, Proof: ProofKey(k, fmt.Sprint(i)), Expires: now.Add(time.Hour), Now: now})
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
			c := NewReplayCache(size)
			held := 0
			for i := range 10 * size {
				caller, client := tt.attacker(i)
				if add(c, caller, client, i) == 0 {
					held++
				}
			}
			if held > tt.maxHeld || held < tt.maxHeld-17 {
				t.Errorf("the flood holds %d of %d places; want about %d", held, size, tt.maxHeld)
			}
			for i := range 3 {
				if v := add(c, "victim", "victim-key", -1-i); v != 0 {
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
//	go test ./auth/dpop -run '^$' -bench ReplayCacheMemory -benchtime 1x
func BenchmarkReplayCacheMemory(b *testing.B) {
	for range b.N {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		c := NewReplayCache(ReplayEntries)
		now := time.Now()
		for i := range ReplayEntries {
			k := ClientKey(fmt.Sprint("key-", i))
			a := Use{Caller: callerKey(fmt.Sprint("user-", i)), Client: k, Proof: ProofKey(k, "jti"), Expires: now.Add(time.Hour), Now: now}
			if v, _ := c.Add(a); v != 0 {
				b.Fatalf("proof %d refused", i)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/(1<<20), "MiB/full")
		runtime.KeepAlive(c)
	}
}

// callerKey is a hash of the caller name, as the shares of the cache are
// kept by.
func callerKey(name string) [16]byte {
	sum := sha256.Sum256([]byte("caller\x00" + name))
	return [16]byte(sum[:16])
}
