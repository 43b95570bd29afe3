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
	rows := settings{*serveSettings().row("database-url")}
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
// exactly as serve does, then loads it in one transaction.
func importCatalog(ctx context.Context, args []string, e env, stdout, stderr io.Writer) error {
	var replace bool
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.BoolVar(&replace, "replace", false, "replace the whole catalog instead of adding to it")
	maxBytes := int64(postgres.DefaultMaxCatalogBytes)
	fs.Var(sizeFlag{&maxBytes}, "max-catalog-bytes", "refuse an import that leaves the catalog with more bytes of text (ids, names, tags, readers) than this, which every replica holds in memory; 0 for no limit")
	dsn, rest, err := databaseFlags(fs, args, e, stderr)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("import: want exactly one catalog FILE, got %d arguments", len(rest))
	}
	catalog, err := plants.LoadCatalogFile(rest[0])
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	if err := postgres.ImportLimited(ctx, dsn, catalog, replace, maxBytes); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	fmt.Fprintf(stdout, "imported %d plants\n", catalog.Len())
	return nil
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
