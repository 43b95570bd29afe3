package auth_test

import (
	"context"
	"os"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/jws"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/observability/metricstest"
	"github.com/plantstore/plantstore/observability/testenv"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	os.Exit(testenv.Main(m))
}

// verifierOptions are the Options of newVerifier: no leeway, unless a test
// says.
var verifierOptions = auth.Options{}

// newVerifier returns a Verifier of one unnamed issuer with cfg and keys,
// failing the test on a configuration error.
func newVerifier(t testing.TB, cfg auth.Config, ks keys.Keys) *auth.Verifier {
	t.Helper()
	return newVerifierOpts(t, verifierOptions, cfg, ks)
}

// newVerifierOpts is newVerifier with Options.
func newVerifierOpts(t testing.TB, o auth.Options, cfg auth.Config, ks keys.Keys) *auth.Verifier {
	t.Helper()
	v, err := auth.NewVerifier(o, auth.Issuer{Config: cfg, JWS: jws.New(ks)})
	if err != nil {
		t.Fatalf("NewVerifier(%+v): %v", cfg, err)
	}
	return v
}

// failures returns plantstore_auth_failures_total by reason, as gathered
// from reg.
func failures(t testing.TB, reg *prometheus.Registry) map[auth.Reason]float64 {
	t.Helper()
	got := map[auth.Reason]float64{}
	for r, v := range metricstest.ByLabel(t, reg, "plantstore_auth_failures_total", "reason") {
		got[auth.Reason(r)] = v
	}
	return got
}

// fixedKeys is a Keys that answers every lookup with the same key and
// error, whatever the kid and alg, like a careless key source would.
type fixedKeys struct {
	key keys.Key
	err error
}

func (f fixedKeys) Key(_ context.Context, _, _ string) (keys.Key, error) {
	return f.key, f.err
}

// metadataParam matches the resource_metadata parameter that ends every
// challenge (RFC 9728 §5.1) when -public-url is not set.
var metadataParam = regexp.MustCompile(`, resource_metadata="https?://[a-z0-9.:\[\]-]+/\.well-known/oauth-protected-resource(/[a-z]+)?"$`)

// withoutMetadata returns the challenges with their resource_metadata
// parameter taken off, failing t for one that lacks it.
func withoutMetadata(t testing.TB, challenges []string) []string {
	t.Helper()
	out := make([]string, len(challenges))
	for i, c := range challenges {
		loc := metadataParam.FindStringIndex(c)
		if loc == nil {
			t.Errorf("challenge %q names no resource metadata", c)
			out[i] = c
			continue
		}
		out[i] = c[:loc[0]]
	}
	return out
}

// testClock is a clock a test moves by hand. It is safe for concurrent
// use.
type testClock struct{ ns atomic.Int64 }

// newTestClock returns a clock that reads at until it is moved.
func newTestClock(at time.Time) *testClock {
	c := &testClock{}
	c.ns.Store(at.UnixNano())
	return c
}

// Now returns the clock's time.
func (c *testClock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// Add moves the clock by d.
func (c *testClock) Add(d time.Duration) { c.ns.Add(int64(d)) }
