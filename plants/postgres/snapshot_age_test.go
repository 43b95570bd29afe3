package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/observability/metricstest"
	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
)

// TestSnapshotAgeIgnoresNotifications checks that the age of a snapshot
// the replica cannot replace keeps growing when a notification names the
// version it holds: any login to the database may send one, so only the
// database's own answer (a load, or a read of the version finding the
// snapshot's) confirms a snapshot current.
func TestSnapshotAgeIgnoresNotifications(t *testing.T) {
	t.Parallel()
	dsn := seeded(t)
	reg := prometheus.NewPedanticRegistry()
	logs, log := observedLog()
	s := openSnapshot(t, dsn, postgres.Options{Poll: time.Hour, Log: log, Metrics: postgres.NewMetrics(reg)}, plants.NewMetrics(reg))
	waitLoaded(t, s)
	waitLog(t, logs, "listening for catalog changes")
	age := func() float64 { return metricstest.Sum(t, reg, "plantstore_catalog_snapshot_age_seconds", nil) }
	failures := func() float64 {
		return metricstest.Sum(t, reg, "plantstore_catalog_reloads_total", map[string]string{"result": "failure"})
	}

	// A new version the replica cannot load (a reader no catalog file
	// could hold, written by hand): it is stuck on the old one.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var held int64
	if err := conn.QueryRow(t.Context(), `SELECT version FROM catalog_version`).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `INSERT INTO plants (id, name, readers) VALUES ('bad', 'Bad', '{admins}');
		UPDATE catalog_version SET version = version + 1`); err != nil {
		t.Fatal(err)
	}
	const grown = 0.3
	waitUntil(t, 10*time.Second, "the snapshot's age to grow", func() bool { return age() >= grown })
	before, failed := age(), failures()

	// The notification naming the version held, then one naming the new
	// version, in this order: once the second has made the replica try
	// (and fail) to load, the first has been handled.
	if _, err := conn.Exec(t.Context(), `SELECT pg_notify($1, $2::bigint || ' ' || current_schema()), pg_notify($1, $3::bigint || ' ' || current_schema())`,
		postgres.NotifyChannel, held, held+1); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the refused load the second notification asks for", func() bool { return failures() > failed })
	if got := age(); got < before {
		t.Errorf("snapshot age %.3fs after a notification naming the version held; want at least the %.3fs it was before", got, before)
	}
	if !serves(t, s, "Fern", "Rose") {
		t.Errorf("the stuck replica does not serve its last snapshot")
	}
}
