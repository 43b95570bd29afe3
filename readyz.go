package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/plantstore/plantstore/auth/revoke"

	"github.com/plantstore/plantstore/observability"
)

// errDraining is the reason of the draining check once a stop began.
var errDraining = errors.New("shutting down")

// errSharedDown is the reason of the redis check while Redis does not
// answer: the replica serves on its own state (never a URL, which may hold
// a password).
var errSharedDown = errors.New("unavailable: this replica uses its own replay cache and rate limit")

// readyChecks returns the checks of /readyz?verbose, one line each, in
// this order: each issuer's keys ("issuer:NAME", or "keys" for the issuer
// of the -jwt-* flags), the store, the revocations' store when there are
// revocations (advisory: the last revocations read keep applying), Redis
// with -redis-url (advisory: a Redis that does not answer never fails
// readiness), and draining. The
// issuers are read on every call, so a reloaded issuers file shows at
// once. A new part of readiness is one more append here; it must fail
// readiness's own check (readiness) too, or be advisory.
func readyChecks(draining *atomic.Bool, keys verification, store func(context.Context) error) func() []observability.Check {
	return func() []observability.Check {
		var checks []observability.Check
		for _, s := range keys.verifier.KeysReady() {
			name := "keys"
			if s.Issuer != "" {
				name = "issuer:" + s.Issuer
			}
			err := s.Err
			checks = append(checks, observability.Check{Name: name, Run: func(context.Context) error { return err }})
		}
		checks = append(checks, observability.Check{Name: "store", Run: store})
		if keys.revocations != nil {
			checks = append(checks, revocationsCheck(keys.revocations))
		}
		if up, ok := keys.shared.(interface{ Up() bool }); ok {
			checks = append(checks, observability.Check{Name: "redis", Advisory: true, Run: func(context.Context) error {
				if !up.Up() {
					return errSharedDown
				}
				return nil
			}})
		}
		checks = append(checks, observability.Check{Name: "draining", Run: func(context.Context) error {
			if draining.Load() {
				return errDraining
			}
			return nil
		}})
		return checks
	}
}

// revocationsStale is how old the revocations in force may be before the
// revocations check says so: PlantstoreRevocationsStale's threshold.
const revocationsStale = 3 * time.Minute

// revocationsCheck is the advisory check of the revocations' store: the
// replica keeps applying the last revocations it read, so an unreadable
// store never fails readiness, but the line says how old they are.
func revocationsCheck(r *revoke.Revocations) observability.Check {
	return observability.Check{Name: "revocations", Advisory: true, Run: func(context.Context) error {
		switch age := r.Age(); {
		case math.IsInf(age, 1):
			return errors.New("not read yet")
		case age > revocationsStale.Seconds():
			return fmt.Errorf("stale: last read %s ago; the revocations read then stay in force", time.Duration(age*float64(time.Second)).Round(time.Second))
		}
		return nil
	}}
}
