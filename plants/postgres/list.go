package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/plantstore/plantstore/plants"
)

// errQueryTimeout is the cancellation cause when a query exceeds the
// store's query timeout.
var errQueryTimeout = errors.New("query timeout")

// List yields the plants q.Caller may read in the contract's order,
// streaming rows from the database as the caller consumes them; memory does
// not grow with the number of rows. The sequence ends early, without an
// error, when the caller stops. An error ends it: when ctx ends, one that
// wraps ctx's cause; otherwise one that wraps [plants.ErrUnavailable] (the
// database is unreachable, failed, or exceeded the query timeout).
func (s *Store) List(ctx context.Context, q plants.Query) iter.Seq2[plants.Plant, error] {
	return func(yield func(plants.Plant, error) bool) {
		if q.Limit == 0 {
			return
		}
		principals := q.Caller.Principals() // without repeats, "*" always among them
		start := time.Now()
		err := s.list(ctx, principals, q.Limit, yield)
		s.observe(start, err)
		if err != nil {
			yield(plants.Plant{}, err)
		}
	}
}

func (s *Store) list(parent context.Context, principals []string, limit int, yield func(plants.Plant, error) bool) error {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	// The timer runs while this code waits for the database (a connection,
	// the first row, each next row) and is stopped while the caller consumes
	// a row, so a slow reader of a long stream is not cut off.
	timer := time.AfterFunc(s.timeout, func() { cancel(errQueryTimeout) })
	defer timer.Stop()

	for attempt := 0; ; attempt++ {
		yielded, err := s.listOnce(ctx, timer, principals, limit, yield)
		if err == nil {
			return nil
		}
		// A pooled connection may have died while idle (the database
		// restarted), and then its idle neighbours have too: they are
		// closed, and one retry on a new connection hides that from the
		// caller. Only before the first row and for connection failures:
		// an error from the server itself would repeat.
		var pgErr *pgconn.PgError
		if yielded || attempt > 0 || ctx.Err() != nil || errors.As(err, &pgErr) {
			return queryError("list plants", parent, ctx, err)
		}
		s.pool.Reset()
	}
}

// listOnce runs the list queries once and yields the rows. It reports
// whether it yielded any.
//
// With a limit, one statement: for each principal, at most limit rows of
// its ordered index range, then the first limit of all those in order. Its
// text never changes, so its plan is prepared once per connection. Its
// cost is one index probe per principal plus the rows read, at most limit
// × principals: a principal that no plant names costs a probe that finds
// nothing, and sending it costs too, which for the 256 groups a token may
// carry came to several times an ordinary caller's whole request. So the
// store remembers, per catalog version, the principals that read nothing
// (s.none), and leaves them out. The statement reads the catalog version
// itself: when it is no longer the one they were found at, it answers a
// single row saying so instead of plants, and the listing starts again
// without them; an import that gives them plants is thus seen by the very
// next request. A caller with more than probeAbove principals the store
// does not know yet has them sorted out first by one probe, which spares
// its next requests.
//
// Without a limit the answer is every visible plant, and a sort of all of
// them would spill to disk on a large catalog: the query is then a merge of
// the principals' ordered ranges, which the planner streams without
// sorting (Merge Append, Unique). Its text grows with the number of
// principals, and so does its planning, so it names only the principals
// that read some plant, found first by the same probe.
func (s *Store) listOnce(ctx context.Context, timer *time.Timer, principals []string, limit int, yield func(plants.Plant, error) bool) (bool, error) {
	for attempt := 0; ; attempt++ {
		rest, version, leftOut := principals, int64(0), false
		if attempt == 0 { // after a version change, once without the cache
			var known []string
			rest, known, version = s.none.split(principals)
			leftOut = len(known) > 0
		}
		if limit < 0 || len(rest) > probeAbove {
			p, err := s.probe(ctx, rest, version, leftOut)
			if err != nil {
				return false, err
			}
			if p.stale {
				s.none.saw(p.version)
				continue
			}
			s.none.learn(p.version, p.none)
			rest = p.reading
		}
		if limit < 0 {
			if len(rest) == 0 {
				return false, nil
			}
			args := make([]any, 0, len(rest))
			for _, p := range rest {
				args = append(args, p)
			}
			return s.query(ctx, timer, listSQL(len(rest)), args, yield)
		}
		yielded, stale, err := s.queryLimited(ctx, timer, rest, version, leftOut, limit, yield)
		if stale == 0 {
			return yielded, err
		}
		s.none.saw(stale)
	}
}

// probeAbove is the number of principals unknown to the cache above which a
// limited listing probes them first. An ordinary caller has three or four
// principals and goes straight to the listing; the probe pays off when
// most of many principals read nothing, and costs one round trip.
const probeAbove = 8

// versionCTE reads the catalog version once per statement, 0 when the
// row is missing.
const versionCTE = `WITH v AS MATERIALIZED (SELECT coalesce((SELECT version FROM catalog_version), 0) AS version)`

// listLimitedSQL lists the plants the principals $1 may read, at most $4,
// as name, plant_id, tag and a NULL; unless $3 (principals were left out
// as reading nothing at version $2) and the catalog is no longer at
// version $2: then it answers one row, NULLs and the catalog version.
const listLimitedSQL = versionCTE + `
(SELECT DISTINCT ON (visible.name, visible.plant_id) visible.name, visible.plant_id, visible.tag, NULL::bigint
FROM v
CROSS JOIN LATERAL unnest($1::text[]) AS caller(principal)
CROSS JOIN LATERAL (
	SELECT name, plant_id, tag FROM plant_readers r
	WHERE r.principal = caller.principal
	ORDER BY name, plant_id LIMIT $4
) AS visible
WHERE v.version = $2 OR NOT $3
ORDER BY visible.name, visible.plant_id LIMIT $4)
UNION ALL
SELECT NULL, NULL, NULL, v.version FROM v WHERE v.version <> $2 AND $3`

// probeSQL returns the catalog version, whether it is stale (not $2 while
// $3, as in listLimitedSQL: then nothing else is read), and which of the
// principals $1 read some plant and which read none.
const probeSQL = versionCTE + `,
c AS MATERIALIZED (
	SELECT caller.principal, EXISTS (SELECT 1 FROM plant_readers r WHERE r.principal = caller.principal) AS reads
	FROM v CROSS JOIN LATERAL unnest($1::text[]) AS caller(principal)
	WHERE v.version = $2 OR NOT $3
)
SELECT v.version, v.version <> $2 AND $3,
	coalesce((SELECT array_agg(principal) FROM c WHERE reads), '{}'),
	coalesce((SELECT array_agg(principal) FROM c WHERE NOT reads), '{}')
FROM v`

// probed is what probeSQL found.
type probed struct {
	version       int64
	stale         bool
	reading, none []string
}

// probe sorts the principals ps into those that read some plant and those
// that read none, unless leftOut (the caller has principals that read
// nothing at version) and the catalog left version.
func (s *Store) probe(ctx context.Context, ps []string, version int64, leftOut bool) (probed, error) {
	var p probed
	err := s.pool.QueryRow(ctx, probeSQL, ps, version, leftOut).Scan(&p.version, &p.stale, &p.reading, &p.none)
	return p, err
}

// queryLimited runs listLimitedSQL once and yields its rows. It reports
// whether it yielded any, and the catalog version when the statement
// found it stale (0 otherwise).
func (s *Store) queryLimited(ctx context.Context, timer *time.Timer, ps []string, version int64, leftOut bool, limit int, yield func(plants.Plant, error) bool) (yielded bool, stale int64, err error) {
	rows, err := s.pool.Query(ctx, listLimitedSQL, ps, version, leftOut, int64(limit))
	if err != nil {
		return false, 0, err
	}
	defer rows.Close()
	// The marker row comes alone: check the first row only.
	first := true
	yielded, err = s.yieldRows(timer, rows, func(r pgx.Rows) (bool, error) {
		if !first {
			return false, nil
		}
		first = false
		if r.RawValues()[3] == nil {
			return false, nil
		}
		return true, r.Scan(nil, nil, nil, &stale)
	}, yield)
	return yielded, stale, err
}

// query runs a list query of three columns (name, plant_id, tag) once and
// yields its rows. It reports whether it yielded any.
func (s *Store) query(ctx context.Context, timer *time.Timer, sql string, args []any, yield func(plants.Plant, error) bool) (bool, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	return s.yieldRows(timer, rows, nil, yield)
}

// yieldRows yields the plants of rows (name, plant_id, tag first), and
// reports whether it yielded any. marker, when not nil, is asked first
// about each row whether it is no plant but a marker that ends the rows.
func (s *Store) yieldRows(timer *time.Timer, rows pgx.Rows, marker func(pgx.Rows) (bool, error), yield func(plants.Plant, error) bool) (yielded bool, err error) {
	dest := make([]any, len(rows.FieldDescriptions()))
	for {
		timer.Reset(s.timeout)
		if !rows.Next() {
			break
		}
		timer.Stop()
		if marker != nil {
			if end, err := marker(rows); end || err != nil {
				return yielded, err
			}
		}
		var p plants.Plant
		var tag *string
		dest[0], dest[1], dest[2] = &p.Name, &p.ID, &tag
		if err := rows.Scan(dest...); err != nil {
			return yielded, err
		}
		if tag != nil {
			p.Tag = *tag
		}
		yielded = true
		if !yield(p, nil) {
			// Close drains the rest of the result, which keeps the
			// connection usable at no more cost than the rows left; a
			// cancel request would cost a round trip to the server and
			// pgx's 100ms pause after it. The timer bounds the drain.
			timer.Reset(s.timeout)
			return true, nil
		}
	}
	return yielded, rows.Err()
}

// queryError translates the error of the operation op (ctx is its
// context, parent the caller's) into one that names the cause without SQL
// text. It wraps plants.ErrUnavailable unless the caller's own context
// ended, which is the caller's doing, not the database's.
func queryError(op string, parent, ctx context.Context, err error) error {
	if parent.Err() != nil {
		return fmt.Errorf("postgres: %s: %w", op, context.Cause(parent))
	}
	if errors.Is(context.Cause(ctx), errQueryTimeout) {
		return unavailable(op, errQueryTimeout)
	}
	return unavailable(op, err)
}

func (s *Store) observe(start time.Time, err error) {
	result := plants.ResultOK
	if err != nil {
		result = plants.ResultError
	}
	s.metrics.ObserveStore(plants.StorePostgres, result, time.Since(start))
}

// listSQL returns the query of a listing without a limit for n principals
// ($1..$n); a limited listing is listLimitedSQL's. Each principal reads one
// ordered range of the plant_readers primary key; the planner merges the
// ranges in order (Merge Append) and drops plants seen through several
// principals (Unique) without sorting, so the answer streams in order.
func listSQL(n int) string {
	var b strings.Builder
	b.WriteString("SELECT DISTINCT ON (name, plant_id) name, plant_id, tag FROM (")
	for i := range n {
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		b.WriteString("(SELECT name, plant_id, tag FROM plant_readers WHERE principal = $")
		b.WriteString(strconv.Itoa(i + 1))
		b.WriteString(" ORDER BY name, plant_id)")
	}
	b.WriteString(") AS visible ORDER BY name, plant_id")
	return b.String()
}
