package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/plantstore/plantstore/observability/metricstest"
	"github.com/plantstore/plantstore/observability/setting"
	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
	"github.com/plantstore/plantstore/plants/postgres/pgtest"
	"github.com/plantstore/plantstore/plants/storetest"
)

// openSnapshot opens a Snapshot on dsn, closed when the test ends. m may
// be nil.
func openSnapshot(t testing.TB, dsn string, o postgres.Options, m *plants.Metrics) *postgres.Snapshot {
	t.Helper()
	s, err := postgres.OpenSnapshot(t.Context(), dsn, o, m)
	if err != nil {
		t.Fatalf("OpenSnapshot: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// waitLoaded waits for the first snapshot of s.
func waitLoaded(t testing.TB, s *postgres.Snapshot) {
	t.Helper()
	waitUntil(t, 10*time.Second, "first snapshot", func() bool { return s.Ready(t.Context()) == nil })
}

// serves reports whether s lists exactly the names want for everyone.
func serves(t testing.TB, s plants.Store, want ...string) bool {
	t.Helper()
	got, err := collect(t, s, everyone)
	return err == nil && slices.Equal(storetest.Names(got), want)
}

// TestSnapshotConformance runs the store suite on a snapshot of each
// imported catalog.
func TestSnapshotConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, c *plants.Catalog) plants.Store {
		dsn := migrated(t)
		if err := postgres.Import(t.Context(), dsn, c, false); err != nil {
			t.Fatalf("Import: %v", err)
		}
		s := openSnapshot(t, dsn, postgres.Options{}, nil)
		waitLoaded(t, s)
		return s
	})
}

// TestSnapshotTwoReplicas runs two snapshots of one database, as two
// replicas would, with a poll too slow to matter: each import, whether it
// adds, upserts or replaces, must be served by both within a second of its
// commit, through notifications.
func TestSnapshotTwoReplicas(t *testing.T) {
	t.Parallel()
	dsn := seeded(t)
	o := postgres.Options{Poll: time.Hour}
	a, b := openSnapshot(t, dsn, o, nil), openSnapshot(t, dsn, o, nil)
	// Another catalog in another schema of the same database notifies the
	// same channel: neither replica may take it for its own.
	other := migrated(t)
	for _, s := range []*postgres.Snapshot{a, b} {
		waitLoaded(t, s)
		if !serves(t, s, "Fern", "Rose") {
			t.Fatalf("first snapshot: not the imported catalog")
		}
	}
	steps := []struct {
		catalog string
		mode    postgres.ImportMode
		want    []string
	}{
		{`[{"id": "ivy", "name": "Ivy", "readers": ["*"]}]`, postgres.Add, []string{"Fern", "Ivy", "Rose"}},
		{`[{"id": "ivy", "name": "Ivy 2", "readers": ["*"]}, {"id": "moss", "name": "Moss", "readers": ["*"]}]`, postgres.Upsert, []string{"Fern", "Ivy 2", "Moss", "Rose"}},
		{`[{"id": "oak", "name": "Oak", "readers": ["group:green"]}]`, postgres.Replace, []string{"Oak"}},
		{`[]`, postgres.Replace, nil},
	}
	for i, st := range steps {
		if err := postgres.Import(t.Context(), other, storetest.Catalog(t, `[{"id": "x", "name": "Elsewhere", "readers": ["*"]}]`), true); err != nil {
			t.Fatal(err)
		}
		// Import returns after a VACUUM that follows its commit: time from
		// its start, which is before the commit.
		start := time.Now()
		if _, err := postgres.ImportWith(t.Context(), dsn, storetest.Catalog(t, st.catalog), postgres.ImportOptions{Mode: st.mode}); err != nil {
			t.Fatal(err)
		}
		for name, s := range map[string]*postgres.Snapshot{"a": a, "b": b} {
			waitUntil(t, time.Second-time.Since(start), fmt.Sprintf("replica %s serving import %d", name, i+1), func() bool { return serves(t, s, st.want...) })
			t.Logf("replica %s served import %d within %v of its start", name, i+1, time.Since(start).Round(time.Millisecond))
		}
	}
}

// TestSnapshotLostNotification cuts the listening connection of a
// snapshot (it goes through a proxy; the pool does not) and keeps it
// from coming back: the notification of an import is lost, and the poll
// must catch the change. Once the listener is back, notifications flow
// again.
func TestSnapshotLostNotification(t *testing.T) {
	t.Parallel()
	dsn := seeded(t)
	px := pgtest.NewProxy(t, pgtest.ServerAddr(t, dsn))
	logs, log := observedLog()
	const poll = 500 * time.Millisecond
	s := openSnapshot(t, dsn, postgres.Options{Poll: poll, ListenDSN: pgtest.WithHost(t, dsn, px.Addr()), Log: log}, nil)
	waitLoaded(t, s)
	waitLog(t, logs, "listening for catalog changes")

	px.Cut()
	waitLog(t, logs, "the catalog listener lost its connection")
	if err := postgres.Import(t.Context(), dsn, storetest.Catalog(t, `[{"id": "ivy", "name": "Ivy", "readers": ["*"]}]`), false); err != nil {
		t.Fatal(err)
	}
	took := waitUntil(t, poll+2*time.Second, "the change after a lost notification", func() bool { return serves(t, s, "Fern", "Ivy", "Rose") })
	t.Logf("served %v after the commit, through the poll", took.Round(time.Millisecond))

	px.Restore()
	waitLog(t, logs, "listening for catalog changes again")
	start := time.Now()
	if err := postgres.Import(t.Context(), dsn, storetest.Catalog(t, `[{"id": "oak", "name": "Oak", "readers": ["*"]}]`), true); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, time.Second-time.Since(start), "an import once the listener is back", func() bool { return serves(t, s, "Oak") })
	t.Logf("served within %v of the import's start, listening again", time.Since(start).Round(time.Millisecond))
}

// TestSnapshotDatabaseDown cuts every connection to the database after
// the first snapshot: the snapshot keeps serving and stays ready, its age
// grows, and once the database is back the change made meanwhile is
// served without a restart.
func TestSnapshotDatabaseDown(t *testing.T) {
	t.Parallel()
	dsn := seeded(t)
	px := pgtest.NewProxy(t, pgtest.ServerAddr(t, dsn))
	reg := prometheus.NewPedanticRegistry()
	pm := postgres.NewMetrics(reg)
	logs, log := observedLog()
	s := openSnapshot(t, pgtest.WithHost(t, dsn, px.Addr()), postgres.Options{Poll: 200 * time.Millisecond, ConnectTimeout: time.Second, Metrics: pm, Log: log}, nil)
	waitLoaded(t, s)

	px.Cut()
	waitLog(t, logs, "cannot refresh the catalog; the last snapshot keeps serving")
	for i := range 200 {
		if !serves(t, s, "Fern", "Rose") {
			t.Fatalf("request %d with the database down: not the last snapshot", i)
		}
	}
	if err := s.Ready(t.Context()); err != nil {
		t.Errorf("Ready with the database down after a snapshot = %v; want nil", err)
	}
	age := metricstest.Sum(t, reg, "plantstore_catalog_snapshot_age_seconds", nil)
	waitUntil(t, 5*time.Second, "the snapshot age to grow", func() bool {
		return metricstest.Sum(t, reg, "plantstore_catalog_snapshot_age_seconds", nil) > age+0.3
	})
	if err := postgres.Import(t.Context(), dsn, storetest.Catalog(t, `[{"id": "ivy", "name": "Ivy", "readers": ["*"]}]`), false); err != nil {
		t.Fatal(err)
	}

	px.Restore()
	waitUntil(t, 5*time.Second, "the change made while the database was cut", func() bool { return serves(t, s, "Fern", "Ivy", "Rose") })
	waitLog(t, logs, "catalog refreshed again")
	if got := metricstest.Sum(t, reg, "plantstore_catalog_snapshot_age_seconds", nil); got > 1 {
		t.Errorf("snapshot age after the recovery = %v s; want under 1", got)
	}
}

// TestSnapshotBeforeFirstLoad starts a snapshot while the database cannot
// be reached: it is unavailable (List and Ready), then recovers once the
// database answers, without being reopened.
func TestSnapshotBeforeFirstLoad(t *testing.T) {
	t.Parallel()
	dsn := seeded(t)
	px := pgtest.NewProxy(t, pgtest.ServerAddr(t, dsn))
	px.Cut()
	reg := prometheus.NewPedanticRegistry()
	m, pm := plants.NewMetrics(reg), postgres.NewMetrics(reg)
	s, err := postgres.OpenSnapshot(t.Context(), pgtest.WithHost(t, dsn, px.Addr()), postgres.Options{Poll: 300 * time.Millisecond, ConnectTimeout: time.Second, Metrics: pm}, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	waitUntil(t, 5*time.Second, "a failed load", func() bool {
		return metricstest.Sum(t, reg, "plantstore_catalog_reloads_total", map[string]string{"result": "failure"}) > 0
	})
	_, err = collect(t, s, everyone)
	wantUnavailable(t, "List before the first snapshot", err)
	wantUnavailable(t, "Ready before the first snapshot", s.Ready(t.Context()))
	for _, leak := range []string{"SELECT", "postgres@"} {
		if err != nil && strings.Contains(err.Error(), leak) {
			t.Errorf("List error %q contains %q", err, leak)
		}
	}
	if age := metricstest.Sum(t, reg, "plantstore_catalog_snapshot_age_seconds", nil); !math.IsInf(age, 1) {
		t.Errorf("snapshot age before the first snapshot = %v; want +Inf", age)
	}

	px.Restore()
	waitLoaded(t, s)
	if !serves(t, s, "Fern", "Rose") {
		t.Errorf("after the database came back: not the imported catalog")
	}
	if got := metricstest.Sum(t, reg, "plantstore_catalog_plants", nil); got != 2 {
		t.Errorf("plantstore_catalog_plants = %v; want 2", got)
	}
	if got := metricstest.Sum(t, reg, "plantstore_catalog_reloads_total", map[string]string{"result": "success"}); got != 1 {
		t.Errorf("successful reloads = %v; want 1", got)
	}
}

// TestSnapshotBadDataKeepsServing changes the catalog by hand into one
// that no file could hold: the reload is refused and the last snapshot
// keeps serving; a good catalog is then taken again.
func TestSnapshotBadDataKeepsServing(t *testing.T) {
	t.Parallel()
	dsn := seeded(t)
	reg := prometheus.NewPedanticRegistry()
	logs, log := observedLog()
	s := openSnapshot(t, dsn, postgres.Options{Poll: time.Hour, Log: log}, plants.NewMetrics(reg))
	waitLoaded(t, s)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), `INSERT INTO plants (id, name, readers) VALUES ('bad', 'Bad', '{admins}');
		UPDATE catalog_version SET version = version + 1;
		SELECT pg_notify('`+postgres.NotifyChannel+`', version || ' ' || current_schema()) FROM catalog_version`)
	if err != nil {
		t.Fatal(err)
	}
	// The failure is counted, then logged: wait for both.
	waitUntil(t, 5*time.Second, "a refused reload, counted and logged", func() bool {
		return metricstest.Sum(t, reg, "plantstore_catalog_reloads_total", map[string]string{"result": "failure"}) > 0 &&
			logs.FilterMessage("cannot refresh the catalog; the last snapshot keeps serving").Len() > 0
	})
	if e := logs.FilterMessage("cannot refresh the catalog; the last snapshot keeps serving").All(); len(e) == 0 || !strings.Contains(fmt.Sprint(e[0].ContextMap()["error"]), `plant "bad"`) {
		t.Errorf("log of the refused reload = %v; want the error naming the plant", e)
	}
	if !serves(t, s, "Fern", "Rose") {
		t.Errorf("after a refused reload: not the last good snapshot")
	}
	start := time.Now()
	if err := postgres.Import(t.Context(), dsn, storetest.Catalog(t, `[{"id": "ivy", "name": "Ivy", "readers": ["*"]}]`), true); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, time.Second-time.Since(start), "the good catalog", func() bool { return serves(t, s, "Ivy") })
}

// TestSnapshotMetrics checks the metrics a snapshot reports.
func TestSnapshotMetrics(t *testing.T) {
	t.Parallel()
	dsn := seeded(t)
	reg := prometheus.NewPedanticRegistry()
	m, pm := plants.NewMetrics(reg), postgres.NewMetrics(reg)
	s, err := postgres.OpenSnapshot(t.Context(), dsn, postgres.Options{Metrics: pm, MaxConns: 3}, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	waitLoaded(t, s)
	serves(t, s, "Fern", "Rose")
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   func(float64) bool
	}{
		{"plantstore_catalog_plants", nil, func(v float64) bool { return v == 2 }},
		{"plantstore_catalog_reloads_total", map[string]string{"result": "success"}, func(v float64) bool { return v == 1 }},
		{"plantstore_catalog_reloads_total", map[string]string{"result": "failure"}, func(v float64) bool { return v == 0 }},
		{"plantstore_catalog_reload_duration_seconds", nil, func(v float64) bool { return v == 1 }},
		{"plantstore_catalog_snapshot_age_seconds", nil, func(v float64) bool { return v >= 0 && v < 10 }},
		{"plantstore_store_request_duration_seconds", map[string]string{"store": "snapshot", "result": "ok"}, func(v float64) bool { return v == 1 }},
		{"plantstore_db_pool_max_connections", nil, func(v float64) bool { return v == 3 }},
		// A check of the version may hold a connection at any moment: count
		// them over the three states.
		{"plantstore_db_pool_connections", nil, func(v float64) bool { return v >= 1 && v <= 3 }},
		{"plantstore_db_pool_connections", map[string]string{"state": "idle"}, func(v float64) bool { return v >= 0 }},
		{"plantstore_db_pool_connections", map[string]string{"state": "acquired"}, func(v float64) bool { return v >= 0 }},
		{"plantstore_db_pool_connections", map[string]string{"state": "constructing"}, func(v float64) bool { return v >= 0 }},
		{"plantstore_db_pool_acquires_total", nil, func(v float64) bool { return v >= 1 }},
		{"plantstore_db_pool_empty_acquires_total", nil, func(v float64) bool { return v >= 1 }},
		{"plantstore_db_pool_acquire_wait_seconds_total", nil, func(v float64) bool { return v > 0 }},
	} {
		if got := metricstest.Sum(t, reg, tt.name, tt.labels); !tt.want(got) {
			t.Errorf("%s%v = %v; not what the row wants", tt.name, tt.labels, got)
		}
	}
	if _, err := reg.Gather(); err != nil {
		t.Errorf("the pedantic registry refuses the metrics: %v", err)
	}
}

// TestSnapshotOptions checks the options OpenSnapshot refuses.
func TestSnapshotOptions(t *testing.T) {
	t.Parallel()
	dsn := pgtest.BaseDSN(t)
	tests := []struct {
		name string
		dsn  string
		o    postgres.Options
		want error
	}{
		{"defaults", dsn, postgres.Options{}, nil},
		{"poll too short", dsn, postgres.Options{Poll: time.Millisecond}, &setting.Error{Key: "poll"}},
		{"negative poll", dsn, postgres.Options{Poll: -time.Second}, &setting.Error{Key: "poll"}},
		{"malformed listen DSN", dsn, postgres.Options{ListenDSN: "postgres://a:secret@[::1"}, postgres.ErrMalformedDSN},
		{"malformed DSN", "postgres://a:secret@[::1", postgres.Options{}, postgres.ErrMalformedDSN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := postgres.OpenSnapshot(t.Context(), tt.dsn, tt.o, nil)
			if err == nil {
				s.Close()
			}
			var se *setting.Error
			switch {
			case tt.want == nil && err != nil:
				t.Errorf("OpenSnapshot(%+v) = %v; want nil", tt.o, err)
			case tt.want == postgres.ErrMalformedDSN && !errors.Is(err, postgres.ErrMalformedDSN):
				t.Errorf("OpenSnapshot(%+v) = %v; want ErrMalformedDSN", tt.o, err)
			case tt.want != nil && tt.want != postgres.ErrMalformedDSN && (!errors.As(err, &se) || se.Key != tt.want.(*setting.Error).Key):
				t.Errorf("OpenSnapshot(%+v) = %v; want the *setting.Error of %s", tt.o, err, tt.want.(*setting.Error).Key)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

// TestSnapshotCloseEndsBackground checks that nothing a snapshot started
// outlives Close, and that Done is closed by then.
//
// Not parallel: goleak would see the goroutines of the tests running
// beside it.
func TestSnapshotCloseEndsBackground(t *testing.T) {
	dsn := migrated(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s, err := postgres.OpenSnapshot(context.Background(), dsn, postgres.Options{Poll: 50 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitLoaded(t, s)
	s.Close()
	select {
	case <-s.Done():
	default:
		t.Error("Done is not closed after Close")
	}
}

// observedLog returns a logger and what it logged.
func observedLog() (*observer.ObservedLogs, *zap.Logger) {
	core, logs := observer.New(zapcore.DebugLevel)
	return logs, zap.New(core)
}

// waitLog waits until a line with message msg (a prefix) was logged.
func waitLog(t testing.TB, logs *observer.ObservedLogs, msg string) {
	t.Helper()
	waitUntil(t, 10*time.Second, "log line "+msg, func() bool {
		return len(logs.Filter(func(e observer.LoggedEntry) bool { return strings.HasPrefix(e.Message, msg) }).All()) > 0
	})
}

// TestSnapshotLoadedHook: Options.Loaded gets each catalog a snapshot
// serves, the first and those of later imports.
func TestSnapshotLoadedHook(t *testing.T) {
	t.Parallel()
	dsn := seeded(t)
	loaded := make(chan *plants.Catalog, 4)
	s := openSnapshot(t, dsn, postgres.Options{Loaded: func(c *plants.Catalog) { loaded <- c }}, nil)
	next := func(what string) *plants.Catalog {
		select {
		case c := <-loaded:
			return c
		case <-time.After(10 * time.Second):
			t.Fatalf("no call of Loaded for %s within 10s", what)
			return nil
		}
	}
	if c := next("the first snapshot"); c.Len() != 2 || !serves(t, s, "Fern", "Rose") {
		t.Errorf("Loaded with %d plants for the first snapshot; want 2, served", c.Len())
	}
	if _, err := postgres.ImportWith(t.Context(), dsn, storetest.Catalog(t, `[{"id": "ivy", "name": "Ivy", "readers": ["*@staff"]}]`), postgres.ImportOptions{Mode: postgres.Upsert}); err != nil {
		t.Fatal(err)
	}
	if c := next("the upsert"); c.Len() != 3 || c.Unmatched([]string{""}).Readers != 1 {
		t.Errorf("Loaded after the upsert with %d plants, %+v unmatched; want 3 plants, *@staff unmatched", c.Len(), c.Unmatched([]string{""}))
	}
}
