package auth

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
// [Config.MaxStale] bounds that. The rule is the verifier's, per issuer,
// so that a reload that changes it keeps the issuer's key source.

// holdFresh makes is find its keys through parts that refuse fetched keys
// no fetch confirmed within MaxStale, read on v's clock, and makes each of
// those parts refresh at least every MaxStale/2, so that while the
// identity provider answers its keys never go stale. Keys read from files
// are never fetched: MaxStale leaves them alone.
func (is *issuer) holdFresh(v *Verifier) {
	fetched := fetchedOf(is.keys)
	for _, j := range fetched {
		j.keepFresh(is.cfg.MaxStale)
	}
	if is.cfg.MaxStale <= 0 || len(fetched) == 0 {
		return
	}
	is.fetched = fetched
	now := func() time.Time { return v.now() }
	is.lookup = mapFetched(is.keys, func(j *JWKS) Keys {
		return &freshKeys{j: j, limit: is.cfg.MaxStale, now: now}
	})
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

// fresh reports whether the fetched keys of is, when MaxStale bounds
// them, were all confirmed within it at now. It is on the path of every
// cached request: without MaxStale it costs one length check. An entry
// does not record which part of the keys verified it, so while a JWKS
// of an issuer that also has key files is stale, the tokens of its files
// are verified again on each request rather than served from the cache.
func (is *issuer) fresh(now time.Time) bool {
	for _, j := range is.fetched {
		if j.staleAt(now, is.cfg.MaxStale) {
			return false
		}
	}
	return true
}

// staleness returns why the fetched keys of is are stale at now, nil when
// they are not (or nothing bounds their age).
func (is *issuer) staleness(now time.Time) error {
	for _, j := range is.fetched {
		if j.staleAt(now, is.cfg.MaxStale) {
			return j.staleError(now, is.cfg.MaxStale)
		}
	}
	return nil
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
