package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/plantstore/plantstore/plants"
)

// errQueryTimeout is the cancellation cause when a query exceeds the
// store's query timeout.
var errQueryTimeout = errors.New("query timeout")

// List yields the plants visible to q.Principals in the contract's order,
// streaming rows from the database as the caller consumes them; memory does
// not grow with the number of rows. The sequence ends early, without an
// error, when the caller stops. An error ends it: when ctx ends, one that
// wraps ctx's cause; otherwise one that wraps [plants.ErrUnavailable] (the
// database is unreachable, failed, or exceeded the query timeout).
func (s *Store) List(ctx context.Context, q plants.Query) iter.Seq2[plants.Plant, error] {
	return func(yield func(plants.Plant, error) bool) {
		principals := uniquePrincipals(q.Principals)
		if q.Limit == 0 || len(principals) == 0 {
			return
		}
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

	args := make([]any, 0, len(principals)+1)
	for _, p := range principals {
		args = append(args, p)
	}
	if limit < 0 {
		args = append(args, nil) // LIMIT NULL: no limit
	} else {
		args = append(args, int64(limit))
	}
	sql := listSQL(len(principals))
	for attempt := 0; ; attempt++ {
		yielded, err := s.query(ctx, timer, sql, args, yield)
		if err == nil {
			return nil
		}
		// A pooled connection may have died while idle (the database
		// restarted); one retry on another connection hides that from the
		// caller. Only before the first row and for connection failures:
		// an error from the server itself would repeat.
		var pgErr *pgconn.PgError
		if yielded || attempt > 0 || ctx.Err() != nil || errors.As(err, &pgErr) {
			return listError(parent, ctx, err)
		}
	}
}

// query runs the list query once and yields its rows. It reports whether it
// yielded any.
func (s *Store) query(ctx context.Context, timer *time.Timer, sql string, args []any, yield func(plants.Plant, error) bool) (yielded bool, err error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	for {
		timer.Reset(s.timeout)
		if !rows.Next() {
			break
		}
		timer.Stop()
		var p plants.Plant
		var tag *string
		if err := rows.Scan(&p.Name, &p.ID, &tag); err != nil {
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

// listError translates a query error into one that names the cause without
// SQL text. It wraps plants.ErrUnavailable unless the caller's own context
// (parent) ended, which is the caller's doing, not the database's.
func listError(parent, ctx context.Context, err error) error {
	if parent.Err() != nil {
		return fmt.Errorf("postgres: list plants: %w", context.Cause(parent))
	}
	if errors.Is(context.Cause(ctx), errQueryTimeout) {
		return unavailable("list plants", errQueryTimeout)
	}
	return unavailable("list plants", err)
}

func (s *Store) observe(start time.Time, err error) {
	result := plants.ResultOK
	if err != nil {
		result = plants.ResultError
	}
	s.metrics.ObserveStore(plants.StorePostgres, result, time.Since(start))
}

// uniquePrincipals returns ps sorted without duplicates, so that the query
// text depends only on the number of distinct principals.
func uniquePrincipals(ps []string) []string {
	ps = slices.Clone(ps)
	slices.Sort(ps)
	return slices.Compact(ps)
}

// listSQL returns the list query for n principals ($1..$n) and a limit
// ($n+1, NULL for none). Each principal reads one ordered range of the
// plant_readers primary key, at most limit rows; the planner merges the
// ranges in order (Merge Append) and drops plants seen through several
// principals (Unique) without sorting, so a request reads O(limit × n) index
// rows, and without a limit streams in order.
func listSQL(n int) string {
	var b strings.Builder
	lim := "$" + strconv.Itoa(n+1)
	b.WriteString("SELECT DISTINCT ON (name, plant_id) name, plant_id, tag FROM (")
	for i := range n {
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		b.WriteString("(SELECT name, plant_id, tag FROM plant_readers WHERE principal = $")
		b.WriteString(strconv.Itoa(i + 1))
		b.WriteString(" ORDER BY name, plant_id LIMIT ")
		b.WriteString(lim)
		b.WriteString(")")
	}
	b.WriteString(") AS visible ORDER BY name, plant_id LIMIT ")
	b.WriteString(lim)
	return b.String()
}
