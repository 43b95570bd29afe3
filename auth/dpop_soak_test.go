package auth_test

import (
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
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
	if os.Getenv("TEST_SOAK") != "1" {
		t.Skip("a load test: set TEST_SOAK=1 to run it")
	}
	for _, tt := range []struct {
		name  string
		rate  bool
		every time.Duration // the other user's pace
	}{{"no rate limit", false, 50 * time.Millisecond}, {"rate limit", true, 250 * time.Millisecond}} {
		t.Run(tt.name, func(t *testing.T) {
			staff, customers := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
			o := auth.Options{DPoPWindow: 2 * time.Second}
			if tt.rate {
				limit, err := auth.NewRateLimit(5, 10)
				if err != nil {
					t.Fatal(err)
				}
				o.RateLimit = limit
			}
			srv := newDPoPIssuersServer(t, o,
				auth.Issuer{Name: "staff", Config: auth.Config{Issuer: "https://staff.example"}, Keys: authtest.KeySet(staff)},
				auth.Issuer{Name: "customers", Config: auth.Config{Issuer: "https://customers.example"}, Keys: authtest.KeySet(customers)})
			auth.SetReplayLimits(srv.v, 512)
			type client struct {
				key   authtest.Key
				token string
			}
			newClient := func(issuer authtest.Key, iss, sub string) client {
				k := authtest.NewKey(t, "ES256")
				return client{k, boundTo(t, issuer, k.Verify.Public, map[string]any{"iss": iss, "sub": sub})}
			}
			var flood []client
			for _, sub := range []string{"mallory", "eve"} {
				for range 17 {
					flood = append(flood, newClient(staff, "https://staff.example", sub))
				}
			}
			victim := newClient(customers, "https://customers.example", "alice")

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
						c := flood[i%len(flood)]
						resp := dpopResponse(t, "GET", srv.url, "DPoP "+c.token, authtest.Proof(t, c.key, "GET", srv.url, c.token, nil, nil))
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
				if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+victim.token, authtest.Proof(t, victim.key, "GET", srv.url, victim.token, nil, nil)); status != http.StatusOK {
					t.Errorf("the other issuer's user, request %d during the flood: %d %q; want 200", requests, status, ch)
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
