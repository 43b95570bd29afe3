package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// errHelp is returned when -h printed a command's flags.
var errHelp = flag.ErrHelp

// envPrefix starts the name of every variable a serve flag reads.
const envPrefix = "PLANTSTORE_"

// env is the process environment.
type env struct {
	vars  map[string]string
	names []string // in the order of environ
}

// newEnv returns the env of environ, "NAME=value" strings; a later entry
// for a name wins, as in a shell.
func newEnv(environ []string) env {
	e := env{vars: make(map[string]string, len(environ))}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		if _, seen := e.vars[name]; !seen {
			e.names = append(e.names, name)
		}
		e.vars[name] = value
	}
	return e
}

// get returns the value of the variable name, "" when unset.
func (e env) get(name string) string { return e.vars[name] }

// envName is the variable a flag falls back to.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// serviceLinkVar matches the variables Kubernetes injects for services
// (PLANTSTORE_SERVICE_HOST, PLANTSTORE_PORT_8080_TCP_ADDR, and those of
// services named plantstore-*): they share the prefix but are no settings.
var serviceLinkVar = regexp.MustCompile(`^PLANTSTORE(_[A-Z0-9_]+)?_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[A-Z0-9_]+)?)$`)

// unknownVars returns the PLANTSTORE_* variables of e that name no flag of
// fs (but those in noEnv, which read no variable) and are not Kubernetes
// service links, in the order of the environment.
func unknownVars(e env, fs *flag.FlagSet, noEnv ...string) []string {
	known := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { known[envName(f.Name)] = !slices.Contains(noEnv, f.Name) })
	var out []string
	for _, name := range e.names {
		if strings.HasPrefix(name, envPrefix) && !known[name] && !serviceLinkVar.MatchString(name) {
			out = append(out, name)
		}
	}
	return out
}

// parsedFlags tells how each flag of a command got its value.
type parsedFlags struct {
	fromArgs, fromEnv map[string]bool
}

// set reports whether the flag name was given, on the command line or in
// the environment.
func (p parsedFlags) set(name string) bool { return p.fromArgs[name] || p.fromEnv[name] }

// parseFlags parses args into fs, then, when e is not nil, fills every
// flag that args did not set from its PLANTSTORE_* variable (the flag
// wins), except those in noEnv. Errors wrap errUsage, fit on one line and
// name the variable when the value came from one; -h prints the flags and
// returns errHelp.
func parseFlags(fs *flag.FlagSet, args []string, e *env, stderr io.Writer, noEnv ...string) (parsedFlags, error) {
	p := parsedFlags{fromArgs: map[string]bool{}, fromEnv: map[string]bool{}}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printFlags(stderr, fs, e != nil, noEnv)
			return p, errHelp
		}
		return p, usagef("%s: %v", fs.Name(), err)
	}
	fs.Visit(func(f *flag.Flag) { p.fromArgs[f.Name] = true })
	if e == nil {
		return p, nil
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if p.fromArgs[f.Name] || slices.Contains(noEnv, f.Name) || err != nil {
			return
		}
		v, ok := e.vars[envName(f.Name)]
		if !ok || v == "" {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = usagef("%s: invalid value %q for %s: %v", fs.Name(), v, envName(f.Name), e)
			return
		}
		p.fromEnv[f.Name] = true
	})
	return p, err
}

// printFlags writes the usage of fs: each flag with its default and, when
// withEnv, the variable it also reads.
func printFlags(w io.Writer, fs *flag.FlagSet, withEnv bool, noEnv []string) {
	fmt.Fprintf(w, "usage: plantstore %s [flags]%s\n\nflags:\n", fs.Name(), positional[fs.Name()])
	fs.VisitAll(func(f *flag.Flag) {
		name, help := flag.UnquoteUsage(f)
		line := "  -" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, help)
		var notes []string
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			notes = append(notes, "default "+strconv.Quote(f.DefValue))
		}
		if withEnv && !slices.Contains(noEnv, f.Name) {
			notes = append(notes, "env "+envName(f.Name))
		}
		if len(notes) > 0 {
			fmt.Fprintf(w, " (%s)", strings.Join(notes, "; "))
		}
		fmt.Fprintln(w)
	})
}

// positional is the synopsis of each command's arguments after its flags.
var positional = map[string]string{"import": " FILE"}

// listFlag is a comma-separated list; blanks around items are dropped, and
// a blank item is an error (a list of blanks must never read as no list).
// With orNone, an empty value is the empty list.
type listFlag struct {
	items  *[]string
	orNone bool
}

func (l listFlag) String() string {
	if l.items == nil {
		return ""
	}
	return strings.Join(*l.items, ",")
}

func (l listFlag) Set(s string) error {
	var items []string
	if l.orNone && s == "" {
		*l.items = nil
		return nil
	}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return fmt.Errorf("blank item %d in the comma list", len(items)+1)
		}
		items = append(items, item)
	}
	*l.items = items
	return nil
}

// durationFlag is a time.Duration flag whose error says what a duration
// looks like.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return "0s"
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		if _, numErr := strconv.ParseFloat(s, 64); numErr == nil {
			return fmt.Errorf("missing unit: want a duration such as %ss, 5m or 1h", s)
		}
		return errors.New("want a duration such as 30s, 5m or 1h")
	}
	*f.d = d
	return nil
}

// sizeFlag is a size in bytes, given as a number of bytes or with a
// binary unit: 32MiB, 512KiB, 1GiB.
type sizeFlag struct{ n *int64 }

func (f sizeFlag) String() string {
	if f.n == nil {
		return "0"
	}
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if *f.n != 0 && *f.n%u.size == 0 {
			return strconv.FormatInt(*f.n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(*f.n, 10)
}

func (f sizeFlag) Set(s string) error {
	num, mult := s, int64(1)
	for _, u := range []struct {
		name string
		size int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}} {
		if n, ok := strings.CutSuffix(s, u.name); ok {
			num, mult = n, u.size
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return errors.New("want a size in bytes, or with a unit: 512KiB, 32MiB, 1GiB")
	}
	*f.n = n * mult
	return nil
}

// intFlag is an int flag whose error says what it wants.
type intFlag struct{ v *int }

func (f intFlag) String() string {
	if f.v == nil {
		return "0"
	}
	return strconv.Itoa(*f.v)
}

func (f intFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("want a whole number")
	}
	*f.v = n
	return nil
}
