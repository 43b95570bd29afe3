package auth_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/observability/testenv"
)

// TestDPoPQuotaUnderLoad floods a replica's replay cache, made small (512
// proofs) and quick to turn over (a 2 s window), from two subjects of one
// issuer, each with 17 keys and a bound token per key, sending fresh
// proofs as fast as four connections go; meanwhile a user of another
// issuer sends requests at a steady pace within the rate, each of which
// must be served: never dpop_quota, never anything but 200. Without a
// rate limit the flood holds what the fair shares leave it and is refused
// the rest (429 dpop_quota) while the other user sends 20 a second; with
// one (5 a second, a burst of 10, as a deployment would set it) the flood
// is refused for its rate before any of its proofs is remembered, and the
// other user sends 4 a second.
// It runs with TEST_SOAK=1 (about 12 s).
func TestDPoPQuotaUnderLoad(t *testing.T) {
	testenv.Soak(t)
	for _, tt := range []struct {
		name  string
		rate  bool
		every time.Duration // the other user's pace
	}{{"no rate limit", false, 50 * time.Millisecond}, {"rate limit", true, 250 * time.Millisecond}} {
		t.Run(tt.name, func(t *testing.T) {
			o := auth.Options{DPoPWindow: 2 * time.Second}
			if tt.rate {
				limit, err := auth.NewRateLimit(5, 10)
				if err != nil {
					t.Fatal(err)
				}
				o.RateLimit = limit
			}
			srv := newDPoPIssuers(t, o, 512)
			var flood []dpopClient
			for _, sub := range []string{"mallory", "eve"} {
				for range 17 {
					flood = append(flood, srv.client(t, "staff", sub))
				}
			}
			victim := srv.client(t, "customers", "alice")

			stop := make(chan struct{})
			var wg sync.WaitGroup
			var served, quota, limited atomic.Int64
			for w := range 4 {
				wg.Go(func() {
					for i := w; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						resp := srv.send(t, flood[i%len(flood)], "")
						switch {
						case resp.StatusCode == http.StatusOK:
							served.Add(1)
						case resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("WWW-Authenticate") == "" && tt.rate:
							limited.Add(1)
						case resp.StatusCode == http.StatusTooManyRequests:
							quota.Add(1)
						default:
							t.Errorf("flood request: %d %v", resp.StatusCode, resp.Header["Www-Authenticate"])
							return
						}
					}
				})
			}
			tick := time.NewTicker(tt.every)
			defer tick.Stop()
			deadline := time.After(5 * time.Second)
			requests := 0
		victim:
			for {
				select {
				case <-deadline:
					break victim
				case <-tick.C:
				}
				requests++
				if resp := srv.send(t, victim, ""); resp.StatusCode != http.StatusOK {
					t.Errorf("the other issuer's user, request %d during the flood: %d %v; want 200", requests, resp.StatusCode, resp.Header)
				}
			}
			close(stop)
			wg.Wait()
			t.Logf("the flood: %d served, %d refused for room (dpop_quota), %d for its rate; the other user: %d served", served.Load(), quota.Load(), limited.Load(), requests)
			// The test proves something only if the flood pressed on the
			// cache, or on its rate.
			if tt.rate && (limited.Load() < 100 || quota.Load() != 0) || !tt.rate && quota.Load() < 100 {
				t.Errorf("the flood was refused %d times for room and %d for its rate: it did not press as meant", quota.Load(), limited.Load())
			}
			if got := failures(t, srv.reg); got["dpop_quota"] != float64(quota.Load()) {
				t.Errorf("dpop_quota counted %v times; want the flood's %d and none of the other user's", got["dpop_quota"], quota.Load())
			}
		})
	}
}
