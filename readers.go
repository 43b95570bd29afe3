package main

import (
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/plants"
)

// readerCheck warns when the catalog names readers that no configured
// issuer can match: "user:" and "group:" readers with only named issuers
// (an issuers file), "user@x:" for an issuer x that is not configured. The
// plants they name are then hidden from whoever they were meant for, and
// nothing else would say so. It checks each catalog and each set of
// issuers it is given, once both are known, and writes one line for the
// whole catalog, never one per plant. It is safe for concurrent use: a
// snapshot loads in a goroutine of its own.
type readerCheck struct {
	log *zap.Logger

	mu      sync.Mutex
	catalog *plants.Catalog
	issuers []string // names; "" is the issuer of the -jwt-* flags
	known   bool     // issuers was set
}

// setCatalog checks c, the catalog now served.
func (r *readerCheck) setCatalog(c *plants.Catalog) { r.reloaded(c, nil) }

// setIssuers checks the catalog against the issuers now configured.
func (r *readerCheck) setIssuers(issuers []auth.Issuer) { r.reloaded(nil, issuers) }

// reloaded checks once what a reload changed: the catalog when c is not
// nil, the issuers when issuers is not nil.
func (r *readerCheck) reloaded(c *plants.Catalog, issuers []auth.Issuer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c != nil {
		r.catalog = c
	}
	if issuers != nil {
		r.issuers = r.issuers[:0]
		for _, is := range issuers {
			r.issuers = append(r.issuers, is.Name)
		}
		r.known = true
	}
	r.check()
}

// check logs what the catalog names that the issuers cannot match; r.mu
// is held.
func (r *readerCheck) check() {
	if r.catalog == nil || !r.known {
		return
	}
	u := r.catalog.Unmatched(r.issuers)
	if u.Readers == 0 {
		return
	}
	names := make([]string, len(r.issuers))
	for i, n := range r.issuers {
		if n == "" {
			n = auth.UnnamedIssuerLabel
		}
		names[i] = n
	}
	r.log.Warn("the catalog names readers that no configured issuer can match; the plants they name are hidden from the callers they mean",
		zap.Int("readers", u.Readers), zap.Strings("examples", u.Examples),
		zap.Int("plants", u.Plants), zap.Int("hidden", u.Hidden),
		zap.Strings("issuers", names), zap.String("hint", unmatchedHint(u, r.issuers)))
}

// unmatchedHint says how to make the readers of u match.
func unmatchedHint(u plants.Unmatched, issuers []string) string {
	unqualified := slices.ContainsFunc(u.Examples, func(e string) bool {
		return strings.HasPrefix(e, "user:") || strings.HasPrefix(e, "group:")
	})
	if unqualified && !slices.Contains(issuers, "") {
		return `"user:<sub>" and "group:<g>" name callers of the -jwt-* flags' issuer; with an issuers file, name the issuer: "user@<name>:<sub>", "group@<name>:<g>", "*@<name>"`
	}
	return `a reader "user@<name>:...", "group@<name>:..." or "*@<name>" names callers of the issuer called <name>: configure it, or correct the name`
}
