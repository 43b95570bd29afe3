// Package postgres keeps the plant catalog in PostgreSQL (or a compatible
// engine): it owns the schema and its migrations, the catalog import, and a
// [plants.Store] that reads the database on every request.
//
// Errors returned by this package never contain the connection string or SQL
// text. Errors of [Store.List] and [Store.Ping] wrap [plants.ErrUnavailable]
// whenever the database cannot answer.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/plantstore/plantstore/plants"
)

// Defaults for the zero fields of [Options].
const (
	DefaultMaxConns       = 10
	DefaultConnectTimeout = 5 * time.Second
	DefaultQueryTimeout   = 5 * time.Second
)

// Options tune a [Store]. The zero value uses the defaults.
type Options struct {
	// MaxConns is the size of the connection pool; 0 means [DefaultMaxConns].
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
	return o
}

// Store is a [plants.Store] backed by a PostgreSQL connection pool. Every
// List call reads the database; nothing is cached. It is safe for concurrent
// use.
type Store struct {
	pool    *pgxpool.Pool
	timeout time.Duration
	metrics *plants.Metrics
}

var _ plants.Store = (*Store)(nil)

// Open returns a Store for the database at dsn (a postgres:// URL or a
// key=value connection string). It does not wait for the database: the pool
// connects on first use, so a service can start while the database is down
// and recover when it comes back. Open fails only when dsn is malformed; the
// error never contains dsn. m may be nil.
func Open(ctx context.Context, dsn string, o Options, m *plants.Metrics) (*Store, error) {
	o = o.withDefaults()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, ErrMalformedDSN
	}
	cfg.MaxConns = o.MaxConns
	cfg.MinConns = 0
	configureConn(cfg.ConnConfig, o.ConnectTimeout)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open pool: %w", sanitize(err))
	}
	return &Store{pool: pool, timeout: o.QueryTimeout, metrics: m}, nil
}

// CheckDSN reports, as [ErrMalformedDSN], whether dsn cannot be a
// PostgreSQL connection string. It does not connect.
func CheckDSN(dsn string) error {
	if _, err := pgxpool.ParseConfig(dsn); err != nil {
		return ErrMalformedDSN
	}
	return nil
}

// Close closes every connection of the pool, waiting for the ones in use to
// be released.
func (s *Store) Close() {
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
		return fmt.Errorf("postgres: ping: %w: schema not migrated (run plantstore migrate)", plants.ErrUnavailable)
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
// ErrMalformedDSN. Server errors (PgError) print only their message and
// SQLSTATE, never the statement.
func sanitize(err error) error {
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) {
		return ErrMalformedDSN
	}
	return err
}

func isUndefinedTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01"
}
