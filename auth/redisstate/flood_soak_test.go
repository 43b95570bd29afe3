package redisstate_test

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/redisstate"
	"github.com/plantstore/plantstore/auth/redisstate/redistest"
	"github.com/plantstore/plantstore/observability/testenv"
)

// TestSoakCallerFlood measures what one caller can make Redis hold: 16
// EdDSA keys of its own, a bound token for each, a fresh jti per proof,
// eight goroutines for 30 s against one replica without -rate-limit. It
// logs the keys Redis holds and the memory it added, and the answers the
// caller got; with the caller's share of the store bounded, the proof
// keys must stay within it. TEST_SOAK=1 (about 35 s).
func TestSoakCallerFlood(t *testing.T) {
	testenv.Soak(t)
	srv := redistest.Start(t)
	issuer := authtest.NewKey(t, "ES256")
	r := newReplica(t, issuer, srv.URL(), 0, 0)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	memory := func() int64 {
		text, err := c.Info(t.Context(), "memory").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(text) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		t.Fatal("no used_memory")
		return 0
	}
	before := memory()
	type key struct {
		k     authtest.Key
		token string
	}
	var keys []key
	for range 16 {
		k := authtest.NewKey(t, "EdDSA")
		keys = append(keys, key{k, bound(t, issuer, k, "mallory")})
	}
	var accepted, quota, other atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := keys[i%len(keys)]
				switch err := r.send(k.token, authtest.Proof(t, k.k, "GET", publicURL, k.token, nil, nil)); reason(err) {
				case "":
					accepted.Add(1)
				case string(auth.ReasonDPoPQuota):
					quota.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	time.Sleep(30 * time.Second)
	close(stop)
	wg.Wait()
	n, err := c.DBSize(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	proofs := len(redisKeys(t, srv.Addr(), "plantstore:p:*"))
	added := memory() - before
	t.Logf("one caller, 16 keys, 8 goroutines, 30 s: %d accepted, %d dpop_quota, %d other; Redis holds %d keys (%d proof keys), %.1f MiB more (%.0f B a proof key)",
		accepted.Load(), quota.Load(), other.Load(), n, proofs, float64(added)/(1<<20), float64(added)/float64(max(proofs, 1)))
	if limit := redisstate.DefaultCallerProofs; proofs > limit {
		t.Errorf("%d proof keys of one caller; want at most %d", proofs, limit)
	}
}
