package postgres

import "fmt"

// A Budget is one replica's memory and what it holds besides its catalog:
// what [Budget.MaxCatalogBytes] leaves the catalog. Sizes are in bytes.
type Budget struct {
	// Memory is what the replica's Go runtime may use: its GOMEMLIMIT,
	// which the Deployment sets to the memory request.
	Memory int64
	// TokenCache is the verified-token cache's bound (-jwt-cache-bytes),
	// ReplayCache the DPoP replay cache's when full: both fill under load,
	// whatever the catalog.
	TokenCache, ReplayCache int64
}

// ProcessBytes is what a replica holds serving a small catalog, before its
// caches fill: the resident memory .ci/bench measured serving 1,000 plants
// under load (mem_base_mb in .ci/capacity.d/inputs).
const ProcessBytes = 49 << 20

// BytesPerTextByte is the heap a served catalog takes per byte of its text
// (ids, names, tags and readers), when every plant has readers of its own,
// the costly shape: the text itself, a fixed entry per plant and, for each
// principal, the positions of the plants it reads (TestCatalogMemory
// measures 5.2 to 5.9 as the indexes' maps grow by doubling; plants that
// share their readers take about a quarter of it).
const BytesPerTextByte = 7

// ReloadCopies is how many catalogs a replica holds at the peak of a
// reload: the new one is built beside the one serving.
const ReloadCopies = 2

// DefaultMemory is the base Deployment's memory request, which it passes
// to the runtime as GOMEMLIMIT.
const DefaultMemory = 230 << 20

// MaxCatalogBytes returns the most catalog text a replica of b can serve
// through a reload: its memory, less the process and both caches full,
// over the memory a byte of text takes twice. It returns 0 when nothing is
// left, which [ImportOptions.MaxBytes] would read as no limit: check
// [Budget.Check] first.
func (b Budget) MaxCatalogBytes() int64 {
	left := b.Memory - ProcessBytes - b.TokenCache - b.ReplayCache
	return max(left/(BytesPerTextByte*ReloadCopies), 0)
}

// Check returns an error when b leaves no room for a catalog.
func (b Budget) Check() error {
	if b.MaxCatalogBytes() <= 0 {
		return fmt.Errorf("a replica's memory of %d MiB holds no catalog: the process (%d MiB), the token cache (%d MiB) and the DPoP replay cache (%d MiB) take it all", b.Memory>>20, ProcessBytes>>20, b.TokenCache>>20, b.ReplayCache>>20)
	}
	return nil
}

// String says how the budget is spent, for messages: every bounded
// structure a replica holds, and what is left for the catalog.
func (b Budget) String() string {
	return fmt.Sprintf("%.0f MiB of replica memory, less %d MiB for the process, %.0f MiB for the token cache and %.0f MiB for a full DPoP replay cache, over %d bytes per byte of text and %d copies during a reload",
		mib(b.Memory), ProcessBytes>>20, mib(b.TokenCache), mib(b.ReplayCache), BytesPerTextByte, ReloadCopies)
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
