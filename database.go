package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/dpop"
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
)

// errPending is what "migrate -status" returns when migrations wait.
var errPending = errors.New("migrations pending")

// databaseFlags parses the flags of migrate and import: those on fs and
// the -database-url row of the table of settings, which also reads
// PLANTSTORE_DATABASE_URL. It returns the DSN and the positional
// arguments; flags may come before or after them.
func databaseFlags(fs *flag.FlagSet, args []string, e env, stderr io.Writer) (dsn string, positional []string, err error) {
	var c serveConfig
	rows := settingRows{*serveSettings().row("database-url")}
	rows.define(fs, &c)
	if _, positional, err = parseFlags(fs, args, e, rows, stderr); err != nil {
		return "", nil, err
	}
	if c.DatabaseURL == "" {
		return "", nil, usagef("%s: -database-url (or PLANTSTORE_DATABASE_URL) is required", fs.Name())
	}
	if err := postgres.CheckDSN(c.DatabaseURL); err != nil {
		return "", nil, usagef("%s: invalid value for flag -database-url: %v", fs.Name(), err)
	}
	return c.DatabaseURL, positional, nil
}

// migrate implements "plantstore migrate": it applies the embedded schema
// migrations and says which, or, with -status, shows the schema's state
// and exits 1 when migrations are pending. Running it again, or from two
// replicas at once, is safe.
func migrate(ctx context.Context, args []string, e env, stdout, stderr io.Writer) error {
	var status bool
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.BoolVar(&status, "status", false, "show the applied and the embedded schema versions; exit 1 when migrations are pending")
	dsn, rest, err := databaseFlags(fs, args, e, stderr)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("migrate: unexpected argument %q", rest[0])
	}
	if status {
		st, err := postgres.Status(ctx, dsn)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		fmt.Fprintf(stdout, "schema version %d; this binary's latest is %d\n", st.Version, st.Latest)
		if len(st.Pending) > 0 {
			fmt.Fprintf(stdout, "pending: %s\n", versions(st.Pending))
			return fmt.Errorf("migrate: %w (run plantstore migrate)", errPending)
		}
		fmt.Fprintln(stdout, "up to date")
		return nil
	}
	res, err := postgres.Migrate(ctx, dsn)
	if len(res.Applied) > 0 {
		fmt.Fprintf(stdout, "applied %s\n", versions(res.Applied))
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if len(res.Applied) == 0 {
		fmt.Fprintf(stdout, "schema version %d is up to date; nothing applied\n", res.Version)
		return nil
	}
	fmt.Fprintf(stdout, "schema version %d\n", res.Version)
	return nil
}

// versions formats schema versions as "version 1, 2 and 3".
func versions(vs []int64) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprint(v)
	}
	if len(s) == 1 {
		return "version " + s[0]
	}
	return "versions " + strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// importCatalog implements "plantstore import": it validates a catalog file
// exactly as serve does, then loads it in one transaction: it adds the
// file's plants, or with -upsert adds and updates them by id, or with
// -replace swaps the whole catalog; -dry-run says what that would change
// and changes nothing.
func importCatalog(ctx context.Context, args []string, e env, stdout, stderr io.Writer) error {
	var replace, upsert, dryRun bool
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.BoolVar(&upsert, "upsert", false, "add the file's plants and update those whose id is stored, keeping the others; every plant of the file needs an id")
	fs.BoolVar(&replace, "replace", false, "replace the whole catalog with the file's plants")
	fs.BoolVar(&dryRun, "dry-run", false, "say how many plants the import would add, update and remove, and change nothing")
	// The guard counts every bounded structure a replica holds besides the
	// catalog (postgres.Budget): by default what the base Deployment's
	// replicas hold.
	budget := postgres.Budget{Memory: postgres.DefaultMemory, TokenCache: auth.DefaultCacheBytes, ReplayCache: dpop.ReplayCacheBytes}
	maxBytes := budget.MaxCatalogBytes()
	fs.Var(sizeFlag{&maxBytes}, "max-catalog-bytes", "refuse an import that leaves the catalog with more bytes of text (ids, names, tags, readers) than this, which every replica holds in memory; by default what -replica-memory holds besides the process, the token cache (-jwt-cache-bytes) and a full DPoP replay cache, through a reload; 0 for no limit")
	fs.Var(sizeFlag{&budget.Memory}, "replica-memory", "the memory of each serving replica's Go runtime (its GOMEMLIMIT: the Deployment's memory request), which the default -max-catalog-bytes is computed from")
	fs.Var(sizeFlag{&budget.TokenCache}, "jwt-cache-bytes", "the serving replicas' -jwt-cache-bytes, which the default -max-catalog-bytes counts")
	dsn, rest, err := databaseFlags(fs, args, e, stderr)
	if err != nil {
		return err
	}
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "max-catalog-bytes" })
	if !explicit {
		if err := budget.Check(); err != nil {
			return usagef("import: -replica-memory: %v; give more, or set -max-catalog-bytes", err)
		}
		maxBytes = budget.MaxCatalogBytes()
	}
	switch {
	case len(rest) != 1:
		return usagef("import: want exactly one catalog FILE, got %d arguments", len(rest))
	case replace && upsert:
		return usagef("import: -upsert and -replace are two ways to import; choose one")
	}
	o := postgres.ImportOptions{Mode: postgres.Add, DryRun: dryRun, MaxBytes: maxBytes}
	switch {
	case upsert:
		o.Mode = postgres.Upsert
	case replace:
		o.Mode = postgres.Replace
	}
	file := rest[0]
	catalog, err := plants.LoadCatalogFile(file)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	res, err := postgres.ImportWith(ctx, dsn, catalog, o)
	if err != nil {
		return importRefused(file, o.Mode, err)
	}
	fmt.Fprintln(stdout, importSummary(catalog.Len(), res, o))
	return nil
}

// importRefused returns err, the refusal of an import of file, with what
// to do about it.
func importRefused(file string, mode postgres.ImportMode, err error) error {
	switch {
	case errors.Is(err, postgres.ErrDuplicateID):
		return fmt.Errorf("import: %s: %w; -upsert updates the stored plants of the file's ids, -replace swaps the whole catalog", file, err)
	case errors.Is(err, postgres.ErrGeneratedIDs) && mode == postgres.Upsert:
		return fmt.Errorf("import: %s: %w; give every plant an \"id\", or use -replace to swap the whole catalog", file, err)
	case errors.Is(err, postgres.ErrGeneratedIDs):
		return fmt.Errorf("import: %s: %w; give every plant an \"id\" (then -upsert adds and updates by id), or use -replace to swap the whole catalog", file, err)
	}
	return fmt.Errorf("import: %w", err)
}

// importSummary is the line import prints: what it did, or with -dry-run
// what it would do.
func importSummary(n int, r postgres.ImportResult, o postgres.ImportOptions) string {
	if o.DryRun {
		s := fmt.Sprintf("dry run: would add %s, update %s and remove %s", plural(r.Added, "plant"), plural(r.Updated, "plant"), plural(r.Removed, "plant"))
		if r.Unchanged > 0 {
			s += fmt.Sprintf(" (%s unchanged)", plural(r.Unchanged, "plant"))
		}
		return s + "; nothing changed"
	}
	s := fmt.Sprintf("imported %s", plural(int64(n), "plant"))
	if o.Mode == postgres.Add {
		return s
	}
	parts := []string{fmt.Sprintf("%d added", r.Added), fmt.Sprintf("%d updated", r.Updated), fmt.Sprintf("%d unchanged", r.Unchanged)}
	if o.Mode == postgres.Replace {
		parts = append(parts, fmt.Sprintf("%d removed", r.Removed))
	}
	return s + ": " + strings.Join(parts, ", ")
}

// plural returns "1 plant", "2 plants", "0 plants".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// openDatabase opens the PostgreSQL store of serve: by default a snapshot
// of the catalog served from memory, with -database-snapshot=false the
// store that reads the database on every request. Either runs a
// background loop that bg waits for.
func openDatabase(bg *background, cfg serveConfig, reg prometheus.Registerer, log *zap.Logger, tracing *observability.Tracing, m *plants.Metrics) (catalog, error) {
	o := cfg.DB
	o.Log = log.Named("catalog")
	o.Metrics = postgres.NewMetrics(reg)
	if tracing.Enabled() {
		o.TracerProvider = tracing.Provider()
	}
	var (
		c    catalog
		done <-chan struct{}
		err  error
	)
	c.source = "the PostgreSQL database of -database-url"
	if cfg.DatabaseSnapshot {
		var snap *postgres.Snapshot
		if snap, err = postgres.OpenSnapshot(bg.ctx, cfg.DatabaseURL, o, m); err == nil {
			c.store, c.ready, c.close, c.name, done = snap, snap.Ready, snap.Close, "snapshot", snap.Done()
		}
	} else {
		var pg *postgres.Store
		if pg, err = postgres.Open(bg.ctx, cfg.DatabaseURL, o, m); err == nil {
			c.store, c.ready, c.close, c.name, done = pg, pg.Ping, pg.Close, "postgres", pg.Done()
		}
	}
	switch {
	case errors.Is(err, postgres.ErrMalformedDSN):
		// No value is shown: a DSN that does not parse cannot be redacted.
		return c, usagef("serve: invalid value for -database-url: %v", err)
	case err != nil:
		if err := cfg.refused(err); isUsage(err) {
			return c, err
		}
		return c, fmt.Errorf("open database: %w", err)
	}
	bg.wait(done)
	return c, nil
}
