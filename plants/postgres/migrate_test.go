package postgres_test

import (
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/plantstore/plantstore/plants/postgres"
	"github.com/plantstore/plantstore/plants/postgres/pgtest"
)

func TestMigrateIdempotent(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewSchema(t)
	st, err := postgres.Status(t.Context(), dsn)
	if err != nil || st.Version != 0 || st.Latest < 1 || len(st.Pending) != int(st.Latest) {
		t.Fatalf("Status of an empty schema = %+v, %v; want version 0 and every version pending", st, err)
	}
	first, err := postgres.Migrate(t.Context(), dsn)
	if err != nil || len(first.Applied) != int(st.Latest) || first.Version != st.Latest {
		t.Fatalf("first Migrate = %+v, %v; want every version applied, at %d", first, err, st.Latest)
	}
	again, err := postgres.Migrate(t.Context(), dsn)
	if err != nil || len(again.Applied) != 0 || again.Version != st.Latest {
		t.Fatalf("second Migrate = %+v, %v; want nothing applied, at %d", again, err, st.Latest)
	}
	if st, err := postgres.Status(t.Context(), dsn); err != nil || st.Version != st.Latest || len(st.Pending) != 0 {
		t.Errorf("Status after Migrate = %+v, %v; want up to date", st, err)
	}
	s := openStore(t, dsn, postgres.Options{})
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping after Migrate: %v, want nil", err)
	}
}

func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewSchema(t)
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = postgres.Migrate(t.Context(), dsn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent Migrate %d: %v, want nil", i, err)
		}
	}
	// Each version is recorded once: the lock kept the runs apart.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var applied, distinct int
	err = conn.QueryRow(t.Context(),
		"SELECT count(*), count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0").Scan(&applied, &distinct)
	if err != nil {
		t.Fatal(err)
	}
	if applied != distinct || applied == 0 {
		t.Errorf("goose_db_version: %d applied rows for %d versions, want one row per version", applied, distinct)
	}
}

func TestPingUnmigrated(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewSchema(t)
	s := openStore(t, dsn, postgres.Options{})
	err := s.Ping(t.Context())
	wantUnavailable(t, "Ping on an empty schema", err)
	if _, err := postgres.Migrate(t.Context(), dsn); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping after Migrate: %v, want nil", err)
	}
}

func TestMigrateNoSchema(t *testing.T) {
	t.Parallel()
	dsn := pgtest.WithParam(t, pgtest.BaseDSN(t), "search_path", "plantstore_test_absent_schema")
	if _, err := postgres.Migrate(t.Context(), dsn); err == nil {
		t.Errorf("Migrate with a search_path naming no schema: got nil, want an error")
	}
}
