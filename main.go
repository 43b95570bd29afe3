// Command plantstore serves the Plant Store API: GET /plants behind JWT
// verification, with metrics, health and the OpenAPI document on a separate
// admin listener. "plantstore help" lists its subcommands; docs/ says the
// rest.
//
// This package only wires: main.go dispatches; serve.go opens what the
// service runs on as a sequence of named steps (the store, the issuers
// and their verifier, the shared state), routes.go builds the API
// handler, lifecycle.go runs the servers, reloads on SIGHUP and drains;
// config.go reads the serve flags, dev.go prints the -dev banner, token.go
// mints tokens and keys, database.go runs the PostgreSQL commands, heap.go
// holds the heap ballast, and flags.go holds the flag and environment
// machinery they share.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/plantstore/plantstore/observability"
)

// version and revision are stamped at build time with
// -ldflags "-X main.version=... -X main.revision=...".
var version, revision string

// errUsage marks an error caused by how the command was called; main exits
// with status 2 for it.
var errUsage = errors.New("usage")

func main() {
	gin.SetMode(gin.ReleaseMode)
	err := run(context.Background(), os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "plantstore:", err)
	}
	os.Exit(exitStatus(err))
}

// exitStatus is the process's exit status after run returned err: 0
// after a clean stop, 2 for bad usage, 1 when the service could not run.
func exitStatus(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	return 1
}

// usageError wraps err so that it reads as itself but matches errUsage.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() []error {
	return []error{e.err, errUsage}
}

// isUsage reports whether err is a usage error (exit status 2).
func isUsage(err error) bool { return errors.Is(err, errUsage) }

func usagef(format string, a ...any) error {
	return usageError{fmt.Errorf(format, a...)}
}

const commandsHelp = `usage: plantstore [command] [flags]

commands:
  serve     run the service (the default when no command is given)
  token     mint a signed JWT from a private key file (-dpop-key: bound to a client key)
  proof     make a DPoP proof for one request, with the client key
  keygen    write a new signing key pair (PKCS#8 PEM and public JWKS)
  migrate   apply the PostgreSQL schema migrations (-status: show them)
  import    load a catalog file into PostgreSQL in one transaction
  revoke    revoke tokens before their exp: a subject, a client, a whole
            issuer, or one token (-list: show the revocations)
  version   print the version (also: plantstore --version)
  help      print this text, or with a COMMAND its flags

Run "plantstore help COMMAND" (or "plantstore COMMAND -h") for the flags
of a command; every serve flag but -dev can also be set as
PLANTSTORE_<FLAG> (upper case, "-" as "_").
`

// run is the whole program: main only adds the process environment and the
// exit status. environ is the environment as os.Environ gives it. A
// canceled ctx stops serve as SIGTERM does.
func run(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) error {
	err := dispatch(ctx, args, newEnv(environ), stdout, stderr)
	if errors.Is(err, errHelp) {
		return nil // -h printed the flags
	}
	return err
}

// dispatch runs the subcommand named by args[0], serve by default.
func dispatch(ctx context.Context, args []string, env env, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	} else if len(args) == 1 {
		switch args[0] {
		case "-h", "-help", "--help":
			cmd, args = "help", nil
		case "-version", "--version":
			cmd, args = "version", nil
		}
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, env, stdout, stderr)
	case "token":
		return mintToken(args, stdout, stderr)
	case "proof":
		return proof(args, stdout, stderr)
	case "keygen":
		return keygen(args, stdout, stderr)
	case "migrate":
		return migrate(ctx, args, env, stdout, stderr)
	case "import":
		return importCatalog(ctx, args, env, stdout, stderr)
	case "revoke":
		return revokeCommand(ctx, args, env, stdout, stderr)
	case "version":
		return printVersion(args, stdout, stderr)
	case "help":
		return help(ctx, args, env, stdout)
	}
	return usagef("unknown command %q (commands: %s)", cmd, strings.Join(commands, ", "))
}

// commands are the commands dispatch knows.
var commands = []string{"serve", "token", "proof", "keygen", "migrate", "import", "revoke", "version", "help"}

// help implements "plantstore help [COMMAND]": the list of commands, or
// the flags of one, on stdout.
func help(ctx context.Context, args []string, e env, stdout io.Writer) error {
	switch {
	case len(args) == 0, len(args) == 1 && args[0] == "help":
		fmt.Fprint(stdout, commandsHelp)
		return nil
	case len(args) > 1:
		return usagef("help takes one command, got %d arguments", len(args))
	case !slices.Contains(commands, args[0]):
		return usagef("help: unknown command %q (commands: %s)", args[0], strings.Join(commands, ", "))
	}
	return dispatch(ctx, []string{args[0], "-h"}, e, stdout, stdout)
}

// printVersion implements "plantstore version".
func printVersion(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	_, rest, err := parseFlags(fs, args, env{}, nil, stderr)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("version takes no arguments")
	}
	v, rev := buildVersion()
	fmt.Fprintf(stdout, "plantstore %s (revision %s, %s)\n", v, rev, runtime.Version())
	return nil
}

// buildVersion returns the stamped version and revision, each filled in
// from the toolchain's build information when it was not stamped (see
// observability.BuildVersion): the one fallback of the version command,
// the metrics, the log and the traces.
func buildVersion() (string, string) {
	return observability.BuildVersion(version, revision)
}
