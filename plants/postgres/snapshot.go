package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"

	"github.com/plantstore/plantstore/plants"
)

// tracerName names the tracer of the snapshot's spans.
const tracerName = "github.com/plantstore/plantstore/plants/postgres"

// The attribute keys of plants.snapshot.reload.
const (
	versionKey = attribute.Key("plantstore.catalog_version")
	plantsKey  = attribute.Key("plantstore.plants")
)

// A Snapshot is a [plants.Store] that serves from memory a copy of the
// catalog in the database, in the index [plants.MemoryStore] uses, and
// keeps it current:
//
//   - it listens on a connection of its own for the notification that
//     [Import] sends when it commits ([NotifyChannel]), and then loads the
//     catalog again after a random delay that spreads the replicas' loads
//     (see notifySpread): a change is served within a quarter of a second
//     of the notification, or the time of one load when that is longer;
//   - it reads the catalog version every Options.Poll, which catches a
//     change whose notification was lost (the listening connection broke,
//     or was silently cut);
//   - after the listening connection comes back, it checks the version at
//     once, since notifications sent meanwhile are lost.
//
// A load reads the whole catalog in one transaction, in order, straight
// into a new catalog, and swaps it in atomically: a listing under way
// finishes on the catalog it started with, and no listing ever sees part
// of two catalogs. While the database cannot be reached the last snapshot
// keeps serving and Ready reports nil; before the first snapshot, List and
// Ready fail with [plants.ErrUnavailable], and the store retries until the
// database answers.
//
// A Snapshot is safe for concurrent use.
type Snapshot struct {
	pool    *pgxpool.Pool
	listen  *pgx.ConnConfig
	o       Options
	mem     *plants.MemoryStore // the index served, its metrics labelled "snapshot"
	metrics *plants.Metrics
	log     *zap.Logger
	tracer  trace.Tracer

	version   atomic.Int64 // of the snapshot in use; 0 before the first
	confirmed atomic.Int64 // when it was last known current, Unix ns
	lastLoad  atomic.Int64 // how long the last load took, ns
	lastErr   atomic.Pointer[error]
	kick      chan struct{} // asks the loop for a check now; holds one
	stop      context.CancelFunc
	done      chan struct{}
}

var _ plants.Store = (*Snapshot)(nil)

// OpenSnapshot returns a Snapshot of the catalog in the database at dsn
// and starts keeping it current, until ctx ends or Close is called. It
// does not wait for the first snapshot (see Ready); it fails only when dsn
// or o.ListenDSN is malformed ([ErrMalformedDSN]) or o is refused
// (a *setting.Error). m may be nil.
func OpenSnapshot(ctx context.Context, dsn string, o Options, m *plants.Metrics) (*Snapshot, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	if o.ListenDSN == "" {
		o.ListenDSN = dsn
	}
	listen, err := pgx.ParseConfig(o.ListenDSN)
	if err != nil {
		return nil, ErrMalformedDSN
	}
	configureConn(listen, o.ConnectTimeout)
	// The listener only waits: on shutdown, cut its socket at once rather
	// than ask the server to cancel a statement that is not running.
	listen.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: pc.Conn()}
	}
	pool, err := openPool(ctx, dsn, o)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(ctx)
	s := &Snapshot{
		pool: pool, listen: listen, o: o, metrics: m, log: o.Log,
		mem:  plants.NewMemoryStoreAs(nil, m, plants.StoreSnapshot), // sets plantstore_catalog_plants 0
		kick: make(chan struct{}, 1), stop: stop, done: make(chan struct{}),
	}
	tp := o.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	s.tracer = tp.Tracer(tracerName)
	s.setErr(errors.New("first load not finished"))
	o.Metrics.reportPool(pool)
	o.Metrics.reportAge(s.age)
	go s.run(ctx)
	return s, nil
}

// List yields the plants of the snapshot in use that q.Caller may read:
// the listing of [plants.MemoryStore.List], recorded as
// plantstore_store_request_duration_seconds{store="snapshot"}. Before the
// first snapshot it yields an error wrapping [plants.ErrUnavailable] that
// says why the database has not answered.
func (s *Snapshot) List(ctx context.Context, q plants.Query) iter.Seq2[plants.Plant, error] {
	if s.version.Load() != 0 {
		return s.mem.List(ctx, q)
	}
	return func(yield func(plants.Plant, error) bool) {
		start := time.Now()
		yield(plants.Plant{}, s.notLoaded("list plants"))
		s.metrics.ObserveStore(plants.StoreSnapshot, plants.ResultError, time.Since(start))
	}
}

// PageKey is the key of the snapshot in use ([plants.MemoryStore.PageKey]),
// none before the first.
func (s *Snapshot) PageKey(dst []byte, c plants.Caller) ([]byte, bool) {
	if s.version.Load() == 0 {
		return dst, false
	}
	return s.mem.PageKey(dst, c)
}

// Served records a listing answered from a page of the snapshot.
func (s *Snapshot) Served() { s.mem.Served() }

var _ plants.PagedStore = (*Snapshot)(nil)

// Ready returns nil once a snapshot is loaded, even while the database
// cannot be reached, and an error wrapping [plants.ErrUnavailable] with
// the reason before. It is the store's readiness check.
func (s *Snapshot) Ready(context.Context) error {
	if s.version.Load() == 0 {
		return s.notLoaded("ready")
	}
	return nil
}

// notLoaded is the error of a call made before the first snapshot.
func (s *Snapshot) notLoaded(op string) error {
	return fmt.Errorf("postgres snapshot: %s: %w: no catalog loaded yet: %w", op, plants.ErrUnavailable, *s.lastErr.Load())
}

func (s *Snapshot) setErr(err error) { s.lastErr.Store(&err) }

// Done returns a channel closed once the background work has ended (after
// ctx of OpenSnapshot ends, or Close).
func (s *Snapshot) Done() <-chan struct{} { return s.done }

// Close ends the background work, waits for it, and closes the pool.
func (s *Snapshot) Close() {
	s.stop()
	<-s.done
	s.pool.Close()
}

// age is plantstore_catalog_snapshot_age_seconds.
func (s *Snapshot) age() float64 {
	if s.version.Load() == 0 {
		return math.Inf(1)
	}
	return time.Since(time.Unix(0, s.confirmed.Load())).Seconds()
}

// confirm records that the snapshot in use was current at t, as the
// database answered: a load, or a read of the version finding the
// snapshot's. Nothing else may call it (a notification can come from any
// login), so the age of a replica that cannot load a new version grows
// from its last load.
func (s *Snapshot) confirm(t time.Time) {
	if n := t.UnixNano(); n > s.confirmed.Load() {
		s.confirmed.Store(n)
	}
}

// check asks the loop to compare versions now.
func (s *Snapshot) check() {
	select {
	case s.kick <- struct{}{}:
	default: // one is already pending
	}
}

// Backoff before the first snapshot, and of the listener's reconnections:
// from minRetry, doubling, up to the poll interval (and 30 s at most).
const (
	minRetry = 100 * time.Millisecond
	maxRetry = 30 * time.Second
)

// run keeps the snapshot current until ctx ends: a load at once, then a
// version check on each notification and every poll interval, and a
// listener beside it.
func (s *Snapshot) run(ctx context.Context) {
	defer close(s.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.listenLoop(ctx) })

	// Two runs of failures: before the first snapshot (not ready), and
	// after it (serving the last snapshot).
	first := failureStreak{level: zap.ErrorLevel}
	later := failureStreak{level: zap.WarnLevel}
	retry := minRetry
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-t.C:
		}
		had := s.version.Load() != 0
		err := s.refresh(ctx)
		if ctx.Err() != nil {
			return
		}
		next := s.o.Poll
		switch {
		case !had:
			first.report(s.log, err, "cannot load the catalog; not ready until a first snapshot is loaded", "first catalog snapshot loaded")
			if err != nil {
				next, retry = min(retry, next), min(2*retry, next, maxRetry)
			}
		default:
			later.report(s.log, err, "cannot refresh the catalog; the last snapshot keeps serving", "catalog refreshed again")
		}
		t.Reset(next)
	}
}

// refresh loads the catalog when its version is not the snapshot's, and
// otherwise records that the snapshot is current.
func (s *Snapshot) refresh(ctx context.Context) error {
	if have := s.version.Load(); have != 0 {
		start := time.Now()
		v, err := readVersion(ctx, s.pool, s.o.QueryTimeout)
		if err != nil {
			return err
		}
		if v.version == have {
			s.confirm(start)
			return nil
		}
	}
	return s.reload(ctx)
}

// reload loads the catalog, swaps it in with its index, and records the
// outcome; the time recorded is the whole of it, the index included.
func (s *Snapshot) reload(ctx context.Context) error {
	ctx, span := s.tracer.Start(ctx, "plants.snapshot.reload")
	defer span.End()
	start := time.Now()
	c, version, err := s.load(ctx)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		s.metrics.ObserveReload(false, time.Since(start))
		if s.version.Load() == 0 {
			s.setErr(err)
		}
		return err
	}
	s.mem.Replace(c) // sets plantstore_catalog_plants, frees the old catalog
	took := time.Since(start)
	s.lastLoad.Store(int64(took))
	s.metrics.ObserveReload(true, took)
	s.confirm(start)
	s.version.Store(version)
	span.SetAttributes(versionKey.Int64(version), plantsKey.Int(c.Len()))
	s.log.Info("catalog snapshot loaded", zap.Int64("version", version), zap.Int("plants", c.Len()), zap.Duration("took", took))
	if s.o.Loaded != nil {
		s.o.Loaded(c)
	}
	return nil
}

// load reads the catalog and its version in one read-only transaction, so
// that both are of one commit. The rows come in the contract's order
// (index plants_name_id) and go straight into a CatalogBuilder: a
// catalog's worth of plants never exists as Go values beside it.
func (s *Snapshot) load(parent context.Context) (*plants.Catalog, int64, error) {
	// The query timeout bounds each wait for the database (a connection,
	// the first row, the next rows), not the whole load, which grows with
	// the catalog: a watchdog cancels the load when no row came for that
	// long.
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	var progress atomic.Int64
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go func() {
		t := time.NewTicker(s.o.QueryTimeout)
		defer t.Stop()
		last := int64(-1)
		for {
			select {
			case <-stopWatch:
				return
			case <-t.C:
			}
			n := progress.Load()
			if n == last {
				cancel(errQueryTimeout)
				return
			}
			last = n
		}
	}()

	fail := func(err error) (*plants.Catalog, int64, error) {
		return nil, 0, queryError("load catalog", parent, ctx, err)
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	v, err := readVersion(ctx, tx, s.o.QueryTimeout)
	if err != nil {
		return fail(err)
	}
	progress.Add(1)
	// The stored sizes size the catalog, which then grows by no copy; sizes
	// far off (a catalog changed by hand) cost only reallocations.
	b := plants.NewCatalogBuilder(int(min(max(v.plants, 0), 1<<26)), int(min(max(v.textBytes, 0), 1<<32-1)))
	b.AssumeUniqueIDs() // the primary key
	rows, err := tx.Query(ctx, loadSQL, pgx.QueryResultFormats{pgx.TextFormatCode, pgx.TextFormatCode, pgx.TextFormatCode, pgx.BinaryFormatCode})
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	var readers [][]byte
	for rows.Next() {
		progress.Add(1)
		raw := rows.RawValues()
		if len(raw) != 4 {
			return fail(fmt.Errorf("load catalog: %d columns, want 4", len(raw)))
		}
		if readers, err = textArray(readers[:0], raw[3]); err != nil {
			return nil, 0, fmt.Errorf("postgres: load catalog: plant %q: readers: %w", raw[1], err)
		}
		if err := b.Add(raw[1], raw[0], raw[2], readers); err != nil {
			return nil, 0, fmt.Errorf("postgres: load catalog: plant %q: %w", raw[1], err)
		}
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err)
	}
	c, err := b.Catalog()
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: load catalog: %w", err)
	}
	return c, v.version, nil
}

// loadSQL reads the catalog in the contract's order. A NULL tag comes as a
// nil value, which is no tag.
const loadSQL = `SELECT name, id, tag, readers FROM plants ORDER BY name, id`

// textArray appends to dst the elements of a one-dimensional text[] without
// NULLs in PostgreSQL's binary format: the number of dimensions, a flag,
// the element type, each dimension's length and lower bound, then each
// element as a length and its bytes. The elements are parts of src.
func textArray(dst [][]byte, src []byte) ([][]byte, error) {
	be := func(b []byte) int { return int(int32(binary.BigEndian.Uint32(b))) }
	if len(src) < 12 {
		return dst, errors.New("malformed array")
	}
	switch ndim := be(src); {
	case ndim == 0:
		return dst, nil
	case ndim != 1:
		return dst, fmt.Errorf("an array of %d dimensions, want 1", ndim)
	case len(src) < 20:
		return dst, errors.New("malformed array")
	}
	n, p := be(src[12:]), 20
	for range n {
		if len(src)-p < 4 {
			return dst, errors.New("malformed array")
		}
		l := be(src[p:])
		p += 4
		if l < 0 {
			return dst, errors.New("a NULL reader")
		}
		if len(src)-p < l {
			return dst, errors.New("malformed array")
		}
		dst = append(dst, src[p:p+l])
		p += l
	}
	return dst, nil
}

// listenLoop listens for the notifications of imports until ctx ends,
// reconnecting with backoff when the connection fails.
func (s *Snapshot) listenLoop(ctx context.Context) {
	streak := failureStreak{level: zap.WarnLevel}
	retry := minRetry
	once := false
	for {
		err := s.listenOnce(ctx, func() {
			if !once {
				s.log.Info("listening for catalog changes", zap.String("channel", NotifyChannel))
				once = true
			}
			streak.report(s.log, nil, "", "listening for catalog changes again")
			retry = minRetry
		})
		if ctx.Err() != nil {
			return
		}
		streak.report(s.log, err, "the catalog listener lost its connection; reconnecting (the poll still catches changes)", "")
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
		retry = min(2*retry, s.o.Poll, maxRetry)
	}
}

// listenOnce connects, listens, and checks the version as soon as it
// listens (whatever was sent before is lost), then asks for a check on
// each notification of this schema that names another version than the
// snapshot's, until the connection fails or ctx ends. connected is called
// once it listens.
func (s *Snapshot) listenOnce(ctx context.Context, connected func()) error {
	return listen(ctx, s.listen, NotifyChannel, func() { connected(); s.check() }, func(payload, schema string) {
		version, from, ok := strings.Cut(payload, " ")
		if !ok || from != schema {
			return // another catalog of this database
		}
		if v, err := strconv.ParseInt(version, 10, 64); err == nil && v == s.version.Load() {
			// Loaded already. The age is left alone: any login to the
			// database may notify, so only the database's own answer
			// confirms the snapshot current.
			return
		}
		time.AfterFunc(s.notifyDelay(), s.check)
	})
}

// listen connects with cfg and listens on channel; then it calls
// listening (notifications sent before are lost: it checks at once), and
// notified with each notification's payload and the connection's schema,
// until the connection fails or ctx ends.
func listen(ctx context.Context, cfg *pgx.ConnConfig, channel string, listening func(), notified func(payload, schema string)) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("postgres: listen: %w", sanitize(err))
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return fmt.Errorf("postgres: listen: %w", sanitize(err))
	}
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return fmt.Errorf("postgres: listen: %w", sanitize(err))
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("postgres: listen: %w", sanitize(err))
		}
		notified(n.Payload, schema)
	}
}

// notifySpread bounds how long after a notification a replica starts its
// load plus how long the load takes: a change is served within it, and
// within 1 s of its commit with the notification's own latency.
const notifySpread = 250 * time.Millisecond

// notifyDelay returns how long to wait after a notification before the
// load: a random share of what notifySpread leaves once the last load's
// duration is taken off it, so that the replicas of a deployment, which
// all receive the notification at once, do not all read the whole catalog
// from the database and hold two copies of it in memory at the same
// moment. A load that took notifySpread or longer leaves no delay.
func (s *Snapshot) notifyDelay() time.Duration {
	room := notifySpread - time.Duration(s.lastLoad.Load())
	if room <= 0 {
		return 0
	}
	return rand.N(room)
}
