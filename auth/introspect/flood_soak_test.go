package introspect_test

import (
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/introspect"
	"github.com/plantstore/plantstore/observability/testenv"
)

// TestFloodFigures (TEST_SOAK=1) floods the service, at its default
// bounds, with 10,000 distinct random opaque tokens as fast as two callers
// can send them, while a third caller whose token is cached keeps asking:
// the endpoint's calls a second stay at -introspection-max-rate (50, and
// a burst of one second's worth), and the cached caller is answered 200
// throughout. Its p99 with and without the flood is a figure, logged for
// docs/performance.md, not checked: on a shared machine it measures the
// neighbours as much as the service.
func TestFloodFigures(t *testing.T) {
	testenv.Soak(t)
	p := newIDP(t)
	s := newService(t, p, baseConfig(), time.Hour, nil, auth.Options{})
	cached := p.issue(nil)
	if got := s.get(t, cached); got.status != http.StatusOK {
		t.Fatalf("%d; want 200", got.status)
	}
	const samples = 3000
	p99 := func(stop *atomic.Bool) time.Duration {
		var lat []time.Duration
		for len(lat) < samples && (stop == nil || !stop.Load()) {
			start := time.Now()
			if got := s.get(t, cached); got.status != http.StatusOK {
				t.Errorf("the cached caller got %d", got.status)
				return 0
			}
			lat = append(lat, time.Since(start))
		}
		if len(lat) == 0 {
			t.Error("the cached caller made no request")
			return 0
		}
		slices.Sort(lat)
		return lat[len(lat)*99/100]
	}
	quiet := p99(nil)

	// flood sends 10,000 tokens of gen from two callers as fast as they
	// go, while the cached caller keeps asking; it returns that caller's
	// p99, how long the flood took, and how many were answered 503.
	flood := func(gen func() string) (p99Flooded, elapsed time.Duration, unavailable int64) {
		var next, refused atomic.Int64
		var done atomic.Bool
		var senders, watch sync.WaitGroup
		start := time.Now()
		for range 2 {
			senders.Go(func() {
				for next.Add(1) <= 10000 {
					if s.get(t, gen()).status == http.StatusServiceUnavailable {
						refused.Add(1)
					}
				}
			})
		}
		watch.Go(func() { p99Flooded = p99(&done) })
		senders.Wait()
		done.Store(true)
		watch.Wait()
		return p99Flooded, time.Since(start), refused.Load()
	}
	// The reference: as many requests, refused before any issuer is
	// asked (a character no token has), so that what the flood of
	// opaque tokens adds to the cached caller's p99 beyond any flood's
	// shows.
	malformed, _, _ := flood(func() string { return randomToken() + "!" })
	before := p.calls.Load()
	flooded, elapsed, unavailable := flood(randomToken)
	calls := p.calls.Load() - before
	perSecond := float64(calls) / elapsed.Seconds()
	t.Logf("10,000 random tokens in %s: %d calls to the endpoint (%.1f a second, bound %d and a burst of %d), %d refused with 503; cached caller p99 %s alone, %s under the flood (%.2fx), %s under a flood of as many malformed tokens (%.2fx of that)",
		elapsed.Round(time.Millisecond), calls, perSecond, introspect.DefaultMaxRate, introspect.DefaultMaxRate, unavailable, quiet, flooded, float64(flooded)/float64(quiet), malformed, float64(flooded)/float64(malformed))
	if bound := int64(introspect.DefaultMaxRate*elapsed.Seconds()) + introspect.DefaultMaxRate + 1; calls > bound {
		t.Errorf("%d calls in %s; want at most %d", calls, elapsed, bound)
	}
}
