package redisstate_test

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/jws"
	"github.com/plantstore/plantstore/auth/redisstate/redistest"
)

// benchRounds is how many times BenchmarkSharedCost runs each path, in
// turns, so that a loaded machine weighs on every path alike.
const benchRounds = 3

// BenchmarkSharedCost is the cost of the shared state to a replica, from
// parallel callers against a loopback redis-server, each path in turns
// with the one it is compared with: a cached bearer request without a
// rate and with -rate-limit shared in Redis, 8 callers a CPU, and a DPoP request with this
// replica's replay cache alone and with the replay check shared. Besides
// ns/op it reports cpu-ns/op, the CPU this process (the replica, not
// redis-server) spent a request.
//
//	go test ./auth/redisstate -run '^$' -bench BenchmarkSharedCost -benchtime 2s
func BenchmarkSharedCost(b *testing.B) {
	srv := redistest.Start(b)
	issuer := authtest.NewKey(b, "ES256")
	local := func(rate float64) *auth.Verifier {
		o := auth.Options{PublicURL: mustURL(b, "https://plants.example.com")}
		if rate > 0 {
			var err error
			if o.RateLimit, err = auth.NewRateLimit(rate, int(rate)); err != nil {
				b.Fatal(err)
			}
		}
		v, err := auth.NewVerifier(o, auth.Issuer{JWS: jws.New(authtest.KeySet(issuer))})
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	paths := []struct {
		name string
		dpop bool
		v    *auth.Verifier
	}{
		{"bearer-nolimit", false, local(0)},
		{"bearer-sharedrate", false, newReplica(b, issuer, srv.URL(), 1e6, 1e6).v},
		{"dpop-local", true, local(0)},
		{"dpop-shared", true, newReplica(b, issuer, srv.URL(), 0, 0).v},
	}
	var callers atomic.Int64
	for round := range benchRounds {
		for _, p := range paths {
			b.Run(fmt.Sprintf("%s/round-%d", p.name, round+1), func(b *testing.B) {
				// A caller of its own for each run, so that no run fills
				// a caller's share of the replay caches.
				sub := fmt.Sprintf("bench-%d", callers.Add(1))
				var token string
				var proofs []string
				if p.dpop {
					client := authtest.NewKey(b, "ES256")
					token = bound(b, issuer, client, sub)
					proofs = make([]string, b.N)
					for i := range proofs {
						proofs[i] = authtest.Proof(b, client, "GET", publicURL, token, nil, nil)
					}
				} else {
					token = authtest.Token(b, issuer, nil, authtest.Claims(map[string]any{"sub": sub}))
				}
				r := replica{v: p.v}
				if err := r.send(token, ""); !p.dpop && err != nil {
					b.Fatal(err)
				}
				var next atomic.Int64
				cpu := cpuTime()
				// As many requests at once as a replica serving a few
				// dozen connections has.
				b.SetParallelism(8)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						proof := ""
						if p.dpop {
							proof = proofs[next.Add(1)-1]
						}
						if err := r.send(token, proof); err != nil {
							b.Errorf("%s: %v", p.name, err)
							return
						}
					}
				})
				b.StopTimer()
				b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// cpuTime is the CPU time, user and system, this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
