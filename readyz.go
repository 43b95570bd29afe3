package main

import (
	"context"
	"errors"
	"sync/atomic"

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
// of the -jwt-* flags), the store, Redis with -redis-url (advisory: a
// Redis that does not answer never fails readiness), and draining. The
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
