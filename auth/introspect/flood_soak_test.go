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
// a burst of one second's worth), and the cached caller's p99 stays
// within 2x of the same caller's without the flood. The figures are
// logged for docs/performance.md.
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
		slices.Sort(lat)
		return lat[len(lat)*99/100]
	}
	quiet := p99(nil)

	before := p.calls.Load()
	var next atomic.Int64
	var unavailable atomic.Int64
	var done atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for range 2 {
		wg.Go(func() {
			for next.Add(1) <= 10000 {
				if s.get(t, randomToken()).status == http.StatusServiceUnavailable {
					unavailable.Add(1)
				}
			}
		})
	}
	var flooded time.Duration
	wg.Go(func() { flooded = p99(&done) })
	for next.Load() < 10000 {
		time.Sleep(10 * time.Millisecond)
	}
	done.Store(true)
	wg.Wait()
	elapsed := time.Since(start)
	calls := p.calls.Load() - before
	perSecond := float64(calls) / elapsed.Seconds()
	t.Logf("10,000 random tokens in %s: %d calls to the endpoint (%.1f a second, bound %d and a burst of %d), %d refused with 503; cached caller p99 %s alone, %s under the flood (%.2fx)",
		elapsed.Round(time.Millisecond), calls, perSecond, introspect.DefaultMaxRate, introspect.DefaultMaxRate, unavailable.Load(), quiet, flooded, float64(flooded)/float64(quiet))
	if bound := int64(introspect.DefaultMaxRate*elapsed.Seconds()) + introspect.DefaultMaxRate + 1; calls > bound {
		t.Errorf("%d calls in %s; want at most %d", calls, elapsed, bound)
	}
	if flooded > 2*quiet {
		t.Errorf("the cached caller's p99 went from %s to %s under the flood; want within 2x", quiet, flooded)
	}
}
