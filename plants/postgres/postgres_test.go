package postgres_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
	"github.com/plantstore/plantstore/plants/postgres/pgtest"
	"github.com/plantstore/plantstore/plants/storetest"
)

// TestMain ends a run that had no database with the count of the tests
// skipped for want of one, and how to give them one.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// migrated returns a DSN for a fresh, migrated schema.
func migrated(t testing.TB) string {
	t.Helper()
	dsn := pgtest.NewSchema(t)
	if _, err := postgres.Migrate(t.Context(), dsn); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return dsn
}

// seeded returns a migrated schema holding firstCatalog.
func seeded(t testing.TB) string {
	t.Helper()
	dsn := migrated(t)
	if err := postgres.Import(t.Context(), dsn, storetest.Catalog(t, firstCatalog), false); err != nil {
		t.Fatalf("Import: %v", err)
	}
	return dsn
}

// openStore opens a Store on dsn, closed when the test ends.
func openStore(t testing.TB, dsn string, o postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), dsn, o, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// collect drains a List sequence.
func collect(t testing.TB, s plants.Store, q plants.Query) ([]plants.Plant, error) {
	t.Helper()
	var got []plants.Plant
	for p, err := range s.List(t.Context(), q) {
		if err != nil {
			return got, err
		}
		got = append(got, p)
	}
	return got, nil
}

// wantUnavailable fails the test unless err wraps plants.ErrUnavailable.
func wantUnavailable(t testing.TB, what string, err error) {
	t.Helper()
	if !errors.Is(err, plants.ErrUnavailable) {
		t.Errorf("%s: got error %v, want one wrapping plants.ErrUnavailable", what, err)
	}
}

// waitUntil polls cond until it holds, for up to limit, and returns how
// long that took; it fails the test after limit.
func waitUntil(t testing.TB, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start)
}
