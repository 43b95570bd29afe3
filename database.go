package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
)

// errPending is what "migrate -status" returns when migrations wait.
var errPending = errors.New("migrations pending")

// databaseFlags parses the flags of migrate and import: -database-url (or
// PLANTSTORE_DATABASE_URL) plus those already on fs, and returns the
// positional arguments. Flags may come before or after them.
func databaseFlags(fs *flag.FlagSet, dsn *string, args []string, e env, stderr io.Writer) ([]string, error) {
	var noEnv []string
	fs.VisitAll(func(f *flag.Flag) { noEnv = append(noEnv, f.Name) })
	fs.StringVar(dsn, "database-url", "", "PostgreSQL DSN (required)")
	var positional []string
	for {
		if _, err := parseFlags(fs, args, &e, stderr, noEnv...); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if *dsn == "" {
		return nil, usagef("%s: -database-url (or PLANTSTORE_DATABASE_URL) is required", fs.Name())
	}
	if err := postgres.CheckDSN(*dsn); err != nil {
		return nil, usagef("%s: invalid value for flag -database-url: %v", fs.Name(), err)
	}
	return positional, nil
}

// migrate implements "plantstore migrate": it applies the embedded schema
// migrations and says which, or, with -status, shows the schema's state
// and exits 1 when migrations are pending. Running it again, or from two
// replicas at once, is safe.
func migrate(ctx context.Context, args []string, e env, stdout, stderr io.Writer) error {
	var dsn string
	var status bool
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.BoolVar(&status, "status", false, "show the applied and the embedded schema versions; exit 1 when migrations are pending")
	rest, err := databaseFlags(fs, &dsn, args, e, stderr)
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
	var dsn string
	var replace bool
	var maxBytes int64
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.BoolVar(&replace, "replace", false, "replace the whole catalog instead of adding to it")
	fs.Int64Var(&maxBytes, "max-catalog-bytes", postgres.DefaultMaxCatalogBytes, "refuse an import that leaves the catalog with more bytes of text (ids, names, tags, readers) than this, which every replica holds in memory; 0 for no limit")
	rest, err := databaseFlags(fs, &dsn, args, e, stderr)
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

// optionFlags names the flag each postgres.Options field comes from.
var optionFlags = map[string]string{
	"Poll": "database-poll", "MaxConns": "db-max-conns",
	"ConnectTimeout": "db-connect-timeout", "QueryTimeout": "db-query-timeout",
}

// openDatabase opens the PostgreSQL store of serve: by default a snapshot
// of the catalog served from memory, with -database-snapshot=false the
// store that reads the database on every request. Either runs a
// background loop that serve waits for.
func (s *service) openDatabase(m *plants.Metrics) error {
	o := s.cfg.DB
	o.Log = s.log.Named("catalog")
	o.Metrics = postgres.NewMetrics(s.reg)
	if s.tracing.Enabled() {
		o.TracerProvider = s.tracing.Provider()
	}
	var (
		store interface {
			plants.Store
			Done() <-chan struct{}
		}
		ready func(context.Context) error
		stop  func()
		err   error
	)
	if s.cfg.DatabaseSnapshot {
		var snap *postgres.Snapshot
		snap, err = postgres.OpenSnapshot(s.bg, s.cfg.DatabaseURL, o, m)
		if err == nil {
			store, ready, stop, s.storeName = snap, snap.Ready, snap.Close, "snapshot"
		}
	} else {
		var pg *postgres.Store
		pg, err = postgres.Open(s.bg, s.cfg.DatabaseURL, o, m)
		if err == nil {
			store, ready, stop, s.storeName = pg, pg.Ping, pg.Close, "postgres"
		}
	}
	var oe *postgres.OptionError
	switch {
	case errors.Is(err, postgres.ErrMalformedDSN):
		return usagef("serve: invalid value for -database-url: %v", err)
	case errors.As(err, &oe) && optionFlags[oe.Field] != "":
		name := optionFlags[oe.Field]
		return invalid(s.cfg.set, name, s.cfg.flags.Lookup(name).Value.String(), oe.Err)
	case err != nil:
		return fmt.Errorf("open database: %w", err)
	}
	s.store, s.storeReady, s.closeStore = store, ready, stop
	s.loops = append(s.loops, store.Done())
	return nil
}
