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
		err := s.list(ctx, principals, q.Limit, q.After, yield)
		s.observe(start, err)
		if err != nil {
			yield(plants.Plant{}, err)
		}
	}
}

func (s *Store) list(parent context.Context, principals []string, limit int, after plants.Key, yield func(plants.Plant, error) bool) error {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	// The timer runs while this code waits for the database (a connection,
	// the first row, each next row) and is stopped while the caller consumes
	// a row, so a slow reader of a long stream is not cut off.
	timer := time.AfterFunc(s.timeout, func() { cancel(errQueryTimeout) })
	defer timer.Stop()

	for attempt := 0; ; attempt++ {
		yielded, err := s.listOnce(ctx, timer, principals, limit, after, yield)
		if err == nil {
			return nil
		}
		// Two failures are not this listing's and pass with one retry,
		// before the first row only:
		//   - A pooled connection may have died while idle (the database
		//     restarted), and then its idle neighbours have too: they are
		//     closed, and the retry runs on a new connection.
		//   - A statement cancelled though neither this caller nor the
		//     timeout asked: the cancel request of an earlier listing on the
		//     same connection, whose client left just as its statement
		//     ended, can reach the server after the connection went back to
		//     the pool (the protocol gives no way to wait for it).
		// Any other error from the server itself would repeat.
		var pgErr *pgconn.PgError
		fromServer := errors.As(err, &pgErr)
		strayCancel := fromServer && pgErr.Code == sqlstateQueryCanceled
		if yielded || attempt > 0 || ctx.Err() != nil || (fromServer && !strayCancel) {
			return queryError("list plants", parent, ctx, err)
		}
		if !strayCancel {
			s.pool.Reset()
		}
	}
}

// sqlstateQueryCanceled is the SQLSTATE of a statement ended by a cancel
// request (query_canceled).
const sqlstateQueryCanceled = "57014"

// listOnce runs the listing once and yields its rows. It reports whether
// it yielded any.
//
// Each answer comes from one consistent state of the database, never from
// both sides of an import's commit: it is the rows of one statement, or,
// when the principals must be sorted out first, of the second of two
// statements run in one read-only REPEATABLE READ transaction, which see
// one snapshot.
//
// The statement reads, for each principal, its ordered index range of
// plant_readers: with a limit, at most limit rows of each range, then the
// first limit of all those in order (listLimitedSQL, whose text never
// changes, so its plan is prepared once per connection); without one, a
// merge of the ranges, which the planner streams without sorting
// (listSQL: a sort of every visible plant would spill to disk on a large
// catalog). Its cost is one index probe per principal plus the rows read.
// A principal that no plant names costs a probe that finds nothing, and
// sending it costs too, which for the 256 groups a token may carry came to
// several times an ordinary caller's whole request. So the store
// remembers, per catalog version, the principals that read nothing
// (s.none), and leaves them out. The statement reads the catalog version
// itself: when it is no longer the one they were found at, it answers a
// single row saying so instead of plants, and the listing starts again
// without them; an import that gives them plants is thus seen by the very
// next request.
//
// A caller with more than probeAbove principals the store does not know
// yet has them sorted out first by one probe (which spares its next
// requests, and keeps the merge's text, whose planning grows with it, to
// the principals that read some plant), in the transaction of the listing
// itself: the principals the probe finds reading nothing read nothing in
// the listing's snapshot either.
func (s *Store) listOnce(ctx context.Context, timer *time.Timer, principals []string, limit int, after plants.Key, yield func(plants.Plant, error) bool) (bool, error) {
	for attempt := 0; ; attempt++ {
		rest, version, leftOut := principals, int64(0), false
		if attempt == 0 { // after a version change, once without the cache
			var known []string
			rest, known, version = s.none.split(principals)
			leftOut = len(known) > 0
		}
		var (
			yielded bool
			stale   int64
			err     error
		)
		if len(rest) > probeAbove {
			yielded, stale, err = s.listProbed(ctx, timer, rest, version, leftOut, limit, after, yield)
		} else {
			yielded, stale, err = s.listRows(ctx, timer, rest, version, leftOut, limit, after, yield)
		}
		if stale == 0 {
			return yielded, err
		}
		s.none.saw(stale)
	}
}

// probeAbove is the number of principals unknown to the cache above which a
// listing probes them first. An ordinary caller has three or four
// principals and goes straight to the listing; the probe pays off when
// most of many principals read nothing, and costs one round trip.
const probeAbove = 8

// beginSnapshotSQL starts the transaction of a probe and its listing:
// both statements see the snapshot of the first.
const beginSnapshotSQL = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

// listProbed sorts the principals ps out with probeSQL and lists for
// those that read some plant, in one read-only transaction. Its results
// are those of listRows.
//
// The transaction costs no round trip of its own: its BEGIN is sent in
// one batch with the probe, and its end (a rollback, which ends a
// read-only transaction as a commit would) in one with the listing. A
// connection that an error or a cancel leaves inside the transaction is
// closed rather than returned to the pool.
func (s *Store) listProbed(ctx context.Context, timer *time.Timer, ps []string, version int64, leftOut bool, limit int, after plants.Key, yield func(plants.Plant, error) bool) (yielded bool, stale int64, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, 0, err
	}
	defer conn.Release()
	var p probed
	b := &pgx.Batch{}
	b.Queue(beginSnapshotSQL)
	b.Queue(probeSQL, ps, version, leftOut).QueryRow(func(r pgx.Row) error {
		return r.Scan(&p.version, &p.stale, &p.reading, &p.none)
	})
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return false, 0, err
	}
	if p.stale || len(p.reading) == 0 {
		if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
			return false, 0, err
		}
		if p.stale {
			return false, p.version, nil
		}
		s.none.learn(p.version, p.none)
		return false, 0, nil
	}
	s.none.learn(p.version, p.none)
	// The probe's snapshot: the listing needs no check of the version.
	sql, args := listStatement(p.reading, 0, false, limit, after)
	b = &pgx.Batch{}
	b.Queue(sql, args...)
	b.Queue("ROLLBACK")
	br := conn.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return false, 0, err
	}
	yielded, _, err = s.yieldListing(timer, rows, yield)
	rows.Close()
	if err != nil {
		return yielded, 0, err
	}
	// After the last row the answer is whole: a failed rollback only
	// costs the connection.
	_, _ = br.Exec()
	return yielded, 0, nil
}

// versionCTE reads the catalog version once per statement, 0 when the
// row is missing.
const versionCTE = `WITH v AS MATERIALIZED (SELECT coalesce((SELECT version FROM catalog_version), 0) AS version)`

// listLimitedSQL lists the plants the principals $1 may read that sort
// after the key ($5, $6) (keyset paging: each principal's index range
// starts at the key, in the index's own "C" order), at most $4, as name,
// plant_id, tag and a NULL; unless $3 (principals were left out
// as reading nothing at version $2) and the catalog is no longer at
// version $2: then it answers one row, NULLs and the catalog version.
const listLimitedSQL = versionCTE + `
(SELECT DISTINCT ON (visible.name, visible.plant_id) visible.name, visible.plant_id, visible.tag, NULL::bigint
FROM v
CROSS JOIN LATERAL unnest($1::text[]) AS caller(principal)
CROSS JOIN LATERAL (
	SELECT name, plant_id, tag FROM plant_readers r
	WHERE r.principal = caller.principal AND (r.name, r.plant_id) > ($5::text COLLATE "C", $6::text COLLATE "C")
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

// listRows runs the one statement of a listing for the principals ps
// (listStatement) and yields its rows. It reports whether it yielded any,
// and the catalog version when the statement found it stale (leftOut and
// no longer version; 0 otherwise).
func (s *Store) listRows(ctx context.Context, timer *time.Timer, ps []string, version int64, leftOut bool, limit int, after plants.Key, yield func(plants.Plant, error) bool) (yielded bool, stale int64, err error) {
	if len(ps) == 0 && !leftOut {
		return false, 0, nil
	}
	sql, args := listStatement(ps, version, leftOut, limit, after)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return false, 0, err
	}
	defer rows.Close()
	return s.yieldListing(timer, rows, yield)
}

// listStatement returns the statement of a listing for the principals ps,
// of the plants after the key after, and its arguments: listLimitedSQL with
// a limit, listSQL without. The zero key sorts before every plant (names
// are never empty), so a listing from the start is the same statement.
func listStatement(ps []string, version int64, leftOut bool, limit int, after plants.Key) (string, []any) {
	if limit >= 0 {
		return listLimitedSQL, []any{ps, version, leftOut, int64(limit), after.Name, after.ID}
	}
	args := make([]any, 0, len(ps)+4)
	args = append(args, version, leftOut, after.Name, after.ID)
	for _, p := range ps {
		args = append(args, p)
	}
	return listSQL(len(ps)), args
}

// yieldListing yields the plants of the rows of a listing statement. It
// reports whether it yielded any, and the catalog version when the
// statement answered that it is stale (0 otherwise).
func (s *Store) yieldListing(timer *time.Timer, rows pgx.Rows, yield func(plants.Plant, error) bool) (yielded bool, stale int64, err error) {
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

// listSQL returns the statement of a listing without a limit for n
// principals ($5..$n+4), after the key ($3, $4), whose rows are those of
// listLimitedSQL, with the version check of $1 and $2 as there. Each principal reads one ordered
// range of the plant_readers primary key; the planner merges the ranges
// in order (Merge Append) and drops plants seen through several principals
// (Unique) without sorting, so the answer streams in order. The check is
// an InitPlan that gates the ranges once (One-Time Filter), which keeps
// that plan.
func listSQL(n int) string {
	var b strings.Builder
	b.WriteString(versionCTE)
	if n > 0 {
		b.WriteString("\n(SELECT DISTINCT ON (name, plant_id) name, plant_id, tag, NULL::bigint FROM (")
		for i := range n {
			if i > 0 {
				b.WriteString(" UNION ALL ")
			}
			b.WriteString("(SELECT name, plant_id, tag FROM plant_readers WHERE principal = $")
			b.WriteString(strconv.Itoa(i + 5))
			b.WriteString(` AND (name, plant_id) > ($3::text COLLATE "C", $4::text COLLATE "C") ORDER BY name, plant_id)`)
		}
		b.WriteString(") AS visible WHERE (SELECT version FROM v) = $1 OR NOT $2 ORDER BY name, plant_id)\nUNION ALL")
	}
	b.WriteString("\nSELECT NULL, NULL, NULL, v.version FROM v WHERE v.version <> $1 AND $2")
	return b.String()
}
