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

// Migrate brings the schema of the database at dsn (in its current schema,
// the first of search_path) to the newest version embedded in this binary.
// It is idempotent. Concurrent calls, such as replicas starting together,
// are serialized by a session advisory lock keyed by the schema name; a call
// waits up to five minutes for the lock. The error never contains dsn.
func Migrate(ctx context.Context, dsn string) error {
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
	if _, err := p.Up(ctx); err != nil {
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
