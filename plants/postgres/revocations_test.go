package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
	"github.com/plantstore/plantstore/plants/postgres/pgtest"
)

// revocationLog records what a watch applies and confirms.
type revocationLog struct {
	mu        sync.Mutex
	applied   [][]postgres.Revocation
	confirmed time.Time
	changed   chan struct{}
}

func newRevocationLog() *revocationLog { return &revocationLog{changed: make(chan struct{}, 64)} }

func (l *revocationLog) apply(rs []postgres.Revocation, at time.Time) {
	l.mu.Lock()
	l.applied = append(l.applied, rs)
	l.confirmed = at
	l.mu.Unlock()
	l.changed <- struct{}{}
}

func (l *revocationLog) confirm(at time.Time) {
	l.mu.Lock()
	l.confirmed = at
	l.mu.Unlock()
}

// wait waits for the watch's next apply and returns what it applied.
func (l *revocationLog) wait(t *testing.T, what string) []postgres.Revocation {
	t.Helper()
	select {
	case <-l.changed:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing applied within 10s", what)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.applied[len(l.applied)-1]
}

func TestRevocationsStore(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewSchema(t)
	if _, err := postgres.Migrate(t.Context(), dsn); err != nil {
		t.Fatal(err)
	}
	px := pgtest.NewProxy(t, pgtest.ServerAddr(t, dsn))
	log := newRevocationLog()
	ctx, stop := context.WithCancel(t.Context())
	w, err := postgres.WatchRevocations(ctx, pgtest.WithHost(t, dsn, px.Addr()), postgres.Options{Poll: time.Hour, ConnectTimeout: time.Second, QueryTimeout: time.Second}, 0, log.apply, log.confirm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(); <-w.Done() })
	if got := log.wait(t, "the first read"); len(got) != 0 {
		t.Fatalf("first read = %+v, want none", got)
	}

	before := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	want := []postgres.Revocation{
		{Issuer: "staff", Sub: "alice", Before: before},
		{Client: "old-app", Before: before},
		{Issuer: "staff", All: true, Before: before},
		{Issuer: "staff", JTI: "4f1c2a", Until: before.Add(12 * time.Hour)},
	}
	for _, r := range want {
		added, err := postgres.AddRevocation(t.Context(), dsn, r)
		if err != nil || !added {
			t.Fatalf("AddRevocation(%+v) = %v, %v", r, added, err)
		}
		start := time.Now()
		got := log.wait(t, "after AddRevocation") // notified, no poll for an hour
		if took := time.Since(start); took > time.Second {
			t.Errorf("the watch applied the revocation %s after its commit; want within 1s", took)
		}
		if got[len(got)-1] != r {
			t.Errorf("applied %+v last, want %+v", got[len(got)-1], r)
		}
	}
	if added, err := postgres.AddRevocation(t.Context(), dsn, want[0]); err != nil || added {
		t.Errorf("AddRevocation of a stored revocation = %v, %v; want not added", added, err)
	}
	if got, err := postgres.ListRevocations(t.Context(), dsn); err != nil || len(got) != len(want) {
		t.Errorf("ListRevocations = %+v, %v; want the %d added", got, err, len(want))
	}
	if _, err := postgres.AddRevocation(t.Context(), dsn, postgres.Revocation{Sub: "a", Client: "b", Before: before}); err == nil {
		t.Error("AddRevocation of a subject and a client at once: no error")
	}

	// The database unreachable: nothing is applied, the last revocations
	// stay, and confirmations stop.
	px.Cut()
	log.mu.Lock()
	cut := log.confirmed
	log.mu.Unlock()
	if _, err := postgres.AddRevocation(t.Context(), dsn, postgres.Revocation{Sub: "bob", Before: before}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-log.changed:
		t.Fatal("a watch cut from the database applied something")
	case <-time.After(200 * time.Millisecond): // what would have been applied within 1s
	}
	log.mu.Lock()
	if !log.confirmed.Equal(cut) {
		t.Errorf("confirmed at %v while cut off, want still %v", log.confirmed, cut)
	}
	log.mu.Unlock()
	px.Restore()
	if got := log.wait(t, "after the database came back"); len(got) != len(want)+1 {
		t.Errorf("after the database came back: %d revocations, want %d", len(got), len(want)+1)
	}
}

func TestRevocationsNotMigrated(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewSchema(t)
	_, err := postgres.AddRevocation(t.Context(), dsn, postgres.Revocation{Sub: "a", Before: time.Now()})
	if !errors.Is(err, plants.ErrUnavailable) || err == nil {
		t.Errorf("AddRevocation before migrate = %v, want unavailable", err)
	}
}
