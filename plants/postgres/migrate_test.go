package postgres_test

import (
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/plantstore/plantstore/plants/postgres"
)

func TestMigrateIdempotent(t *testing.T) {
	dsn := newSchema(t)
	for i := range 2 {
		if err := postgres.Migrate(t.Context(), dsn); err != nil {
			t.Fatalf("Migrate, call %d: %v", i+1, err)
		}
	}
	s := openStore(t, dsn, postgres.Options{})
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping after Migrate: %v, want nil", err)
	}
}

func TestMigrateConcurrent(t *testing.T) {
	dsn := newSchema(t)
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = postgres.Migrate(t.Context(), dsn) })
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
	dsn := newSchema(t)
	s := openStore(t, dsn, postgres.Options{})
	err := s.Ping(t.Context())
	wantUnavailable(t, "Ping on an empty schema", err)
	if err := postgres.Migrate(t.Context(), dsn); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping after Migrate: %v, want nil", err)
	}
}

func TestMigrateNoSchema(t *testing.T) {
	dsn := withParam(t, baseDSN(t), "search_path", "plantstore_test_absent_schema")
	if err := postgres.Migrate(t.Context(), dsn); err == nil {
		t.Errorf("Migrate with a search_path naming no schema: got nil, want an error")
	}
}
