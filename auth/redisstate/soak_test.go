package redisstate_test

import (
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/redisstate"
	"github.com/plantstore/plantstore/auth/redisstate/redistest"
	"github.com/plantstore/plantstore/observability/setting"
	"github.com/plantstore/plantstore/observability/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestSoakRedisFailures sends DPoP requests from several callers to two
// replicas while Redis is stopped, restarted, paused (SIGSTOP: calls time
// out) and resumed: no request fails, no replay to the replica that
// accepted a proof is accepted at any time, the failures are counted
// (error while stopped, timeout while paused), each replica logs one
// warning and one restore per outage, and both end up. TEST_SOAK=1.
func TestSoakRedisFailures(t *testing.T) {
	testenv.Soak(t)
	srv := redistest.Start(t)
	issuer := authtest.NewKey(t, "ES256")
	replicas := []replica{newReplica(t, issuer, srv.URL(), 10000, 1000), newReplica(t, issuer, srv.URL(), 10000, 1000)}

	var (
		stop             atomic.Bool
		wg               sync.WaitGroup
		sent, replays    atomic.Int64
		failed, accepted atomic.Int64
		firstErr         atomic.Value
	)
	for w := range 4 {
		client := authtest.NewKey(t, "ES256")
		token := bound(t, issuer, client, "caller-"+string(rune('a'+w)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				r := replicas[i%2]
				proof := authtest.Proof(t, client, "GET", publicURL, token, nil, nil)
				sent.Add(1)
				if err := r.send(token, proof); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				// Replayed at the replica that accepted it: refused
				// whatever Redis is doing.
				replays.Add(1)
				if r.send(token, proof) == nil {
					accepted.Add(1)
				}
			}
		}()
	}
	phase := func(what string, do func()) {
		do()
		before := sent.Load()
		deadline := time.Now().Add(5 * time.Second)
		for sent.Load() < before+200 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("%s: %d requests so far", what, sent.Load())
	}
	waitBoth := func() {
		for _, r := range replicas {
			waitUp(t, r)
		}
	}
	phase("up", func() {})
	phase("stopped", srv.Stop)
	phase("restarted", func() { srv.Start(); waitBoth() })
	phase("paused", srv.Pause)
	phase("resumed", func() { srv.Resume(); waitBoth() })
	stop.Store(true)
	wg.Wait()

	if n := failed.Load(); n != 0 {
		t.Errorf("%d of %d requests failed, the first with %v; want none", n, sent.Load(), firstErr.Load())
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("%d of %d replays to the same replica accepted; want none", n, replays.Load())
	}
	var errors, timeouts float64
	for i, r := range replicas {
		errors += r.requests(t, redisstate.OpReplay, redisstate.ResultError)
		timeouts += r.requests(t, redisstate.OpReplay, redisstate.ResultTimeout)
		if w := r.logs.FilterMessageSnippet("shared state unavailable").FilterField(zap.String("redis", setting.RedactURL(srv.URL()))).Len(); w != 2 {
			t.Errorf("replica %d logged %d warnings; want 2, one an outage", i, w)
		}
		if n := r.logs.FilterMessage("shared state restored").Len(); n != 2 {
			t.Errorf("replica %d logged %d restores; want 2", i, n)
		}
		if r.up(t) != 1 {
			t.Errorf("replica %d up gauge %v at the end; want 1", i, r.up(t))
		}
	}
	if errors == 0 || timeouts == 0 {
		t.Errorf("%v errors and %v timeouts counted; want both, from the stop and the pause", errors, timeouts)
	}
}
