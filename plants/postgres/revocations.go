package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// RevocationsChannel is the channel [AddRevocation] notifies on, with the
// schema as payload, once its transaction commits.
const RevocationsChannel = "plantstore_revocations"

// A Revocation is a row of the revocations table (migration 00003): one
// of Sub, Client, All and JTI set; Before for a cutoff, Until for a JTI.
// Issuer is the configured name of the issuer, "" for the unnamed one.
type Revocation struct {
	Issuer string
	Sub    string
	Client string
	All    bool
	JTI    string
	Before time.Time
	Until  time.Time
}

// kindValue returns the kind and value columns of r.
func (r Revocation) kindValue() (kind, value string, err error) {
	switch {
	case r.Sub != "" && r.Client == "" && !r.All && r.JTI == "":
		return "subject", r.Sub, nil
	case r.Client != "" && r.Sub == "" && !r.All && r.JTI == "":
		return "client", r.Client, nil
	case r.All && r.Sub == "" && r.Client == "" && r.JTI == "":
		return "issuer", "", nil
	case r.JTI != "" && r.Sub == "" && r.Client == "" && !r.All:
		return "token", r.JTI, nil
	}
	return "", "", errors.New("postgres: a revocation names exactly one of a subject, a client, the whole issuer and a jti")
}

// AddRevocation stores r in the database at dsn, unless the same
// revocation is there already (added false), and notifies the replicas in
// the same transaction. The error never contains dsn.
func AddRevocation(ctx context.Context, dsn string, r Revocation) (added bool, err error) {
	kind, value, err := r.kindValue()
	if err != nil {
		return false, err
	}
	conn, err := connect(ctx, dsn)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	var before, until *time.Time
	if kind == "token" {
		until = &r.Until
	} else {
		before = &r.Before
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO revocations (issuer, kind, value, before, until)
SELECT $1, $2, $3, $4, $5
WHERE NOT EXISTS (SELECT 1 FROM revocations WHERE issuer = $1 AND kind = $2 AND value = $3
  AND before IS NOT DISTINCT FROM $4 AND until IS NOT DISTINCT FROM $5)`, r.Issuer, kind, value, before, until)
		if err != nil {
			return err
		}
		if added = tag.RowsAffected() == 1; !added {
			return nil
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, current_schema())", RevocationsChannel)
		return err
	})
	if err != nil {
		return false, revocationsError("add revocation", err)
	}
	return added, nil
}

// RecordEvent stores r, a subject cutoff, as the revocation of the security event jti of
// issuer, and notifies the replicas, in one transaction, unless that jti
// was recorded before: fresh is then false and nothing changes, so an
// event is applied once however many replicas it is delivered to.
func (w *RevocationWatch) RecordEvent(ctx context.Context, issuer, jti string, r Revocation) (fresh bool, err error) {
	if _, _, err := r.kindValue(); err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, w.o.QueryTimeout)
	defer cancel()
	err = pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "INSERT INTO security_events (issuer, jti) VALUES ($1, $2) ON CONFLICT DO NOTHING", issuer, jti)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		fresh = true
		if _, err := tx.Exec(ctx, "INSERT INTO revocations (issuer, kind, value, before) VALUES ($1, 'subject', $2, $3)", issuer, r.Sub, r.Before); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, current_schema())", RevocationsChannel)
		return err
	})
	if err != nil {
		return false, revocationsError("record security event", err)
	}
	return fresh, nil
}

// ListRevocations returns the revocations stored in the database at dsn,
// oldest first.
func ListRevocations(ctx context.Context, dsn string) ([]Revocation, error) {
	conn, err := connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rs, _, err := readRevocations(ctx, conn, 0)
	return rs, err
}

// revocationsError is err of op, said plainly when the table is missing.
func revocationsError(op string, err error) error {
	if isUndefinedTable(err) {
		return unavailable(op, errNotMigrated)
	}
	return unavailable(op, err)
}

// revocationsVersion is what tells a replica whether the table changed:
// the last id and the number of rows (rows are added, or deleted by an
// operator).
type revocationsVersion struct{ last, rows int64 }

// revQuerier runs queries: a connection or a pool.
type revQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readRevocations reads the rows, with the version they are of; with
// horizon set, only those whose time (before or until) is later than
// horizon before now.
func readRevocations(ctx context.Context, q revQuerier, horizon time.Duration) ([]Revocation, revocationsVersion, error) {
	var v revocationsVersion
	if err := q.QueryRow(ctx, "SELECT coalesce(max(id), 0), count(*) FROM revocations").Scan(&v.last, &v.rows); err != nil {
		return nil, v, revocationsError("read revocations", err)
	}
	since := time.Time{}
	if horizon > 0 {
		since = time.Now().Add(-horizon)
	}
	rows, err := q.Query(ctx, `SELECT issuer, kind, value, before, until FROM revocations
WHERE id <= $1 AND coalesce(until, before) > $2 ORDER BY id`, v.last, since)
	if err != nil {
		return nil, v, revocationsError("read revocations", err)
	}
	var out []Revocation
	for rows.Next() {
		var r Revocation
		var kind, value string
		var before, until *time.Time
		if err := rows.Scan(&r.Issuer, &kind, &value, &before, &until); err != nil {
			rows.Close()
			return nil, v, revocationsError("read revocations", err)
		}
		switch kind {
		case "subject":
			r.Sub = value
		case "client":
			r.Client = value
		case "issuer":
			r.All = true
		case "token":
			r.JTI = value
		}
		if before != nil {
			r.Before = before.UTC()
		}
		if until != nil {
			r.Until = until.UTC()
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, v, revocationsError("read revocations", err)
	}
	return out, v, nil
}

// RevocationWatch keeps a replica's revocations those of the database.
type RevocationWatch struct {
	pool    *pgxpool.Pool
	o       Options
	horizon time.Duration
	apply   func([]Revocation, time.Time)
	confirm func(time.Time)
	kick    chan struct{}
	done    chan struct{}
}

// WatchRevocations reads the revocations of the database at dsn and calls
// apply with them, then again whenever they change, until ctx ends: it
// listens on [RevocationsChannel] (a change is applied within a second of
// its commit) and reads the table's version every o.Poll besides, which
// catches a notification that was lost. Each read that finds the
// revocations applied current calls confirm with the time it started.
// While the database cannot be read, nothing is applied: the replica
// keeps the last revocations it read. Rows whose time is more than
// horizon ago (0: none) are not read. It fails only when dsn is malformed
// or o is refused.
func WatchRevocations(ctx context.Context, dsn string, o Options, horizon time.Duration, apply func([]Revocation, time.Time), confirm func(time.Time)) (*RevocationWatch, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	o.MaxConns = 1 // a read every poll, an event now and then
	if o.ListenDSN == "" {
		o.ListenDSN = dsn
	}
	listen, err := pgx.ParseConfig(o.ListenDSN)
	if err != nil {
		return nil, ErrMalformedDSN
	}
	configureConn(listen, o.ConnectTimeout)
	pool, err := openPool(ctx, dsn, o)
	if err != nil {
		return nil, err
	}
	w := &RevocationWatch{pool: pool, o: o, horizon: horizon, apply: apply, confirm: confirm, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go w.run(ctx, listen)
	return w, nil
}

// Done returns a channel closed once the watch has stopped and closed its
// connections.
func (w *RevocationWatch) Done() <-chan struct{} { return w.done }

// check asks the loop to read the version now.
func (w *RevocationWatch) check() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// run reads the revocations at once, then on each notification and every
// poll, and listens beside it, until ctx ends.
func (w *RevocationWatch) run(ctx context.Context, listen *pgx.ConnConfig) {
	defer close(w.done)
	defer w.pool.Close()
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		w.listenLoop(ctx, listen)
	}()
	defer func() { <-listening }()
	streak := failureStreak{level: zap.WarnLevel}
	var have *revocationsVersion
	retry := minRetry
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-t.C:
		}
		start := time.Now()
		v, err := w.refresh(ctx, have, start)
		if ctx.Err() != nil {
			return
		}
		next := w.o.Poll
		if err == nil {
			have, retry = &v, minRetry
		} else {
			// Retried sooner than the poll, backing off: a broken
			// connection of the pool is replaced on the next try.
			next, retry = min(retry, next), min(2*retry, maxRetry)
		}
		streak.report(w.o.Log, err, "cannot read the revocations; the last ones read stay in force", "revocations read again")
		t.Reset(next)
	}
}

// refresh reads the table's version, and the revocations when it is not
// have's; it applies them or confirms those in force.
func (w *RevocationWatch) refresh(ctx context.Context, have *revocationsVersion, start time.Time) (revocationsVersion, error) {
	ctx, cancel := context.WithTimeout(ctx, w.o.QueryTimeout)
	defer cancel()
	if have != nil {
		var v revocationsVersion
		if err := w.pool.QueryRow(ctx, "SELECT coalesce(max(id), 0), count(*) FROM revocations").Scan(&v.last, &v.rows); err != nil {
			return v, revocationsError("read revocations", err)
		}
		if v == *have {
			w.confirm(start)
			return v, nil
		}
	}
	rs, v, err := readRevocations(ctx, w.pool, w.horizon)
	if err != nil {
		return v, err
	}
	w.apply(rs, start)
	w.o.Log.Info("revocations loaded", zap.Int("revocations", len(rs)))
	return v, nil
}

// listenLoop listens for the notifications of AddRevocation until ctx
// ends, reconnecting with backoff.
func (w *RevocationWatch) listenLoop(ctx context.Context, listen *pgx.ConnConfig) {
	streak := failureStreak{level: zap.WarnLevel}
	retry := minRetry
	for {
		err := w.listenOnce(ctx, listen, func() {
			streak.report(w.o.Log, nil, "", "listening for revocations again")
			retry = minRetry
		})
		if ctx.Err() != nil {
			return
		}
		streak.report(w.o.Log, err, "the revocations listener lost its connection; reconnecting (the poll still catches changes)", "")
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
		retry = min(2*retry, w.o.Poll, maxRetry)
	}
}

// listenOnce connects and listens, checks at once (notifications sent
// before are lost), then on each notification of this schema.
func (w *RevocationWatch) listenOnce(ctx context.Context, cfg *pgx.ConnConfig, connected func()) error {
	return listen(ctx, cfg, RevocationsChannel, func() { connected(); w.check() }, func(payload, schema string) {
		if payload == schema {
			w.check()
		}
	})
}
