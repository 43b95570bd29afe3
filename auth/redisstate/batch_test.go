package redisstate_test

import (
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
// the rate), so that admissions share round trips: the caller still gets
// at most the rate within 10 %, plus the burst, over the three together,
// and the round trips are fewer than the admissions.
func TestRateSharedConcurrent(t *testing.T) {
	srv := redistest.Start(t)
	const rate, burst = 200.0, 5
	var states []*redisstate.State
	for range 3 {
		// A timeout longer still than the other tests': the flood loads
		// this machine, and a call timing out would turn the state down.
		s, err := redisstate.New(redisstate.Options{URL: srv.URL(), Timeout: 4 * timeout, Rate: rate, Burst: burst})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		states = append(states, s)
	}
	caller := auth.CallerKey("", "alice")
	// The burst first: the measure starts from an empty bucket.
	for range burst + 5 {
		if _, err := states[0].Admit(t.Context(), auth.Admission{Caller: caller}); err != nil {
			t.Fatal(err)
		}
	}
	var trips int64
	for _, s := range states {
		trips -= s.RoundTrips()
	}
	const period = time.Second
	var ok, tries atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for _, s := range states {
		for range 8 {
			wg.Go(func() {
				for time.Since(start) < period {
					v, err := s.Admit(t.Context(), auth.Admission{Caller: caller, Now: time.Now()})
					if err != nil {
						t.Error(err)
						return
					}
					tries.Add(1)
					if !v.Limited {
						ok.Add(1)
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
	want := rate * elapsed.Seconds()
	if tries.Load() < 3*int64(want) {
		t.Fatalf("%d requests in %v; the test needs at least 3x the rate", tries.Load(), elapsed)
	}
	// The bound is the upper one; the lower only says the limiter still
	// admits (a loaded machine can stall every sender for a while, which
	// admits less).
	if got := float64(ok.Load()); got > want*1.1+burst || got < want/2 {
		t.Errorf("%d of %d admitted in %v over three replicas after the burst; want at most %.0f within 10%% (plus the burst of %d), at least half of it", ok.Load(), tries.Load(), elapsed, want, burst)
	}
	if trips >= tries.Load() {
		t.Errorf("%d round trips for %d concurrent admissions; want fewer, several a round trip", trips, tries.Load())
	}
	t.Logf("%d of %d admitted in %v (rate %v), %d round trips", ok.Load(), tries.Load(), elapsed, rate, trips)
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
	s, err := redisstate.New(redisstate.Options{URL: srv.URL(), Timeout: timeout, Rate: 1000, Burst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
