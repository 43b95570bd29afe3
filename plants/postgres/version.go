package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// errNotMigrated reports a schema without the tables of the migrations.
var errNotMigrated = errors.New("schema not migrated (run plantstore migrate)")

// catalogVersion is the row of catalog_version (migration 00002).
type catalogVersion struct {
	version   int64 // raised by one by each import
	plants    int64 // plants stored, as counted by the last import
	textBytes int64 // bytes of their ids and names, likewise
}

// querier is what readVersion reads through: a pool, a connection or a
// transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readVersion reads the catalog version within timeout. The error wraps
// plants.ErrUnavailable.
func readVersion(ctx context.Context, q querier, timeout time.Duration) (catalogVersion, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var v catalogVersion
	if err := q.QueryRow(ctx, "SELECT version, plants, text_bytes FROM catalog_version").Scan(&v.version, &v.plants, &v.textBytes); err != nil {
		if isUndefinedTable(err) {
			return v, unavailable("read catalog version", errNotMigrated)
		}
		return v, unavailable("read catalog version", err)
	}
	return v, nil
}

// failureStreak logs a run of failures of one background task as two
// lines: the first failure at level, and the recovery at info with the
// number of failures; the failures between go to debug. An outage of an
// hour is then not a line every poll.
type failureStreak struct {
	level zapcore.Level
	n     int
	since time.Time
}

// report records the outcome of one attempt: err nil for a success.
func (f *failureStreak) report(log *zap.Logger, err error, failed, recovered string) {
	switch {
	case err == nil && f.n > 0:
		log.Info(recovered, zap.Int("failures", f.n), zap.Duration("after", time.Since(f.since)))
		f.n = 0
	case err == nil:
	case f.n == 0:
		log.Log(f.level, failed, zap.Error(err))
		f.n, f.since = 1, time.Now()
	default:
		f.n++
		log.Debug(failed, zap.Error(err), zap.Int("failures", f.n))
	}
}
