// Package postgres keeps the plant catalog in PostgreSQL (or a compatible
// engine): it owns the schema and its migrations, the catalog import, and
// two [plants.Store]s: [Snapshot], which serves from memory a copy of the
// catalog that it keeps current, and [Store], which reads the database on
// every request.
//
// Errors returned by this package never contain the connection string or SQL
// text. Errors of [Store.List] and [Store.Ping] wrap [plants.ErrUnavailable]
// whenever the database cannot answer.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/plantstore/plantstore/observability/setting"
	"github.com/plantstore/plantstore/plants"
)

// Defaults for the zero fields of [Options].
const (
	DefaultMaxConns       = 10
	DefaultConnectTimeout = 5 * time.Second
	DefaultQueryTimeout   = 5 * time.Second
	DefaultPoll           = 10 * time.Second
)

// MinPoll is the shortest Options.Poll: a shorter one would only load the
// database.
const MinPoll = 10 * time.Millisecond

// Options tune a [Store]. The zero value uses the defaults.
type Options struct {
	// MaxConns is the size of the connection pool; 0 or less means
	// [DefaultMaxConns].
	MaxConns int32
	// ConnectTimeout bounds each attempt to connect to the database; 0 means
	// [DefaultConnectTimeout].
	ConnectTimeout time.Duration
	// QueryTimeout bounds the wait for a connection and the first row of a
	// query, and then the wait for each following row (time spent by the
	// caller between rows does not count). A query that exceeds it is
	// cancelled, its connection goes back to the pool, and the error wraps
	// [plants.ErrUnavailable]. 0 means [DefaultQueryTimeout].
	QueryTimeout time.Duration
	// Poll is how often the catalog version is read: by a [Snapshot], to
	// catch a change whose notification was lost; by a [Store], for
	// plantstore_catalog_plants and to renew its cache of principals that
	// read nothing. 0 means [DefaultPoll]; otherwise at least [MinPoll].
	Poll time.Duration
	// ListenDSN is the database a [Snapshot] listens to for notifications,
	// when it must differ from the one it reads: LISTEN needs a session of
	// its own, which a pooler in transaction mode (PgBouncer) does not
	// give. It must reach the same database with the same search_path.
	// Empty means the DSN given to [OpenSnapshot].
	ListenDSN string
	// Log receives what the store's background work does (loads, lost
	// connections); nil logs nothing.
	Log *zap.Logger
	// Metrics, when not nil, gets the store's reloads, snapshot age and
	// pool statistics.
	Metrics *Metrics
	// Loaded, when not nil, is called with each catalog a [Snapshot] has
	// loaded, once it serves, from the goroutine that loads: for checks
	// of the catalog as a whole, such as readers that no issuer matches.
	// It must not keep the snapshot waiting long.
	Loaded func(*plants.Catalog)
	// TracerProvider, when not nil, makes a span of each statement run for
	// a traced request (a child of the request's span: the statement, never
	// its parameters) and of each snapshot reload (plants.snapshot.reload,
	// with its statements below it). Statements outside a trace, such as
	// the version polls, make none.
	TracerProvider trace.TracerProvider
}

// check returns the *setting.Error of the first value of o that cannot be
// used, naming the setting by its key.
func (o Options) check() error {
	if o.Poll != 0 && o.Poll < MinPoll {
		return setting.Errorf("poll", "%v is shorter than %v", o.Poll, MinPoll)
	}
	if o.ConnectTimeout < 0 {
		return setting.Errorf("connect_timeout", "negative duration %v", o.ConnectTimeout)
	}
	if o.QueryTimeout < 0 {
		return setting.Errorf("query_timeout", "negative duration %v", o.QueryTimeout)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = DefaultQueryTimeout
	}
	if o.Poll == 0 {
		o.Poll = DefaultPoll
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	return o
}

// Store is a [plants.Store] backed by a PostgreSQL connection pool. Every
// List call reads the database. It is safe for concurrent use.
//
// The one thing it remembers is which principals read no plant of the
// current catalog version, so that the groups a caller carries and no
// plant names cost its requests nothing after the first (see List); the
// statement itself checks that the version is still current, so answers
// are those of the database at the time of the request.
type Store struct {
	pool    *pgxpool.Pool
	timeout time.Duration
	metrics *plants.Metrics
	none    noReaders
	log     *zap.Logger
	stop    context.CancelFunc
	done    chan struct{}
}

var _ plants.Store = (*Store)(nil)

// Open returns a Store for the database at dsn (a postgres:// URL or a
// key=value connection string). It does not wait for the database: the pool
// connects on first use, so a service can start while the database is down
// and recover when it comes back. Open fails only when dsn is malformed (the
// error never contains dsn) or o is refused (a *[setting.Error]). m may be nil.
//
// Until ctx ends or Close is called, the store reads the catalog version
// and the number of plants every o.Poll, for plantstore_catalog_plants.
func Open(ctx context.Context, dsn string, o Options, m *plants.Metrics) (*Store, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	pool, err := openPool(ctx, dsn, o)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(ctx)
	s := &Store{pool: pool, timeout: o.QueryTimeout, metrics: m, log: o.Log, stop: stop, done: make(chan struct{})}
	o.Metrics.reportPool(pool)
	go s.poll(ctx, o.Poll)
	return s, nil
}

// openPool returns a pool of o.MaxConns connections to dsn.
func openPool(ctx context.Context, dsn string, o Options) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, ErrMalformedDSN
	}
	cfg.MaxConns = o.MaxConns
	cfg.MinConns = 0
	configureConn(cfg.ConnConfig, o.ConnectTimeout)
	if o.TracerProvider != nil {
		// otelpgx starts a span only under a recording one, and records
		// no query parameters unless asked to.
		cfg.ConnConfig.Tracer = otelpgx.NewTracer(
			otelpgx.WithTracerProvider(o.TracerProvider),
			otelpgx.WithMeterProvider(metricnoop.NewMeterProvider()),
		)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open pool: %w", sanitize(err))
	}
	return pool, nil
}

// poll reads the catalog version and size every interval until ctx ends:
// the size for plantstore_catalog_plants; the version to start the cache
// of principals that read nothing over, which also bounds how long it can
// trust an entry when the catalog changes without an import (SQL by hand).
func (s *Store) poll(ctx context.Context, interval time.Duration) {
	defer close(s.done)
	streak := failureStreak{level: zap.WarnLevel}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		v, err := readVersion(ctx, s.pool, s.timeout)
		if err == nil {
			s.none.reset(v.version)
			s.metrics.SetCatalogPlants(int(v.plants))
		}
		streak.report(s.log, err, "cannot read the catalog version", "catalog version read again")
		t.Reset(interval)
	}
}

// Done returns a channel closed once the store's background work has
// ended (after ctx of Open ends, or Close).
func (s *Store) Done() <-chan struct{} { return s.done }

// CheckDSN reports, as [ErrMalformedDSN], whether dsn cannot be a
// PostgreSQL connection string. It does not connect.
func CheckDSN(dsn string) error {
	if _, err := pgxpool.ParseConfig(dsn); err != nil {
		return ErrMalformedDSN
	}
	return nil
}

// Close ends the store's background work and closes every connection of
// the pool, waiting for the ones in use to be released.
func (s *Store) Close() {
	s.stop()
	<-s.done
	s.pool.Close()
}

// Ping reports whether the database answers within the query timeout and
// holds a schema at least as new as this binary's migrations. The error wraps
// [plants.ErrUnavailable]; it is meant for readiness checks.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var version int64
	err := s.pool.QueryRow(ctx, "SELECT coalesce(max(version_id), 0) FROM "+versionTable).Scan(&version)
	if isUndefinedTable(err) {
		return unavailable("ping", errNotMigrated)
	}
	if err != nil {
		return unavailable("ping", err)
	}
	if want := latestVersion(); version < want {
		return fmt.Errorf("postgres: ping: %w: schema at version %d, want %d (run plantstore migrate)",
			plants.ErrUnavailable, version, want)
	}
	return nil
}

// ErrMalformedDSN is returned for a connection string that does not parse.
// It carries no detail because pgx's parse errors may quote the string, and
// with it a password.
var ErrMalformedDSN = errors.New("postgres: malformed database URL (not shown: it may hold a password)")

// configureConn applies the connection settings shared by the pool, Migrate
// and Import.
func configureConn(cc *pgx.ConnConfig, connectTimeout time.Duration) {
	cc.ConnectTimeout = connectTimeout
	if cc.RuntimeParams["application_name"] == "" {
		// Names the service's sessions in pg_stat_activity.
		cc.RuntimeParams["application_name"] = "plantstore"
	}
	// On a cancelled context, ask the server to cancel the statement so the
	// connection stays usable and returns to the pool, and only cut the socket
	// when the server does not answer the cancel request in time.
	cc.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: time.Second}
	}
}

// connect opens one connection for Migrate and Import.
func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, ErrMalformedDSN
	}
	configureConn(cfg, DefaultConnectTimeout)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", sanitize(err))
	}
	return conn, nil
}

// unavailable wraps err, from operation op, as [plants.ErrUnavailable].
func unavailable(op string, err error) error {
	return fmt.Errorf("postgres: %s: %w: %w", op, plants.ErrUnavailable, sanitize(err))
}

// sanitize drops what an error from pgx may carry beyond its message: a
// ParseConfigError (which quotes the connection string) becomes
// ErrMalformedDSN, and the password of a failed connection is written as
// xxxxx wherever the message repeats it. The user name stays: an error
// such as a missing role must name the role. Server errors (PgError)
// print only their message and SQLSTATE, never the statement.
func sanitize(err error) error {
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) {
		return ErrMalformedDSN
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Config != nil {
		msg := err.Error()
		if p := ce.Config.Password; p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
		return redactedError{msg: msg, err: err}
	}
	return err
}

// redactedError is err with its message replaced by msg, which has the
// secrets taken out; errors.Is and errors.As still see err.
type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

func isUndefinedTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01"
}
