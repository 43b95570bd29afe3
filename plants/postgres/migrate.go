package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// migrations holds the versioned schema, one goose SQL file per version
// (NNNNN_name.sql). Files are never edited once released; a change is a new
// file.
//
//go:embed migrations/*.sql
var migrations embed.FS

// versionTable is goose's record of the applied versions. It lives in the
// same schema as the catalog tables.
const versionTable = "goose_db_version"

// MigrateResult is what [Migrate] did.
type MigrateResult struct {
	// Applied are the versions applied by this call, in order; none when
	// the schema was already up to date.
	Applied []int64
	// Version is the schema's version afterwards.
	Version int64
}

// Migrate brings the schema of the database at dsn (in its current schema,
// the first of search_path) to the newest version embedded in this binary.
// It is idempotent. Concurrent calls, such as replicas starting together,
// are serialized by a session advisory lock keyed by the schema name; a call
// waits up to five minutes for the lock. The error never contains dsn.
func Migrate(ctx context.Context, dsn string) (MigrateResult, error) {
	var res MigrateResult
	err := withProvider(ctx, dsn, func(p *goose.Provider) error {
		applied, err := p.Up(ctx)
		for _, r := range applied {
			res.Applied = append(res.Applied, r.Source.Version)
		}
		if err != nil {
			return err
		}
		res.Version, err = p.GetDBVersion(ctx)
		return err
	})
	return res, err
}

// SchemaStatus is the state of a database's schema against this binary.
type SchemaStatus struct {
	// Version is the newest version applied to the database, 0 for none.
	Version int64
	// Latest is the newest version this binary embeds.
	Latest int64
	// Pending are the embedded versions not applied yet, in order.
	Pending []int64
}

// Status reports the schema state of the database at dsn without changing
// it. The error never contains dsn.
func Status(ctx context.Context, dsn string) (SchemaStatus, error) {
	st := SchemaStatus{Latest: latestVersion()}
	err := withProvider(ctx, dsn, func(p *goose.Provider) error {
		all, err := p.Status(ctx)
		if err != nil {
			return err
		}
		for _, m := range all {
			if m.State == goose.StatePending {
				st.Pending = append(st.Pending, m.Source.Version)
			}
		}
		st.Version, err = p.GetDBVersion(ctx)
		return err
	})
	return st, err
}

// withProvider runs fn with a goose provider over the database at dsn,
// holding the migration lock of its schema.
func withProvider(ctx context.Context, dsn string, fn func(*goose.Provider) error) error {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return ErrMalformedDSN
	}
	configureConn(cfg, DefaultConnectTimeout)
	db := stdlib.OpenDB(*cfg)
	defer db.Close()

	var schema sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return fmt.Errorf("postgres: %w", sanitize(err))
	}
	if !schema.Valid {
		return errors.New("postgres: no schema selected (search_path names no existing schema)")
	}
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(lockID(schema.String)),
		lock.WithLockTimeout(1, 300),
		lock.WithUnlockTimeout(1, 60),
	)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if err := fn(p); err != nil {
		return fmt.Errorf("postgres: %w", sanitize(err))
	}
	return nil
}

// lockID is the advisory lock key of Migrate for one schema, so that
// catalogs in different schemas of one database migrate independently.
func lockID(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("plantstore migrate\x00" + schema))
	return int64(h.Sum64())
}

// latestVersion is the newest schema version embedded in this binary.
func latestVersion() int64 {
	entries, _ := fs.ReadDir(migrations, "migrations")
	var latest int64
	for _, e := range entries {
		digits, _, _ := strings.Cut(e.Name(), "_")
		if v, err := strconv.ParseInt(digits, 10, 64); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}
