package redisstate_test

import (
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/jws"
	"github.com/plantstore/plantstore/auth/redisstate"
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
// redis-server) spent a request, and trips/op, the round trips to Redis a
// request.
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
	rated, dpop := newReplica(b, issuer, srv.URL(), 1e6, 1e6), newReplica(b, issuer, srv.URL(), 0, 0)
	paths := []struct {
		name  string
		dpop  bool
		v     *auth.Verifier
		state *redisstate.State
	}{
		{"bearer-nolimit", false, local(0), nil},
		{"bearer-sharedrate", false, rated.v, rated.state},
		{"dpop-local", true, local(0), nil},
		{"dpop-shared", true, dpop.v, dpop.state},
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
				if _, err := p.v.Authenticate(request(token, "")); !p.dpop && err != nil {
					b.Fatal(err)
				}
				var next atomic.Int64
				var trips int64
				if p.state != nil {
					trips = p.state.RoundTrips()
				}
				cpu := cpuTime()
				// As many requests at once as a replica serving a few
				// dozen connections has.
				b.SetParallelism(8)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					// One request a goroutine, as a server reuses its
					// buffers, so that making it does not hide what
					// authenticating it costs.
					req := request(token, "")
					for pb.Next() {
						if p.dpop {
							req = request(token, proofs[next.Add(1)-1])
						}
						if _, err := p.v.Authenticate(req); err != nil {
							b.Errorf("%s: %v", p.name, err)
							return
						}
					}
				})
				b.StopTimer()
				b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
				if p.state != nil {
					b.ReportMetric(float64(p.state.RoundTrips()-trips)/float64(b.N), "trips/op")
				}
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

// request returns a GET of /plants with the token and proof given ("" for
// a bearer request), made as a server's request is, without parsing one.
func request(token, proof string) *http.Request {
	u, _ := url.Parse(publicURL)
	h := http.Header{}
	if proof == "" {
		h.Set("Authorization", "Bearer "+token)
	} else {
		h.Set("Authorization", "DPoP "+token)
		h.Set("DPoP", proof)
	}
	return &http.Request{Method: http.MethodGet, URL: u, Host: u.Host, Header: h, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, RemoteAddr: "192.0.2.1:1234", RequestURI: u.RequestURI()}
}
