package redisstate_test

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/redisstate"
	"github.com/plantstore/plantstore/auth/redisstate/redistest"
)

// TestRateSharedConcurrent: three replicas, each sending one caller's
// requests from 8 goroutines at once as fast as Redis answers (far past 3x
// the rate), so that admissions share round trips and replicas hold
// leases: the caller still gets at most rate x (t + the lease life) +
// burst over the three together, over the whole period and over any part
// of it, and the round trips are fewer than the admissions. From an empty
// bucket no lease can be granted; from a full one of 100, each replica
// takes leases until the bucket is half empty.
func TestRateSharedConcurrent(t *testing.T) {
	tests := []struct {
		name  string
		rate  float64
		burst int
		full  bool // the burst is left in the bucket, and counted
	}{
		{"from an empty bucket", 200, 5, false},
		{"from a full bucket, with leases", 1000, 100, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rateSharedConcurrent(t, tt.rate, tt.burst, tt.full)
		})
	}
}

func rateSharedConcurrent(t *testing.T, rate float64, burst int, full bool) {
	srv := redistest.Start(t)
	const replicas, senders = 3, 8
	var states []*redisstate.State
	for range replicas {
		// A timeout longer still than the other tests': the flood loads
		// this machine, and a call timing out would turn the state down.
		states = append(states, newState(t, redisstate.Options{URL: srv.URL(), Timeout: 4 * timeout, Rate: rate, Burst: burst}))
	}
	caller := auth.CallerKey("", "alice")
	if !full {
		// The burst first: the measure starts from an empty bucket.
		for range burst + 5 {
			if _, err := states[0].Admit(t.Context(), auth.Admission{Caller: caller}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var trips int64
	for _, s := range states {
		trips -= s.RoundTrips()
	}
	const period = time.Second
	var tries atomic.Int64
	// admitted holds, for each sender, when each of its admitted
	// requests was sent and answered: Redis or the lease decided between.
	admitted := make([][]span, replicas*senders)
	var wg sync.WaitGroup
	start := time.Now()
	for i, s := range states {
		for j := range senders {
			wg.Go(func() {
				for time.Since(start) < period {
					sent := time.Since(start)
					v, err := s.Admit(t.Context(), auth.Admission{Caller: caller, Now: time.Now()})
					if err != nil {
						t.Error(err)
						return
					}
					tries.Add(1)
					if !v.Limited {
						admitted[i*senders+j] = append(admitted[i*senders+j], span{sent, time.Since(start)})
					}
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, s := range states {
		trips += s.RoundTrips()
	}
	var at []span
	for _, a := range admitted {
		at = append(at, a...)
	}
	slices.SortFunc(at, func(a, b span) int { return cmp.Compare(a.sent, b.sent) })
	ok := len(at)
	most := func(t time.Duration) float64 {
		return rate*(t+redisstate.LeaseLife).Seconds() + float64(burst)
	}
	want := rate * elapsed.Seconds()
	if tries.Load() < 3*int64(want) {
		t.Fatalf("%d requests in %v; the test needs at least 3x the rate", tries.Load(), elapsed)
	}
	// The bound is the upper one; the lower only says the limiter still
	// admits (a loaded machine can stall every sender for a while, which
	// admits less).
	if got := float64(ok); got > most(elapsed) || got < want/2 {
		t.Errorf("%d of %d admitted in %v over three replicas; want at most %.0f (the rate x (t + %v), plus the burst of %d), at least half the rate x t", ok, tries.Load(), elapsed, most(elapsed), redisstate.LeaseLife, burst)
	}
	// Any part of the period: a request counts in it when it was both
	// sent and answered within it, and so admitted within it.
	for _, part := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond} {
		n, from := maxIn(at, part)
		if float64(n) > most(part) {
			t.Errorf("%d admitted in the %v from %v; want at most %.0f (the rate x (t + %v), plus the burst of %d)", n, part, from, most(part), redisstate.LeaseLife, burst)
		}
	}
	if trips >= tries.Load() {
		t.Errorf("%d round trips for %d concurrent admissions; want fewer, several a round trip", trips, tries.Load())
	}
	n, _ := maxIn(at, 100*time.Millisecond)
	t.Logf("%d of %d admitted in %v (rate %v, burst %d), at most %d in 100ms (bound %.0f), %d round trips", ok, tries.Load(), elapsed, rate, burst, n, most(100*time.Millisecond), trips)
}

// A span is when a request was sent and when it was answered.
type span struct{ sent, answered time.Duration }

// maxIn returns the most spans of at (sorted by when sent) within a
// period of d, and where it starts.
func maxIn(at []span, d time.Duration) (n int, from time.Duration) {
	for i, a := range at {
		c := 0
		for _, b := range at[i:] {
			if b.sent > a.sent+d {
				break
			}
			if b.answered <= a.sent+d {
				c++
			}
		}
		if c > n {
			n, from = c, a.sent
		}
	}
	return n, from
}

// TestReplayUnderLoad: 16 goroutines send each of 100 proofs, all at
// once, to two replicas in turn: each proof is accepted exactly once in
// all, and refused as a replay every other time.
func TestReplayUnderLoad(t *testing.T) {
	srv := redistest.Start(t)
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	// A timeout longer than the other tests': a call timing out would
	// leave each replica its own replay cache, and a proof once to each.
	so := redisstate.Options{URL: srv.URL(), Timeout: 4 * timeout}
	replicas := []replica{newReplicaOf(t, issuer, so, 0, 0), newReplicaOf(t, issuer, so, 0, 0)}
	token := bound(t, issuer, client, "alice")
	proofs := make([]string, 100)
	for i := range proofs {
		proofs[i] = authtest.Proof(t, client, "GET", publicURL, token, nil, nil)
	}
	const senders = 16
	accepted := make([]atomic.Int32, len(proofs))
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for i, proof := range proofs {
				err := replicas[(g+i)%2].send(token, proof)
				switch got := reason(err); got {
				case "":
					accepted[i].Add(1)
				case string(auth.ReasonDPoPReplay):
				default:
					t.Errorf("proof %d from sender %d: %q; want accepted or %s", i, g, got, auth.ReasonDPoPReplay)
				}
			}
		})
	}
	wg.Wait()
	for i := range accepted {
		if n := accepted[i].Load(); n != 1 {
			t.Errorf("proof %d accepted %d times over two replicas; want once", i, n)
		}
	}
	for name, r := range map[string]replica{"a": replicas[0], "b": replicas[1]} {
		t.Logf("replica %s: %v replay calls in %d round trips", name, r.requests(t, redisstate.OpReplay, redisstate.ResultOK), r.state.RoundTrips())
		if e := r.requests(t, redisstate.OpReplay, redisstate.ResultError) + r.requests(t, redisstate.OpReplay, redisstate.ResultTimeout); e != 0 {
			t.Errorf("replica %s: %v failed calls; the test needs Redis to answer every one", name, e)
		}
	}
}

// TestScriptFlushed: admissions sharing a round trip after Redis lost
// the script (SCRIPT FLUSH, as after a restart the probe did not see) are
// all answered, the script sent again.
func TestScriptFlushed(t *testing.T) {
	srv := redistest.Start(t)
	s := newState(t, redisstate.Options{URL: srv.URL(), Rate: 1000, Burst: 1000})
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	if err := c.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			v, err := s.Admit(t.Context(), auth.Admission{Caller: auth.CallerKey("", "alice")})
			if err != nil || v.Limited {
				t.Errorf("admission %d after SCRIPT FLUSH: %+v, %v; want admitted", i, v, err)
			}
		})
	}
	wg.Wait()
	if !s.Up() {
		t.Error("state down after SCRIPT FLUSH; want up")
	}
}
