package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/plantstore/plantstore/plants"
)

// ErrDuplicateID reports that an imported plant's id is already in the
// database's catalog; the error is a [*DuplicateIDError] naming it.
var ErrDuplicateID = errors.New("plant id already in the catalog")

// A DuplicateIDError refuses to add a plant whose id the catalog already
// holds. It matches [ErrDuplicateID].
type DuplicateIDError struct {
	// ID is an id of the file that is stored: the first in the order of
	// the catalog.
	ID string
}

func (e *DuplicateIDError) Error() string {
	return fmt.Sprintf("plant id %q is already in the catalog", e.ID)
}

// Is reports whether target is [ErrDuplicateID].
func (e *DuplicateIDError) Is(target error) bool { return target == ErrDuplicateID }

// ErrGeneratedIDs refuses to add plants without an id to a catalog that is
// not empty, or to upsert them: their ids, generated from their position
// in the file, would clash with the plants an earlier file added, or
// update the wrong ones.
var ErrGeneratedIDs = errors.New("plants without an id")

// An ImportMode says what an import does with the plants already stored.
type ImportMode int

const (
	// Add adds the file's plants and keeps the stored ones. An id already
	// stored refuses the import ([*DuplicateIDError]), and so do plants
	// without an id when the catalog is not empty ([ErrGeneratedIDs]).
	Add ImportMode = iota
	// Upsert adds the plants whose id is not stored, updates those whose
	// id is, and keeps the others. Every plant needs an id
	// ([ErrGeneratedIDs]).
	Upsert
	// Replace swaps the whole catalog for the file's plants.
	Replace
)

// String returns add, upsert or replace.
func (m ImportMode) String() string {
	switch m {
	case Add:
		return "add"
	case Upsert:
		return "upsert"
	case Replace:
		return "replace"
	}
	return fmt.Sprintf("ImportMode(%d)", int(m))
}

// ImportOptions say how [ImportWith] imports.
type ImportOptions struct {
	Mode ImportMode
	// DryRun does the whole import, checks included, and rolls it back:
	// the result says what it would have done, and nothing changes (no
	// new version, no notification).
	DryRun bool
	// MaxBytes, when above 0, refuses an import that would leave the
	// catalog with more than that many bytes of text (the ids, names, tags
	// and readers of all its plants, about the size of its catalog file)
	// with a [*SizeError].
	MaxBytes int64
}

// ImportResult counts what an import did, or would do with DryRun. The
// plants of the file are Added, Updated (the id was stored with another
// name, tag or readers) or Unchanged; Removed counts the stored plants
// that Replace dropped.
type ImportResult struct {
	Added, Updated, Unchanged, Removed int64
}

// Import loads c into the database at dsn in one transaction, adding its
// plants to the stored ones ([Add]) or, with replace, replacing them
// ([Replace]); see [ImportWith].
func Import(ctx context.Context, dsn string, c *plants.Catalog, replace bool) error {
	mode := Add
	if replace {
		mode = Replace
	}
	_, err := ImportWith(ctx, dsn, c, ImportOptions{Mode: mode})
	return err
}

// ImportWith loads c into the database at dsn as o says, in one
// transaction: readers see the old catalog until it commits and the new
// one after, and on any error (including a cancelled ctx) nothing
// changes. Imports into one catalog run one at a time; readers are never
// held up. The schema must be migrated. The error never contains the
// DSN's password.
//
// In the same transaction ImportWith raises the catalog version and sends
// a notification on the channel replicas listen to ([NotifyChannel]),
// which PostgreSQL delivers only if the transaction commits: a
// notification always means committed data.
func ImportWith(ctx context.Context, dsn string, c *plants.Catalog, o ImportOptions) (ImportResult, error) {
	ps := c.Plants()
	if o.Mode == Upsert && c.GeneratedIDs() > 0 {
		return ImportResult{}, fmt.Errorf("postgres: %w: %s, and an upsert matches plants by id", ErrGeneratedIDs, withoutIDs(c.GeneratedIDs()))
	}
	// Every mode leaves all of the file's plants in the catalog: a file
	// over the limit is refused before it is sent.
	if n := catalogBytes(ps); o.MaxBytes > 0 && n > o.MaxBytes {
		return ImportResult{}, fmt.Errorf("postgres: %w", &SizeError{Bytes: n, Limit: o.MaxBytes})
	}
	conn, err := connect(ctx, dsn)
	if err != nil {
		return ImportResult{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	res, err := importTx(ctx, conn, c, ps, o)
	if err != nil || o.DryRun {
		return res, err
	}
	// Fresh statistics for the planner and a visibility map for index-only
	// scans; the catalog is already committed, so a failure here is harmless.
	_, _ = conn.Exec(ctx, "VACUUM (ANALYZE) plants, plant_readers")
	return res, nil
}

// A SizeError refuses an import that would leave a catalog larger than
// the limit it was given.
type SizeError struct {
	// Bytes is the catalog's size after the import, Limit the most allowed:
	// bytes of text, the ids, names, tags and readers of every plant.
	Bytes, Limit int64
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("the catalog would hold %d bytes of text, over the limit of %d: every replica holds it in memory, twice during a reload (raise the replicas' memory and -replica-memory with it, or set -max-catalog-bytes)", e.Bytes, e.Limit)
}

// catalogBytes is the size that ImportOptions.MaxBytes limits, of ps alone.
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

// importTx runs the import in one transaction, committed unless o.DryRun.
func importTx(ctx context.Context, conn *pgx.Conn, c *plants.Catalog, ps []plants.Plant, o ImportOptions) (ImportResult, error) {
	var res ImportResult
	tx, err := conn.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("postgres: %w", sanitize(err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx))

	// One import at a time: what it counts and checks stays true until it
	// commits. SHARE ROW EXCLUSIVE conflicts with itself and with writes,
	// not with the reads of listings and snapshot loads.
	var stored int64
	if _, err := tx.Exec(ctx, "LOCK TABLE plants IN SHARE ROW EXCLUSIVE MODE"); err != nil {
		return res, importError(ctx, err)
	}
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM plants").Scan(&stored); err != nil {
		return res, importError(ctx, err)
	}
	switch {
	case o.Mode == Add && stored > 0 && c.GeneratedIDs() > 0:
		return res, fmt.Errorf("postgres: %w: %s, and the catalog is not empty (%s): ids generated from positions in the file would clash with those stored", ErrGeneratedIDs, withoutIDs(c.GeneratedIDs()), plantCount(stored))
	case o.Mode == Add:
		res, err = addPlants(ctx, tx, ps)
	default:
		res, err = mergePlants(ctx, tx, ps, o.Mode, stored)
	}
	if err != nil {
		return res, err
	}
	if o.MaxBytes > 0 && o.Mode != Replace {
		// The plants already stored count too; Replace left only ps, which
		// ImportWith measured.
		var n int64
		if err := tx.QueryRow(ctx, catalogBytesSQL).Scan(&n); err != nil {
			return res, importError(ctx, err)
		}
		if n > o.MaxBytes {
			return res, fmt.Errorf("postgres: %w", &SizeError{Bytes: n, Limit: o.MaxBytes})
		}
	}
	var version int64
	err = tx.QueryRow(ctx, bumpVersionSQL, NotifyChannel).Scan(&version, nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return res, errors.New("postgres: the catalog_version table has no row (run plantstore migrate on a schema it created)")
	}
	if err != nil {
		return res, importError(ctx, err)
	}
	if o.DryRun {
		return res, nil // the deferred rollback undoes it all, notification included
	}
	if err := tx.Commit(ctx); err != nil {
		return res, importError(ctx, err)
	}
	return res, nil
}

// withoutIDs says how many plants of a file have no id.
func withoutIDs(n int) string {
	if n == 1 {
		return "1 plant of the file has none"
	}
	return fmt.Sprintf("%d plants of the file have none", n)
}

// plantCount returns "1 plant" or "N plants".
func plantCount(n int64) string {
	if n == 1 {
		return "1 plant"
	}
	return fmt.Sprintf("%d plants", n)
}

// addPlants copies ps into the catalog, which must not hold their ids.
func addPlants(ctx context.Context, tx pgx.Tx, ps []plants.Plant) (ImportResult, error) {
	if err := copyPlants(ctx, tx, "plants", ps); err != nil {
		return ImportResult{}, err
	}
	if err := copyReaders(ctx, tx, ps); err != nil {
		return ImportResult{}, err
	}
	return ImportResult{Added: int64(len(ps))}, nil
}

// importTable is the temporary table that Upsert and Replace compare the
// stored catalog with.
const importTable = "plantstore_import"

// importCountsSQL counts the plants of the import table that are stored
// (by id), and those of them stored exactly as they are.
const importCountsSQL = `SELECT count(p.id),
	count(p.id) FILTER (WHERE (p.name, p.tag, p.readers) IS NOT DISTINCT FROM (i.name, i.tag, i.readers))
FROM ` + importTable + ` i LEFT JOIN plants p ON p.id = i.id`

// changedSQL selects the plants of the import table that are new or
// differ from the stored plant of their id; a statement that uses it reads
// plants before the upsert changes them.
const changedSQL = `SELECT i.* FROM ` + importTable + ` i LEFT JOIN plants p ON p.id = i.id
	WHERE p.id IS NULL OR (p.name, p.tag, p.readers) IS DISTINCT FROM (i.name, i.tag, i.readers)`

// mergePlants upserts ps, or replaces the catalog with them, through the
// import table, counting what changes. stored is the number of plants
// stored before.
func mergePlants(ctx context.Context, tx pgx.Tx, ps []plants.Plant, mode ImportMode, stored int64) (ImportResult, error) {
	var res ImportResult
	_, err := tx.Exec(ctx, `CREATE TEMPORARY TABLE `+importTable+` (
		id text COLLATE "C", name text COLLATE "C", tag text, readers text[]) ON COMMIT DROP`)
	if err != nil {
		return res, importError(ctx, err)
	}
	if err := copyPlants(ctx, tx, importTable, ps); err != nil {
		return res, err
	}
	if _, err := tx.Exec(ctx, "ANALYZE "+importTable); err != nil {
		return res, importError(ctx, err)
	}
	var matched, unchanged int64
	if err := tx.QueryRow(ctx, importCountsSQL).Scan(&matched, &unchanged); err != nil {
		return res, importError(ctx, err)
	}
	res = ImportResult{Added: int64(len(ps)) - matched, Updated: matched - unchanged, Unchanged: unchanged}
	if mode == Replace {
		res.Removed = stored - matched
		// DELETE rather than TRUNCATE: TRUNCATE would lock readers out for
		// the whole import, DELETE lets them read the old catalog meanwhile.
		for _, q := range []string{
			"DELETE FROM plant_readers",
			"DELETE FROM plants",
			"INSERT INTO plants (id, name, tag, readers) SELECT id, name, tag, readers FROM " + importTable,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return res, importError(ctx, err)
			}
		}
		return res, copyReaders(ctx, tx, ps)
	}
	// Upsert: the index rows of the plants that change go, and come back
	// with their new name, tag and readers, in the order of the index;
	// then the plants themselves. Unchanged plants are not written.
	for _, q := range []string{
		`DELETE FROM plant_readers r USING (` + changedSQL + `) c WHERE r.plant_id = c.id`,
		`INSERT INTO plant_readers (principal, name, plant_id, tag)
			SELECT r, c.name, c.id, c.tag FROM (` + changedSQL + `) c, unnest(c.readers) r
			ORDER BY r, c.name, c.id`,
		`INSERT INTO plants (id, name, tag, readers) SELECT id, name, tag, readers FROM (` + changedSQL + `) c
			ON CONFLICT (id) DO UPDATE SET name = excluded.name, tag = excluded.tag, readers = excluded.readers`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return res, importError(ctx, err)
		}
	}
	return res, nil
}

// copyPlants copies ps into table, which has the columns of plants.
func copyPlants(ctx context.Context, tx pgx.Tx, table string, ps []plants.Plant) error {
	_, err := tx.CopyFrom(ctx, pgx.Identifier{table}, []string{"id", "name", "tag", "readers"},
		pgx.CopyFromSlice(len(ps), func(i int) ([]any, error) {
			p := &ps[i]
			return []any{p.ID, p.Name, nullable(p.Tag), p.Readers}, nil
		}))
	if err != nil {
		return importError(ctx, err)
	}
	return nil
}

// copyReaders copies the index rows of ps into plant_readers.
func copyReaders(ctx context.Context, tx pgx.Tx, ps []plants.Plant) error {
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"plant_readers"}, []string{"principal", "name", "plant_id", "tag"},
		newReaderRows(ps))
	if err != nil {
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
		id, ok := strings.CutPrefix(pgErr.Detail, "Key (id)=(")
		if id, ok2 := strings.CutSuffix(id, ") already exists."); ok && ok2 {
			return fmt.Errorf("postgres: %w", &DuplicateIDError{ID: id})
		}
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
