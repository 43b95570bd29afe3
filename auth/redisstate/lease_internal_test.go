package redisstate

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"
)

// TestLeaseTable: a lease is asked for by the calls of a caller that
// find none, sized by the demand of the last lease life less what the
// calls under way ask for, taken until it expires a lease life after its
// call was sent, and dropped then.
func TestLeaseTable(t *testing.T) {
	const ms = int64(time.Millisecond)
	type step struct {
		at int64 // ms
		// asked > 0: report the call sent at sent that asked for asked
		// requests, and left grant tokens.
		asked, grant, sent int64
		took               bool
		want               int64
		leased             int64 // tokens left after the step
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a request every 120 ms asks for one", []step{
			{at: 0, want: 1}, {at: 120, want: 1}, {at: 240, want: 1}, {at: 360, want: 1},
		}},
		{"calls under way share the demand", []step{
			{at: 0, want: 1}, {at: 10, want: 2}, {at: 20, want: 1}, {at: 30, want: 2},
			{at: 35, asked: 2, grant: 1, sent: 10, leased: 1},
			{at: 40, took: true},
			{at: 50, want: 4},
			{at: 55, asked: 2, grant: 1, sent: 30, leased: 1},
			// The later lease's tokens end with the earlier's, at 130.
			{at: 56, asked: 4, grant: 3, sent: 50, leased: 4},
			{at: 60, took: true, leased: 3}, {at: 70, took: true, leased: 2},
			{at: 129, took: true, leased: 1},
			// Expired, and a new window: the last one's demand (8).
			{at: 130, want: 8},
		}},
		{"the last window's demand asks at the start of the next", []step{
			{at: 0, want: 1}, {at: 1, want: 2}, {at: 2, want: 1}, {at: 3, want: 2},
			{at: 4, asked: 2, grant: -1, sent: 1}, {at: 4, asked: 2, grant: -1, sent: 3},
			{at: 150, want: 4},
		}},
		{"no demand left of a window that ended two lease lives ago", []step{
			{at: 0, want: 1}, {at: 1, want: 2}, {at: 2, asked: 2, grant: -1, sent: 1},
			{at: 200, want: 1},
		}},
		{"a lease expires a lease life after its call was sent", []step{
			{at: 0, want: 1}, {at: 10, want: 2}, {at: 20, asked: 2, grant: 5, sent: 10, leased: 5},
			{at: 99, took: true, leased: 4},
			{at: 110, want: 3},
		}},
		{"a failed or limited ask leaves no lease and frees its demand", []step{
			{at: 0, want: 1}, {at: 10, want: 2}, {at: 20, want: 1}, {at: 30, asked: 2, grant: -1, sent: 10},
			{at: 40, want: 4},
		}},
		{"a call asks for at most the cap", func() []step {
			var s []step
			for i := range int64(maxLease + 10) {
				// Each call fails: the whole demand is asked each time.
				w := min(i+1, maxLease)
				s = append(s, step{at: i / 10, want: w})
				if w > 1 {
					s = append(s, step{at: i / 10, asked: w, grant: -1})
				}
			}
			return s
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLeases()
			caller := [16]byte{1}
			for i, s := range tt.steps {
				if s.asked != 0 {
					l.granted(caller, s.asked, s.grant, s.sent*ms, s.at*ms)
				} else if took, want := l.take(caller, s.at*ms); took != s.took || want != s.want {
					t.Fatalf("step %d, take at %d ms = %v, %d; want %v, %d", i, s.at, took, want, s.took, s.want)
				}
				if got := leftAt(l, caller, s.at*ms); got != s.leased {
					t.Fatalf("step %d at %d ms: %d tokens left; want %d", i, s.at, got, s.leased)
				}
			}
		})
	}
}

// leftAt returns the tokens of caller's lease usable at now.
func leftAt(l *leases, caller [16]byte, now int64) int64 {
	sh := l.shard(caller)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[caller]; e != nil && now < e.expires {
		return e.tokens
	}
	return 0
}

// TestLeaseTableBounded: however many callers, the table holds at most
// maxLeaseCallers; past it a new caller asks for one request (no lease),
// and once the callers held are idle for two lease lives they make room.
func TestLeaseTableBounded(t *testing.T) {
	l := newLeases()
	caller := func(i int) (c [16]byte) {
		binary.BigEndian.PutUint64(c[:], uint64(i))
		return c
	}
	for i := range 2 * maxLeaseCallers {
		l.take(caller(i), 1)
		l.take(caller(i), 2) // asks: held until granted
	}
	held := func() (n int) {
		for i := range l.shards {
			n += len(l.shards[i].m)
		}
		return n
	}
	if n := held(); n > maxLeaseCallers {
		t.Fatalf("%d callers held; want at most %d", n, maxLeaseCallers)
	}
	late := caller(3 * maxLeaseCallers)
	for i := range 3 {
		if took, want := l.take(late, 3+int64(i)); took || want != 1 {
			t.Fatalf("a caller past the cap, request %d: %v, %d; want no lease, 1", i, took, want)
		}
	}
	// Those that asked still hold their ask: not dropped.
	later := 3 * int64(leaseLife)
	l.take(late, later)
	if n := held(); n != maxLeaseCallers {
		t.Errorf("%d callers held after the asks' lease lives; want %d (none asking may go)", n, maxLeaseCallers)
	}
	for i := range 2 * maxLeaseCallers {
		l.granted(caller(i), 2, 0, 2, later)
	}
	// Idle now: the late caller's shard makes room for it, and it asks
	// for a lease at its second request.
	idle := later + int64(leaseLife)
	if took, want := l.take(late, idle); took || want != 1 {
		t.Errorf("the late caller once the others are idle, request 1: %v, %d; want no lease, 1", took, want)
	}
	if took, want := l.take(late, idle+1); took || want != 2 {
		t.Errorf("the late caller once the others are idle, request 2: %v, %d; want its demand, 2", took, want)
	}
	if n, sh := held(), l.shard(late); n > maxLeaseCallers-shardCallers+1 || len(sh.m) != 1 {
		t.Errorf("%d callers held, %d in the late caller's shard, after they went idle; want that shard pruned to the late caller", n, len(sh.m))
	}
}

// BenchmarkLeaseTake is one request taken from a lease: many callers
// (each goroutine its own), and one caller from every goroutine.
func BenchmarkLeaseTake(b *testing.B) {
	for _, one := range []bool{false, true} {
		name := "many-callers"
		if one {
			name = "one-caller"
		}
		b.Run(name, func(b *testing.B) {
			l := newLeases()
			var next atomic.Uint64
			b.RunParallel(func(pb *testing.PB) {
				var c [16]byte
				if !one {
					binary.BigEndian.PutUint64(c[:], next.Add(1))
				}
				for pb.Next() {
					now := l.now()
					if took, want := l.take(c, now); !took && want > 1 {
						l.granted(c, want, 1<<40, now, now)
					}
				}
			})
		})
	}
}
