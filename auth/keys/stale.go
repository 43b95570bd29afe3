package keys

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// Fetched keys are kept when a fetch fails, so that an outage of the
// identity provider does not stop the service. A key the provider removed
// because it leaked would then verify for as long as the outage lasts:
// HoldFresh bounds that (an issuer's max_stale). The bound is the
// caller's, per issuer, so that a reload that changes it keeps the
// issuer's key source.

// HoldFresh returns the keys to look up k's keys with, fetched keys that
// no fetch confirmed within maxAge (on the clock now) refused, and the
// Freshness that tells whether they are; and it makes each part of k that
// fetches its keys refresh at least every maxAge/2, so that while the
// identity provider answers its keys never go stale (every Refresh again
// for a maxAge of 0). Keys read from files are never fetched: maxAge
// leaves them alone. With a maxAge of 0, or no fetched part, it returns k
// and a nil Freshness.
func HoldFresh(k Keys, maxAge time.Duration, now func() time.Time) (Keys, *Freshness) {
	fetched := fetchedOf(k)
	for _, j := range fetched {
		j.keepFresh(maxAge)
	}
	if maxAge <= 0 || len(fetched) == 0 {
		return k, nil
	}
	return mapFetched(k, func(j *JWKS) Keys {
		return &freshKeys{j: j, limit: maxAge, now: now}
	}), &Freshness{fetched: fetched, limit: maxAge}
}

// Freshness says whether the fetched keys of a source were confirmed by a
// fetch within their limit (see [HoldFresh]). A nil *Freshness bounds
// nothing: its keys are always fresh.
type Freshness struct {
	fetched []*JWKS
	limit   time.Duration
}

// Fresh reports whether every fetched part was confirmed within the limit
// at now. It is on the path of every cached request: without a limit it
// costs one nil check.
func (f *Freshness) Fresh(now time.Time) bool {
	if f == nil {
		return true
	}
	for _, j := range f.fetched {
		if j.staleAt(now, f.limit) {
			return false
		}
	}
	return true
}

// Err returns why the fetched keys are stale at now, an error wrapping
// [ErrNoKeys] and the cause of the last failed fetch; nil when they are
// fresh.
func (f *Freshness) Err(now time.Time) error {
	if f == nil {
		return nil
	}
	for _, j := range f.fetched {
		if j.staleAt(now, f.limit) {
			return j.staleError(now, f.limit)
		}
	}
	return nil
}

// fetchedOf returns the parts of k that fetch their keys.
func fetchedOf(k Keys) []*JWKS {
	switch s := k.(type) {
	case multiKeys:
		var out []*JWKS
		for _, part := range s {
			out = append(out, fetchedOf(part)...)
		}
		return out
	case *JWKS:
		return []*JWKS{s}
	}
	return nil
}

// mapFetched returns k with each part that fetches its keys replaced by
// what wrap makes of it.
func mapFetched(k Keys, wrap func(*JWKS) Keys) Keys {
	switch s := k.(type) {
	case multiKeys:
		out := make(multiKeys, len(s))
		for i, part := range s {
			out[i] = mapFetched(part, wrap)
		}
		return out
	case *JWKS:
		return wrap(s)
	}
	return k
}

// staleAt reports whether j's keys, fetched once at least, were last
// confirmed by a fetch more than limit before now.
func (j *JWKS) staleAt(now time.Time, limit time.Duration) bool {
	c := j.confirmed.Load()
	return c != 0 && now.UnixNano()-c > int64(limit)
}

// staleError is the error of keys that are stale at now: it wraps
// [ErrNoKeys] and the cause of the last failed fetch.
func (j *JWKS) staleError(now time.Time, limit time.Duration) error {
	age := now.Sub(time.Unix(0, j.confirmed.Load())).Round(time.Second)
	j.mu.Lock()
	last := j.lastErr
	j.mu.Unlock()
	if last == nil {
		return fmt.Errorf("jwks %s: %w: no fetch confirmed the keys for %s, over max_stale %s", j.source, ErrNoKeys, age, limit)
	}
	return fmt.Errorf("jwks %s: %w: no fetch confirmed the keys for %s, over max_stale %s: %w", j.source, ErrNoKeys, age, limit, last)
}

// freshKeys are the keys of a JWKS as long as a fetch confirmed them
// within limit, by the clock now. Stale keys are tried once more the way an
// unknown kid is: one fetch, waited for, at most once per MinRefresh;
// otherwise a lookup fails at once with an error wrapping [ErrNoKeys].
type freshKeys struct {
	j     *JWKS
	limit time.Duration
	now   func() time.Time
	// stale is whether the last lookup found the keys stale: the changes
	// are logged, not every refusal.
	stale atomic.Bool
}

func (f *freshKeys) Key(ctx context.Context, kid, alg string) (Key, error) {
	if f.j.staleAt(f.now(), f.limit) {
		if done := f.j.startFetch(true, trace.SpanContextFromContext(ctx)); done != nil {
			select {
			case <-done:
			case <-ctx.Done():
			}
		}
		if now := f.now(); f.j.staleAt(now, f.limit) {
			err := f.j.staleError(now, f.limit)
			if f.stale.CompareAndSwap(false, true) {
				f.j.log.Warn("jwks keys stale: their tokens are refused until a fetch succeeds",
					zap.String("source", f.j.source), zap.Duration("max_stale", f.limit), zap.Error(err))
			}
			return Key{}, err
		}
	}
	if f.stale.CompareAndSwap(true, false) {
		f.j.log.Info("jwks keys confirmed again", zap.String("source", f.j.source))
	}
	return f.j.Key(ctx, kid, alg)
}
