package auth_test

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/observability/testenv"
)

// TestSoakRSAProofCost measures what proofs with random signatures of a
// caller's own RSA-4096 key cost the service, without -rate-limit: four
// connections send them as fast as they go for 5 s (made beforehand, so
// that the attacker's work is not counted), while another caller sends a
// valid ES256 proof every 20 ms; it logs the process's CPU per refused
// proof and the other caller's p50, alone and under the flood, for a key
// of public exponent 2^31-1 and one of 65537. Every refusal must be 401
// or 429, and the other caller always served. TEST_SOAK=1 (about 15 s).
func TestSoakRSAProofCost(t *testing.T) {
	testenv.Soak(t)
	issuer, victimKey := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	send := func(url, token, proof string) int {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Error(err)
			return 0
		}
		req.Header.Set("Authorization", "DPoP "+token)
		req.Header.Set("DPoP", proof)
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for _, e := range []int{math.MaxInt32, 65537} {
		t.Run(fmt.Sprintf("e=%d", e), func(t *testing.T) {
			srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{DPoPWindow: time.Hour})
			key := fakeRSA(4096)
			key.E = e
			token := boundTo(t, issuer, key, map[string]any{"sub": "mallory"})
			victim := boundTo(t, issuer, victimKey.Verify.Public, map[string]any{"sub": "alice"})
			proofs := make([]string, 100000)
			jwk := publicJWK(t, key, nil)
			for i := range proofs {
				proofs[i] = forgedProof(t, "RS256", jwk, srv.url, token, 512)
			}
			// p50 of the other caller over d, one request every 20 ms.
			p50 := func(d time.Duration) time.Duration {
				var lat []time.Duration
				for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
					proof := authtest.Proof(t, victimKey, "GET", srv.url, victim, nil, nil)
					t0 := time.Now()
					if status := send(srv.url, victim, proof); status != http.StatusOK {
						t.Errorf("the other caller: %d; want 200", status)
					}
					lat = append(lat, time.Since(t0))
				}
				slices.Sort(lat)
				return lat[len(lat)/2]
			}
			alone := p50(2 * time.Second)

			var next, refused atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			cpu0, start := cpu(), time.Now()
			var last atomic.Int64 // when the flood ended, Unix nanoseconds
			for range 4 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						i := next.Add(1) - 1
						if int(i) >= len(proofs) {
							last.CompareAndSwap(0, time.Now().UnixNano())
							return
						}
						switch status := send(srv.url, token, proofs[i]); status {
						case http.StatusUnauthorized, http.StatusTooManyRequests:
							refused.Add(1)
						default:
							t.Errorf("a forged proof: %d; want 401 or 429", status)
						}
					}
				})
			}
			under := p50(5 * time.Second)
			close(stop)
			wg.Wait()
			used := cpu() - cpu0
			last.CompareAndSwap(0, time.Now().UnixNano())
			f := failures(t, srv.reg)
			t.Logf("RSA-4096, e=%d: %d proofs refused in %v (%.0f a second), %.3f ms of CPU each (the whole process: server, client, the other caller); the other caller's p50 %v alone, %v under the flood; dpop_invalid %v, dpop_blocked %v",
				e, refused.Load(), time.Duration(last.Load()-start.UnixNano()).Round(time.Millisecond), float64(refused.Load())/time.Duration(last.Load()-start.UnixNano()).Seconds(),
				float64(used)/float64(refused.Load())/1e6, alone, under, f["dpop_invalid"], f["dpop_blocked"])
		})
	}
}
