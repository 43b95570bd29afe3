package postgres_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
	"github.com/plantstore/plantstore/plants/postgres/pgtest"
	"github.com/plantstore/plantstore/plants/storetest"
)

var starQuery = plants.Query{Caller: plants.Caller{Subject: "x"}, Limit: plants.NoLimit}

// TestDatabaseDown cuts the connection to the database under a running
// store, then restores it: List and Ping fail with ErrUnavailable while it
// is down and work again afterwards, on the same Store.
func TestDatabaseDown(t *testing.T) {
	t.Parallel()
	dsn := seeded(t)
	px := pgtest.NewProxy(t, pgtest.ServerAddr(t, dsn))
	s := openStore(t, pgtest.WithHost(t, dsn, px.Addr()), postgres.Options{})
	if _, err := collect(t, s, starQuery); err != nil {
		t.Fatalf("List before the cut: %v", err)
	}

	px.Cut()
	for i := range 3 {
		_, err := collect(t, s, starQuery)
		wantUnavailable(t, "List while the database is down", err)
		if i == 0 && err != nil && strings.Contains(err.Error(), "SELECT") {
			t.Errorf("List error %q contains SQL text", err)
		}
	}
	wantUnavailable(t, "Ping while the database is down", s.Ping(t.Context()))

	px.Restore()
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping after restore: %v, want nil", err)
	}
	got, err := collect(t, s, starQuery)
	if err != nil || len(got) != 1 {
		t.Errorf("List after restore: %d plants, %v; want 1, nil", len(got), err)
	}
}

// TestBrokenIdleConnection restores the database right after a cut: the
// pool's idle connection is dead, and the first List after the restore must
// still answer, by retrying on a new connection.
func TestBrokenIdleConnection(t *testing.T) {
	t.Parallel()
	dsn := seeded(t)
	px := pgtest.NewProxy(t, pgtest.ServerAddr(t, dsn))
	s := openStore(t, pgtest.WithHost(t, dsn, px.Addr()), postgres.Options{})
	if _, err := collect(t, s, starQuery); err != nil {
		t.Fatalf("List before the cut: %v", err)
	}
	px.Cut()
	px.Restore()
	got, err := collect(t, s, starQuery)
	if err != nil || len(got) != 1 {
		t.Errorf("List after a cut and restore: %d plants, %v; want 1, nil", len(got), err)
	}
}

// TestDatabaseDownAtStart opens a store while the database cannot be
// reached: Open succeeds, the store is unavailable, then serves once the
// database is reachable.
func TestDatabaseDownAtStart(t *testing.T) {
	t.Parallel()
	dsn := seeded(t)
	px := pgtest.NewProxy(t, pgtest.ServerAddr(t, dsn))
	px.Cut()
	s := openStore(t, pgtest.WithHost(t, dsn, px.Addr()), postgres.Options{ConnectTimeout: time.Second})
	wantUnavailable(t, "Ping with the database down", s.Ping(t.Context()))
	_, err := collect(t, s, starQuery)
	wantUnavailable(t, "List with the database down", err)

	px.Restore()
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping once the database is up: %v, want nil", err)
	}
	if got, err := collect(t, s, starQuery); err != nil || len(got) != 1 {
		t.Errorf("List once the database is up: %d plants, %v; want 1, nil", len(got), err)
	}
}

// TestQueryTimeout blocks every read with a table lock held by another
// transaction: List fails with ErrUnavailable after the query timeout, the
// server-side statements are cancelled, and the pool's connections are
// reused afterwards rather than replaced.
func TestQueryTimeout(t *testing.T) {
	t.Parallel()
	dsn := seeded(t)
	const maxConns = 2
	s := openStore(t, dsn, postgres.Options{MaxConns: maxConns, QueryTimeout: time.Second})
	// Open every connection of the pool first.
	var wg sync.WaitGroup
	for range maxConns {
		wg.Go(func() {
			if _, err := collect(t, s, starQuery); err != nil {
				t.Errorf("List: %v", err)
			}
		})
	}
	wg.Wait()
	opened := postgres.NewConnsCount(s)

	tx := lockReaders(t, dsn)

	errs := make([]error, 2*maxConns)
	for i := range errs {
		wg.Go(func() { _, errs[i] = collect(t, s, starQuery) })
	}
	wg.Wait()
	for _, err := range errs {
		wantUnavailable(t, "List blocked by a lock", err)
		if err != nil && !strings.Contains(err.Error(), "timeout") {
			t.Errorf("List blocked by a lock: got %q, want a timeout", err)
		}
	}
	waitNoLockWaiters(t, tx.Conn())
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}

	for range 3 * maxConns {
		wg.Go(func() {
			if got, err := collect(t, s, starQuery); err != nil || len(got) != 1 {
				t.Errorf("List after the timeouts: %d plants, %v; want 1, nil", len(got), err)
			}
		})
	}
	wg.Wait()
	if n := postgres.NewConnsCount(s); n != opened {
		t.Errorf("pool opened %d connections in all, want %d: timed-out connections were not reused", n, opened)
	}
}

// lockReaders locks plant_readers in a transaction of its own, which
// blocks every listing until it is rolled back (at the latest when the
// test ends).
func lockReaders(t *testing.T, dsn string) pgx.Tx {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	if _, err := tx.Exec(t.Context(), "LOCK TABLE plant_readers IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	return tx
}

// waitNoLockWaiters waits until no backend waits for a lock, that is until
// the cancel requests of the timed-out queries were processed.
func waitNoLockWaiters(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'plant_readers'::regclass").Scan(&n)
		if err != nil {
			t.Fatalf("count lock waiters: %v", err)
		}
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d statements still wait for the lock: the timed-out queries were not cancelled", n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestCallerCancel checks that a cancelled request context ends List with an
// error that says so.
func TestCallerCancel(t *testing.T) {
	t.Parallel()
	dsn := seeded(t)
	s := openStore(t, dsn, postgres.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	yields := 0
	for _, err := range s.List(ctx, starQuery) {
		yields++
		if !errors.Is(err, context.Canceled) || errors.Is(err, plants.ErrUnavailable) {
			t.Errorf("List with a cancelled context: got %v, want context.Canceled and not ErrUnavailable", err)
		}
	}
	if yields != 1 {
		t.Errorf("List with a cancelled context yielded %d times; want its error once", yields)
	}
}

// TestStrayCancel cancels a listing's statement from outside, as the late
// cancel request of an earlier listing on the same connection does when its
// client left just as its statement ended: the listing is retried once and
// answers, rather than failing for something its caller did not do.
func TestStrayCancel(t *testing.T) {
	t.Parallel()
	const app = "plantstore_stray_cancel_test"
	dsn := seeded(t)
	s := openStore(t, pgtest.WithParam(t, dsn, "application_name", app), postgres.Options{MaxConns: 1})

	tx := lockReaders(t, dsn)
	admin, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())

	var got []plants.Plant
	done := make(chan error, 1)
	go func() {
		var err error
		got, err = collect(t, s, starQuery)
		done <- err
	}()
	pid, started := waitLockWaiter(t, admin, app, time.Time{}, done)
	var cancelled bool
	if err := admin.QueryRow(t.Context(), "SELECT pg_cancel_backend($1)", pid).Scan(&cancelled); err != nil || !cancelled {
		t.Fatalf("pg_cancel_backend: %v, %v", cancelled, err)
	}
	// The retry waits for the lock in its turn: a statement started later.
	waitLockWaiter(t, admin, app, started, done)
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || len(got) != 1 {
		t.Errorf("List whose statement a stray cancel ended: %d plants, %v; want 1, nil", len(got), err)
	}
}

// waitLockWaiter waits until a session named app waits for a lock in a
// statement started after after, and returns its backend and the start of
// the statement. It fails the test if the listing ends first.
func waitLockWaiter(t *testing.T, conn *pgx.Conn, app string, after time.Time, done <-chan error) (int32, time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		var (
			pid     int32
			started time.Time
		)
		err := conn.QueryRow(ctx, `SELECT pid, query_start FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock' AND query_start > $2`, app, after).Scan(&pid, &started)
		if err == nil {
			return pid, started
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			t.Fatalf("find the listing's statement: %v", err)
		}
		select {
		case err := <-done:
			t.Fatalf("the listing ended (%v) before it waited for the lock again", err)
		case <-ctx.Done():
			t.Fatal("no statement of the listing waits for the lock")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestNoSecretsInErrors checks that no error shows the DSN's password or
// SQL text, for malformed DSNs, for a server that is not there and for a
// server that refuses the user; the refusal of a role names it.
func TestNoSecretsInErrors(t *testing.T) {
	t.Parallel()
	const password, user = "s3cret-pass", "userinfo-name"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	host, port, _ := net.SplitHostPort(closed)

	malformed := []string{
		"postgres://alice:" + password + "@127.0.0.1:notaport/test",
		"postgres://alice:" + password + "@[::1/test",
		"host=127.0.0.1 port=notaport password=" + password,
		"host=127.0.0.1 password='" + password,
		"postgres://alice:" + password + "@127.0.0.1/test?sslmode=bogus",
	}
	for _, dsn := range malformed {
		_, err := postgres.Open(t.Context(), dsn, postgres.Options{}, nil)
		checkSecretFree(t, "Open(malformed)", err, password, true)
		checkSecretFree(t, "Migrate(malformed)", migrateErr(t, dsn), password, true)
		checkSecretFree(t, "Import(malformed)", postgres.Import(t.Context(), dsn, storetest.Catalog(t, firstCatalog), false), password, true)
	}

	unreachable := []string{
		"postgres://" + user + ":" + password + "@" + closed + "/test?sslmode=disable",
		"host=" + host + " port=" + port + " user=" + user + " password=" + password + " dbname=test sslmode=disable",
		// The real server, which refuses a role it does not know by name.
		pgtest.WithParam(t, strings.Replace(pgtest.BaseDSN(t), "postgres@", user+":"+password+"@", 1), "connect_timeout", "5"),
	}
	for _, dsn := range unreachable {
		s, err := postgres.Open(t.Context(), dsn, postgres.Options{ConnectTimeout: time.Second}, nil)
		if err != nil {
			t.Fatalf("Open(unreachable): %v, want nil (the pool connects lazily)", err)
		}
		_, err = collect(t, s, starQuery)
		checkSecretFree(t, "List(unreachable)", err, password, true)
		wantUnavailable(t, "List(unreachable)", err)
		checkSecretFree(t, "Ping(unreachable)", s.Ping(t.Context()), password, true)
		s.Close()
		checkSecretFree(t, "Migrate(unreachable)", migrateErr(t, dsn), password, true)
		checkSecretFree(t, "Import(unreachable)", postgres.Import(t.Context(), dsn, storetest.Catalog(t, firstCatalog), false), password, true)
		if err := migrateErr(t, dsn); err == nil || !strings.Contains(err.Error(), user) {
			t.Errorf("Migrate(unreachable) = %v; want the error to name the user %s", err, user)
		}
	}

	// A working DSN must not be reported as failing by the check itself.
	dsn := migrated(t)
	s := openStore(t, dsn, postgres.Options{})
	_, err = collect(t, s, starQuery)
	checkSecretFree(t, "List(working)", err, password, false)
}

func checkSecretFree(t *testing.T, what string, err error, secret string, wantErr bool) {
	t.Helper()
	if (err != nil) != wantErr {
		t.Errorf("%s: got error %v, want error: %v", what, err, wantErr)
	}
	if err == nil {
		return
	}
	msg := err.Error()
	for _, bad := range []string{secret, "SELECT", "COPY", "DELETE"} {
		if strings.Contains(msg, bad) {
			t.Errorf("%s: error %q contains %q", what, msg, bad)
		}
	}
}

// migrateErr returns the error of Migrate on dsn.
func migrateErr(t testing.TB, dsn string) error {
	_, err := postgres.Migrate(t.Context(), dsn)
	return err
}
