package postgres_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/plantstore/plantstore/plants/postgres"
	"github.com/plantstore/plantstore/plants/storetest"
)

// TestSnapshotReloadsSpread runs three snapshots of one database, as three
// replicas would, and measures for each import when each replica first
// serves it: every replica within a second of the import's start (the
// contract), and not all at once: on average the first and the last
// replica to serve an import are at least 30 ms apart (the delays are
// drawn from about a quarter of a second, so the expected gap is about
// 125 ms; loads that start together on notification are a few ms apart).
func TestSnapshotReloadsSpread(t *testing.T) {
	t.Parallel()
	dsn := seeded(t)
	o := postgres.Options{Poll: time.Hour} // notifications only
	replicas := []*postgres.Snapshot{openSnapshot(t, dsn, o, nil), openSnapshot(t, dsn, o, nil), openSnapshot(t, dsn, o, nil)}
	for _, s := range replicas {
		waitLoaded(t, s)
	}
	const imports = 4
	var gaps []time.Duration
	for i := range imports {
		name := fmt.Sprintf("Plant %d", i)
		c := storetest.Catalog(t, fmt.Sprintf(`[{"id": "p%d", "name": %q, "readers": ["*"]}]`, i, name))
		// Import returns after a VACUUM that follows its commit: time from
		// its start, which is before the commit.
		start := time.Now()
		served := make([]time.Duration, len(replicas))
		var wg sync.WaitGroup
		for r, s := range replicas {
			wg.Go(func() {
				served[r] = -1
				for d := time.Duration(0); d < 2*time.Second; d = time.Since(start) {
					if serves(t, s, name) {
						served[r] = time.Since(start)
						return
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
		if err := postgres.Import(t.Context(), dsn, c, true); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for r, d := range served {
			if d < 0 || d >= time.Second {
				t.Errorf("import %d: replica %d served it after %v, want within 1s (-1: not within 2s)", i, r, d)
			}
		}
		gap := slices.Max(served) - slices.Min(served)
		gaps = append(gaps, gap)
		t.Logf("import %d served after %v: gap %v", i, served, gap)
	}
	var sum time.Duration
	for _, g := range gaps {
		sum += g
	}
	if mean := sum / imports; mean < 30*time.Millisecond {
		t.Errorf("mean gap between the first and the last replica to serve an import %v (gaps %v), want at least 30ms: the replicas reload together", mean, gaps)
	}
}
