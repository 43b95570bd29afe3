package dpop

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestReplayCacheBytes fills a replay cache as BenchmarkReplayCacheMemory
// does (every proof from another caller and another key) and requires the
// heap it holds to stay within ReplayCacheBytes, which the import guard and
// the capacity model count for every replica; a cache of a quarter of the
// places must hold less than a third of it, or the bound says nothing.
func TestReplayCacheBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a replay cache of 262,144 proofs")
	}
	for _, tt := range []struct {
		entries  int
		min, max int64
	}{
		{ReplayEntries, ReplayCacheBytes * 9 / 10, ReplayCacheBytes},
		{ReplayEntries / 4, 0, ReplayCacheBytes / 3},
	} {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		c := NewReplayCache(tt.entries)
		now := time.Now()
		for i := range tt.entries {
			k := ClientKey(fmt.Sprint("key-", i))
			a := Use{Caller: callerKey(fmt.Sprint("user-", i)), Client: k, Proof: ProofKey(k, "jti"), Expires: now.Add(time.Hour), Now: now}
			if p, _ := c.Add(a); p != 0 {
				t.Fatalf("proof %d refused", i)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		held := int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
		runtime.KeepAlive(c)
		if held < tt.min || held > tt.max {
			t.Errorf("a replay cache of %d proofs holds %d bytes (%.1f a proof), want %d to %d", tt.entries, held, float64(held)/float64(tt.entries), tt.min, tt.max)
		}
	}
}
