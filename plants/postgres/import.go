package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/plantstore/plantstore/plants"
)

// ErrDuplicateID reports that an imported plant's id is already in the
// database's catalog.
var ErrDuplicateID = errors.New("plant id already in the catalog")

// Import loads c into the database at dsn in one transaction: readers see
// the old catalog until it commits and the new one after, and on any error
// (including a cancelled ctx) nothing changes. With replace, the new catalog
// replaces the whole stored one; without it, c's plants are added, and an id
// that is already stored fails the import with an error wrapping
// [ErrDuplicateID]. Rows are sent with COPY. The schema must be migrated.
// The error never contains dsn.
//
// In the same transaction Import raises the catalog version and sends a
// notification on the channel replicas listen to ([NotifyChannel]), which
// PostgreSQL delivers only if the transaction commits: a notification
// always means committed data.
func Import(ctx context.Context, dsn string, c *plants.Catalog, replace bool) error {
	return ImportLimited(ctx, dsn, c, replace, 0)
}

// DefaultMaxCatalogBytes is the catalog size, in bytes of text, that
// "plantstore import" allows by default: with the memory that the text's
// index and a reload's second copy take beside it, about what the base
// Deployment's 256 MiB holds.
const DefaultMaxCatalogBytes = 24 << 20

// A SizeError refuses an import that would leave a catalog larger than
// the limit it was given.
type SizeError struct {
	// Bytes is the catalog's size after the import, Limit the most allowed:
	// bytes of text, the ids, names, tags and readers of every plant.
	Bytes, Limit int64
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("the catalog would hold %d bytes of text, over the limit of %d: every replica holds it in memory, twice during a reload (raise -max-catalog-bytes once the replicas' memory limit allows it)", e.Bytes, e.Limit)
}

// ImportLimited is [Import] with a guard: when limit is above 0, an import
// that would leave the catalog with more than limit bytes of text (the
// ids, names, tags and readers of all its plants, about the size of its
// catalog file) fails with a [*SizeError] and changes nothing. Without
// replace the plants already stored count too.
func ImportLimited(ctx context.Context, dsn string, c *plants.Catalog, replace bool, limit int64) error {
	ps := c.Plants()
	if n := catalogBytes(ps); limit > 0 && n > limit {
		return fmt.Errorf("postgres: %w", &SizeError{Bytes: n, Limit: limit})
	}
	conn, err := connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := importTx(ctx, conn, ps, replace, limit); err != nil {
		return err
	}
	// Fresh statistics for the planner and a visibility map for index-only
	// scans; the catalog is already committed, so a failure here is harmless.
	_, _ = conn.Exec(ctx, "VACUUM (ANALYZE) plants, plant_readers")
	return nil
}

// catalogBytes is the size that [ImportLimited] limits, of ps alone.
func catalogBytes(ps []plants.Plant) int64 {
	var n int64
	for i := range ps {
		p := &ps[i]
		n += int64(len(p.ID) + len(p.Name) + len(p.Tag))
		for _, r := range p.Readers {
			n += int64(len(r))
		}
	}
	return n
}

// catalogBytesSQL is catalogBytes of the stored catalog.
const catalogBytesSQL = `SELECT coalesce(sum(octet_length(id) + octet_length(name) + coalesce(octet_length(tag), 0)
	+ coalesce(octet_length(array_to_string(readers, '')), 0)), 0) FROM plants`

func importTx(ctx context.Context, conn *pgx.Conn, ps []plants.Plant, replace bool, limit int64) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: %w", sanitize(err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx))

	if replace {
		// DELETE rather than TRUNCATE: TRUNCATE would lock readers out for
		// the whole import, DELETE lets them read the old catalog meanwhile.
		if _, err := tx.Exec(ctx, "DELETE FROM plant_readers"); err != nil {
			return importError(ctx, err)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM plants"); err != nil {
			return importError(ctx, err)
		}
	}
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"plants"}, []string{"id", "name", "tag", "readers"},
		pgx.CopyFromSlice(len(ps), func(i int) ([]any, error) {
			p := &ps[i]
			return []any{p.ID, p.Name, nullable(p.Tag), p.Readers}, nil
		}))
	if err != nil {
		return importError(ctx, err)
	}
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"plant_readers"}, []string{"principal", "name", "plant_id", "tag"},
		newReaderRows(ps))
	if err != nil {
		return importError(ctx, err)
	}
	if limit > 0 && !replace {
		// The plants already stored count too; replace left only ps,
		// which ImportLimited measured.
		var n int64
		if err := tx.QueryRow(ctx, catalogBytesSQL).Scan(&n); err != nil {
			return importError(ctx, err)
		}
		if n > limit {
			return fmt.Errorf("postgres: %w", &SizeError{Bytes: n, Limit: limit})
		}
	}
	var version int64
	err = tx.QueryRow(ctx, bumpVersionSQL, NotifyChannel).Scan(&version, nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return errors.New("postgres: the catalog_version table has no row (run plantstore migrate on a schema it created)")
	}
	if err != nil {
		return importError(ctx, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return importError(ctx, err)
	}
	return nil
}

// NotifyChannel is the channel of the notification an import sends when it
// commits. Its payload is "<version> <schema>": the new catalog version
// and the schema (current_schema()) of the catalog, since one database may
// hold several catalogs in as many schemas.
const NotifyChannel = "plantstore_catalog"

// bumpVersionSQL raises the catalog version, records the number of plants
// and the bytes of their ids and names, and notifies $1, returning the new
// version.
const bumpVersionSQL = `WITH v AS (
	UPDATE catalog_version SET version = version + 1, (plants, text_bytes) =
		(SELECT count(*), coalesce(sum(octet_length(id) + octet_length(name)), 0) FROM plants),
		changed = now()
	RETURNING version
)
SELECT version, pg_notify($1, version || ' ' || current_schema()) FROM v`

func importError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		// The server's "canceling statement" says less than the cause.
		return fmt.Errorf("postgres: %w", context.Cause(ctx))
	}
	if isUndefinedTable(err) {
		return errors.New("postgres: schema not migrated (run plantstore migrate first)")
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.TableName == "plants" {
		// Detail reads `Key (id)=(<id>) already exists.`: data, not SQL.
		return fmt.Errorf("postgres: %w: %s", ErrDuplicateID, pgErr.Detail)
	}
	return fmt.Errorf("postgres: %w", sanitize(err))
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// readerRows is the COPY source of plant_readers: one row per distinct
// (principal, plant), in primary key order so the index is built by
// appending rather than by random inserts.
type readerRows struct {
	ps         []plants.Plant
	principals []string
	plants     map[string][]int32 // principal -> indexes into ps, in list order
	pi, i      int
}

func newReaderRows(ps []plants.Plant) *readerRows {
	r := &readerRows{ps: ps, plants: make(map[string][]int32), pi: 0, i: -1}
	for i, p := range ps {
		for j, reader := range p.Readers {
			if slices.Contains(p.Readers[:j], reader) {
				continue
			}
			r.plants[reader] = append(r.plants[reader], int32(i))
		}
	}
	for principal := range r.plants {
		r.principals = append(r.principals, principal)
	}
	slices.Sort(r.principals)
	return r
}

func (r *readerRows) Next() bool {
	for r.pi < len(r.principals) {
		r.i++
		if r.i < len(r.plants[r.principals[r.pi]]) {
			return true
		}
		r.pi++
		r.i = -1
	}
	return false
}

func (r *readerRows) Values() ([]any, error) {
	principal := r.principals[r.pi]
	p := &r.ps[r.plants[principal][r.i]]
	return []any{principal, p.Name, p.ID, nullable(p.Tag)}, nil
}

func (r *readerRows) Err() error { return nil }
