package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/revoke"
	"github.com/plantstore/plantstore/plants/postgres"
)

// revokeCommand implements "plantstore revoke": it adds one revocation to
// the file of -revocations-file, which every replica that watches it
// applies, and prints what it revoked; with -dry-run it prints what it
// would revoke and writes nothing; with -list it prints the revocations
// the file holds.
func revokeCommand(ctx context.Context, args []string, e env, stdout, stderr io.Writer) error {
	var (
		entry         revoke.Entry
		before, until string
		list, dryRun  bool
		fs            = flag.NewFlagSet("revoke", flag.ContinueOnError)
		cfg           serveConfig
		rows          = settingRows{*serveSettings().row("revocations-file"), *serveSettings().row("database-url")}
	)
	fs.StringVar(&entry.Issuer, "issuer", "", "the configured name of the issuer whose tokens are revoked (default: the unnamed issuer of the -jwt-* flags)")
	fs.StringVar(&entry.Sub, "sub", "", "revoke the tokens of this subject (sub)")
	fs.StringVar(&entry.Client, "client", "", "revoke the tokens issued to this client (client_id, or azp without it)")
	fs.BoolVar(&entry.All, "all", false, "revoke every token of the issuer (a compromised signing key)")
	fs.StringVar(&entry.JTI, "jti", "", "revoke the one token with this jti; needs -until")
	fs.StringVar(&until, "until", "", "RFC 3339 time: the exp of the token of -jti")
	fs.StringVar(&before, "before", "now", "RFC 3339 time: the tokens of -sub, -client or -all issued before it (in its second or earlier) are refused")
	fs.BoolVar(&list, "list", false, "print the revocations the file holds, and change nothing")
	fs.BoolVar(&dryRun, "dry-run", false, "print what would be revoked, and write nothing")
	rows.define(fs, &cfg)
	set, rest, err := parseFlags(fs, args, e, rows, stderr)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("revoke: unexpected argument %q", rest[0])
	}
	if cfg.DatabaseURL != "" && cfg.RevocationsFile != "" {
		return usagef("revoke: -database-url and -revocations-file are two stores; give the one the replicas read")
	}
	st, err := openRevocationStore(cfg)
	if err != nil {
		return err
	}
	entries, err := st.list(ctx)
	if err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	if list {
		return listRevocations(st.name, entries, set, stdout)
	}
	if entry, err = completeEntry(entry, before, until, set.fromArgs["before"]); err != nil {
		return err
	}
	if dryRun {
		fmt.Fprintf(stdout, "would revoke %s; %s not written (-dry-run)\n", entry, st.name)
		return nil
	}
	added, err := st.add(ctx, entries, entry)
	if err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	if !added {
		fmt.Fprintf(stdout, "already revoked: %s; %s unchanged\n", entry, st.name)
		return nil
	}
	fmt.Fprintf(stdout, "revoked %s; %s holds %s\n", entry, st.name, plural(int64(len(entries)+1), "revocation"))
	return nil
}

// revocationStore is where plantstore revoke reads and adds revocations:
// the database of -database-url, or the file of -revocations-file.
type revocationStore struct {
	name string // for what revoke prints: the file, or "the database"
	list func(context.Context) ([]revoke.Entry, error)
	// add adds e to entries, the store's, and reports whether it was not
	// there yet.
	add func(ctx context.Context, entries []revoke.Entry, e revoke.Entry) (bool, error)
}

// openRevocationStore returns the store the settings of cfg name.
func openRevocationStore(cfg serveConfig) (revocationStore, error) {
	if dsn := cfg.DatabaseURL; dsn != "" {
		if err := postgres.CheckDSN(dsn); err != nil {
			return revocationStore{}, usagef("revoke: invalid value for flag -database-url: %v", err)
		}
		return revocationStore{
			name: "the database",
			list: func(ctx context.Context) ([]revoke.Entry, error) {
				rows, err := postgres.ListRevocations(ctx, dsn)
				entries := make([]revoke.Entry, len(rows))
				for i, r := range rows {
					entries[i] = revoke.Entry(r)
				}
				return entries, err
			},
			add: func(ctx context.Context, _ []revoke.Entry, e revoke.Entry) (bool, error) {
				return postgres.AddRevocation(ctx, dsn, postgres.Revocation(e))
			},
		}, nil
	}
	path := cfg.RevocationsFile
	if path == "" {
		return revocationStore{}, usagef("revoke: -revocations-file or -database-url (or PLANTSTORE_REVOCATIONS_FILE, PLANTSTORE_DATABASE_URL) is required: the store the replicas read")
	}
	return revocationStore{
		name: path,
		list: func(context.Context) ([]revoke.Entry, error) { return revoke.ReadFile(path) },
		add: func(_ context.Context, entries []revoke.Entry, e revoke.Entry) (bool, error) {
			for _, have := range entries {
				if have.Issuer == e.Issuer && have.Sub == e.Sub && have.Client == e.Client && have.All == e.All && have.JTI == e.JTI && have.Before.Equal(e.Before) && have.Until.Equal(e.Until) {
					return false, nil
				}
			}
			return true, revoke.WriteFile(path, append(entries, e))
		},
	}, nil
}

// flagWords is the usage error of an entry the flags made: which flags
// it needs.
func flagWords(err error, e revoke.Entry) string {
	if e.Kind() == "" {
		return "give exactly one of -sub, -client, -all and -jti"
	}
	return err.Error()
}

// listRevocations prints the revocations of the file at path: -list, which
// takes no other flag of revoke.
func listRevocations(path string, entries []revoke.Entry, set parsedFlags, stdout io.Writer) error {
	for _, f := range []string{"issuer", "sub", "client", "all", "jti", "until", "before", "dry-run"} {
		if set.fromArgs[f] {
			return usagef("revoke: -list prints the revocations; it takes no -%s", f)
		}
	}
	if len(entries) == 0 {
		fmt.Fprintf(stdout, "%s holds no revocations\n", path)
	}
	for _, r := range entries {
		fmt.Fprintln(stdout, r)
	}
	return nil
}

// completeEntry returns the revocation the flags of revoke name: e with
// the times of -before ("now" by default; beforeSet when given) or -until
// read, and checked.
func completeEntry(e revoke.Entry, before, until string, beforeSet bool) (revoke.Entry, error) {
	var err error
	if e.Issuer != "" && auth.CheckIssuerName(e.Issuer) != nil {
		return e, usagef("revoke: invalid value %q for flag -issuer: want the configured name of an issuer (1 to 32 of a-z, 0-9 and -, not default or unknown); omit it for the issuer of the -jwt-* flags", e.Issuer)
	}
	if e.JTI != "" {
		if beforeSet {
			return e, usagef("revoke: -jti revokes one token until its exp (-until); -before is for -sub, -client and -all")
		}
		if e.Until, err = time.Parse(time.RFC3339, until); err != nil {
			return e, usagef("revoke: -jti needs -until, the token's exp as an RFC 3339 time such as 2026-11-28T22:00:00Z")
		}
	} else {
		if until != "" {
			return e, usagef("revoke: -until is the exp of the token of -jti")
		}
		e.Before = time.Now().UTC().Truncate(time.Second)
		if before != "now" {
			if e.Before, err = time.Parse(time.RFC3339, before); err != nil {
				return e, usagef("revoke: invalid value %q for flag -before: want an RFC 3339 time such as 2026-11-28T10:00:00Z", before)
			}
		}
	}
	if err := e.Check(); err != nil {
		return e, usagef("revoke: %s", flagWords(err, e))
	}
	return e, nil
}
