package auth

import (
	"context"
	"slices"
	"time"

	"github.com/plantstore/plantstore/auth/dpop"
)

// SetReplayLimits gives v a DPoP replay cache of size entries, so that
// tests can fill it.
func SetReplayLimits(v *Verifier, size int) {
	v.replays = dpop.NewReplayCache(size)
	v.admitter = newLocalAdmitter(v.opts.RateLimit, v.replays)
}

// ReplayEntries returns the number of proofs v's replay cache remembers,
// those of an expired window not yet dropped left out.
func ReplayEntries(v *Verifier) int {
	n, _ := v.replays.Fill()
	return n
}

// Verify runs the token checks of [Verifier.Authenticate] (steps 2 to 9)
// on a bearer token, for the tests that look at tokens rather than
// requests.
func (v *Verifier) Verify(ctx context.Context, token string) (*Identity, error) {
	e, err := v.verify(ctx, token)
	if err != nil {
		return nil, err
	}
	return &e.id, nil
}

// Issuers returns the issuers v verifies against, with their Configs'
// defaults filled in.
func (v *Verifier) Issuers() []Issuer {
	t := v.issuers.Load()
	out := make([]Issuer, 0, len(t.all))
	for _, is := range t.all {
		c := is.cfg
		c.Algorithms = slices.Clone(c.Algorithms)
		c.Audiences = slices.Clone(c.Audiences)
		out = append(out, Issuer{Name: is.name, Config: c, JWS: is.trusts[0], Opaque: is.trusts[1]})
	}
	return out
}

// SetClock makes v read the time from now, for tests that move it. Call it
// before v verifies anything.
func SetClock(v *Verifier, now func() time.Time) { v.now = now }

// SetFailureBudget gives v a budget of failed proof signatures of budget
// a minute per caller and per key, so that benchmarks can refuse the same
// forged proof at its signature without end.
func SetFailureBudget(v *Verifier, budget int) {
	v.failures = dpop.NewFailures(budget, dpop.FailurePeriod, dpop.FailureEntries)
}
