package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/edge"
	"github.com/plantstore/plantstore/plants/api"
)

// errHelp is returned when -h printed a command's flags.
var errHelp = flag.ErrHelp

// envPrefix starts the name of every variable a setting reads.
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

// unknownVars returns the PLANTSTORE_* variables of e that are the
// variable of no row of t and are not Kubernetes service links, in the
// order of the environment.
func (t settingRows) unknownVars(e env) []string {
	known := map[string]bool{}
	for _, s := range t {
		known[envName(s.flag)] = !s.noEnv
	}
	var out []string
	for _, name := range e.names {
		if strings.HasPrefix(name, envPrefix) && !known[name] && !serviceLinkVar.MatchString(name) {
			out = append(out, name)
		}
	}
	return out
}

// nearVars returns, for the unknown variables names, "NAME: KNOWN" for
// each that is close to the variable of a row of t: a misspelt setting,
// which would otherwise be ignored with no other sign.
func (t settingRows) nearVars(names []string) []string {
	var out []string
	for _, name := range names {
		best, bestDist := "", 0
		for _, s := range t {
			if s.noEnv {
				continue
			}
			known := envName(s.flag)
			if d := editDistance(name, known); d <= max(1, len(known)/8) && (best == "" || d < bestDist) {
				best, bestDist = known, d
			}
		}
		if best != "" {
			out = append(out, name+": "+best)
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

// parseFlags parses args into fs, flags before or after the positional
// arguments, which it returns; then it fills every flag of a row of rows
// that args did not set from its PLANTSTORE_* variable (the flag wins).
// The command's other flags read args only. Errors wrap errUsage, fit on
// one line and name the variable when the value came from one; -h prints
// the flags and returns errHelp.
func parseFlags(fs *flag.FlagSet, args []string, e env, rows settingRows, stderr io.Writer) (parsedFlags, []string, error) {
	p := parsedFlags{fromArgs: map[string]bool{}, fromEnv: map[string]bool{}}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printFlags(stderr, fs, rows)
				return p, nil, errHelp
			}
			return p, nil, usagef("%s: %v%s", fs.Name(), err, nearFlag(fs, err))
		}
		fs.Visit(func(f *flag.Flag) { p.fromArgs[f.Name] = true })
		if fs.NArg() == 0 {
			break
		}
		rest, args = append(rest, fs.Arg(0)), fs.Args()[1:]
	}
	for _, s := range rows {
		v, ok := e.vars[envName(s.flag)]
		if s.noEnv || p.fromArgs[s.flag] || !ok || v == "" || fs.Lookup(s.flag) == nil {
			continue
		}
		if err := fs.Set(s.flag, v); err != nil {
			return p, nil, usagef("%s: invalid value %q for %s: %v", fs.Name(), v, envName(s.flag), err)
		}
		p.fromEnv[s.flag] = true
	}
	return p, rest, nil
}

// nearFlag returns, for err, the flag package's refusal of an unknown
// flag, the advice to append: the defined flag nearest to the one given,
// if one is close, and where the flags are listed.
func nearFlag(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return ""
	}
	best, bestDist := "", 0
	fs.VisitAll(func(f *flag.Flag) {
		// Close: a few edits, fewer than a third of the name; or the
		// name given is the start of the flag's.
		d := editDistance(name, f.Name)
		if strings.HasPrefix(f.Name, name) && len(name) >= 3 {
			d = min(d, 1)
		}
		if d <= max(1, len(f.Name)/3) && (best == "" || d < bestDist) {
			best, bestDist = f.Name, d
		}
	})
	help := fmt.Sprintf("plantstore %s -h lists the flags", fs.Name())
	if best != "" {
		return fmt.Sprintf("; did you mean -%s? (%s)", best, help)
	}
	return " (" + help + ")"
}

// editDistance returns the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// typed is a flag value that names its type for -h.
type typed interface{ Type() string }

// helpWidth is the width -h wraps its lines to: a terminal's 80 columns.
const helpWidth = 80

// printFlags writes the usage of fs: each flag with the type of its value,
// its help wrapped to helpWidth, its default and, for a row of rows, the
// variable it also reads. The command's own flags come first, by name;
// then the flags of rows, under the titles of their groups, in the
// groups' order.
func printFlags(w io.Writer, fs *flag.FlagSet, rows settingRows) {
	var own []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if rows.row(f.Name) == nil {
			own = append(own, f)
		}
	})
	fmt.Fprintf(w, "usage: plantstore %s", fs.Name())
	if len(own) > 0 || len(rows) > 0 {
		fmt.Fprint(w, " [flags]")
	}
	fmt.Fprintf(w, "%s\n", positional[fs.Name()])
	if len(own) > 0 {
		fmt.Fprint(w, "\nflags:\n")
		for _, f := range own {
			printFlag(w, f, nil)
		}
	}
	for _, g := range settingGroups {
		title := false
		for i := range rows {
			f := fs.Lookup(rows[i].flag)
			if rows[i].group != g || f == nil {
				continue
			}
			if !title {
				fmt.Fprintf(w, "\n%s:\n", g)
				title = true
			}
			printFlag(w, f, &rows[i])
		}
	}
}

// printFlag writes one flag of -h: "  -name type", then its help, default
// and variable, indented by eight spaces and wrapped to helpWidth; a
// default or a variable is never cut in two.
func printFlag(w io.Writer, f *flag.Flag, row *settingRow) {
	name, help := flag.UnquoteUsage(f)
	if t, ok := f.Value.(typed); ok {
		name = t.Type()
	}
	line := "  -" + f.Name
	if name != "" {
		line += " " + name
	}
	fmt.Fprintln(w, line)
	words := strings.Fields(help)
	var notes []string
	if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
		notes = append(notes, "default "+strconv.Quote(f.DefValue))
	}
	if row != nil && !row.noEnv {
		notes = append(notes, "env "+envName(f.Name))
	}
	for i, n := range notes {
		if i == 0 {
			n = "(" + n
		}
		if i == len(notes)-1 {
			n += ")"
		} else {
			n += ";"
		}
		words = append(words, n)
	}
	for _, l := range wrap(words, helpWidth-8) {
		fmt.Fprintf(w, "        %s\n", l)
	}
}

// wrap joins words into lines of at most width bytes. A word wider than
// width (a comma list) is broken after a comma, its pieces joined again
// without a space where they share a line; one without a comma that fits
// nowhere stands on a line of its own.
func wrap(words []string, width int) []string {
	var lines []string
	var b strings.Builder
	for _, word := range words {
		for i, piece := range splitAfterCommas(word, width) {
			sep := 1
			if i > 0 {
				sep = 0 // the rest of a word broken at a comma
			}
			if b.Len() > 0 && b.Len()+sep+len(piece) > width {
				lines = append(lines, b.String())
				b.Reset()
			}
			if b.Len() > 0 && sep == 1 {
				b.WriteByte(' ')
			}
			b.WriteString(piece)
		}
	}
	if b.Len() > 0 {
		lines = append(lines, b.String())
	}
	return lines
}

// splitAfterCommas returns word whole when it fits in width, else its
// pieces, each up to and including a comma but the last.
func splitAfterCommas(word string, width int) []string {
	if len(word) <= width || !strings.Contains(word, ",") {
		return []string{word}
	}
	return strings.SplitAfter(word, ",")
}

// positional is the synopsis of each command's arguments after its flags.
var positional = map[string]string{"import": " FILE"}

// textFlag is a string flag.
type textFlag struct{ s *string }

func (f textFlag) String() string {
	if f.s == nil {
		return ""
	}
	return *f.s
}

func (f textFlag) Set(s string) error { *f.s = s; return nil }
func (textFlag) Type() string         { return "string" }

// boolFlag is a flag that is on when given without a value.
type boolFlag struct{ b *bool }

func (f boolFlag) String() string {
	if f.b == nil {
		return "false"
	}
	return strconv.FormatBool(*f.b)
}

func (f boolFlag) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	*f.b = b
	return nil
}

func (boolFlag) IsBoolFlag() bool { return true }
func (boolFlag) Type() string     { return "" }

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

func (listFlag) Type() string { return "list" }

// claimsFlag is a list of claim rules written as JSON, read by
// auth.ParseClaimRules; an empty value is no rule.
type claimsFlag struct{ rules *[]auth.ClaimRule }

func (f claimsFlag) String() string {
	if f.rules == nil || *f.rules == nil {
		return ""
	}
	b, err := json.Marshal(*f.rules)
	if err != nil {
		return ""
	}
	return string(b)
}

func (f claimsFlag) Set(s string) error {
	rules, err := auth.ParseClaimRules(s)
	if err != nil {
		return err
	}
	*f.rules = rules
	return nil
}

func (claimsFlag) Type() string { return "json" }

// corsFlag is the comma list of -cors-origins, checked by api.NewCORS; an
// empty value turns CORS off.
type corsFlag struct{ p **api.CORS }

func (f corsFlag) String() string {
	if f.p == nil {
		return ""
	}
	return (*f.p).String()
}

func (f corsFlag) Set(s string) error {
	var origins []string
	if err := (listFlag{items: &origins, orNone: true}).Set(s); err != nil {
		return err
	}
	if len(origins) == 0 {
		*f.p = nil
		return nil
	}
	p, err := api.NewCORS(origins)
	if err != nil {
		return err
	}
	*f.p = p
	return nil
}

func (corsFlag) Type() string { return "origins" }

// durationFlag is a time.Duration flag whose error says what a duration
// looks like; with nonNegative, a negative one is refused, and with
// positive, zero too.
type durationFlag struct {
	d                     *time.Duration
	nonNegative, positive bool
}

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
	if f.nonNegative && d < 0 {
		return errors.New("must not be negative")
	}
	if f.positive && d <= 0 {
		return errors.New("must be positive")
	}
	*f.d = d
	return nil
}

func (durationFlag) Type() string { return "duration" }

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

func (sizeFlag) Type() string { return "size" }

// intFlag is a whole-number flag of any integer type whose error says
// what it wants; with min set, a smaller number is refused.
type intFlag[T int | int32] struct {
	v   *T
	min T
}

func (f intFlag[T]) String() string {
	if f.v == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*f.v), 10)
}

func (f intFlag[T]) Set(s string) error {
	var zero T
	bits := 64
	if _, is32 := any(zero).(int32); is32 {
		bits = 32
	}
	n, err := strconv.ParseInt(s, 10, bits)
	if err != nil || int64(T(n)) != n {
		return errors.New("want a whole number")
	}
	if f.min != 0 && T(n) < f.min {
		return fmt.Errorf("must be at least %d", f.min)
	}
	*f.v = T(n)
	return nil
}

func (intFlag[T]) Type() string { return "int" }

// numberFlag is a float64 flag; want says what it takes, for its error:
// "a number of requests a second, such as 10 or 0.5".
type numberFlag struct {
	v    *float64
	want string
}

func (f numberFlag) String() string {
	if f.v == nil {
		return "0"
	}
	return strconv.FormatFloat(*f.v, 'g', -1, 64)
}

func (f numberFlag) Set(s string) error {
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
		return errors.New("want " + f.want)
	}
	*f.v = n
	return nil
}

func (numberFlag) Type() string { return "number" }

// addrFlag is a listen address: host:port, a port from 0 to 65535 and a
// host that is empty, an IP address or a name.
type addrFlag struct{ s *string }

func (f addrFlag) String() string { return textFlag(f).String() }

func (f addrFlag) Set(s string) error {
	if err := checkListenAddr(s); err != nil {
		return err
	}
	*f.s = s
	return nil
}

func (addrFlag) Type() string { return "host:port" }

// prefixesFlag is a comma list of CIDR prefixes or addresses, read by
// edge.ParseTrustedProxies.
type prefixesFlag struct{ p *[]netip.Prefix }

func (f prefixesFlag) String() string {
	if f.p == nil {
		return ""
	}
	s := make([]string, len(*f.p))
	for i, p := range *f.p {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

func (f prefixesFlag) Set(s string) error {
	p, err := edge.ParseTrustedProxies(s)
	if err != nil {
		return err
	}
	*f.p = p
	return nil
}

func (prefixesFlag) Type() string { return "prefixes" }

// modeFlag is a binding mode flag (DPoP or mTLS): off, optional or
// required.
type modeFlag struct{ m *auth.BindingMode }

func (f modeFlag) String() string {
	if f.m == nil {
		return auth.BindingOptional.String()
	}
	return f.m.String()
}

func (f modeFlag) Set(s string) error {
	m, err := auth.ParseBindingMode(s)
	if err != nil {
		return errors.New("want off, optional or required")
	}
	*f.m = m
	return nil
}

func (modeFlag) Type() string { return "mode" }

// tokensFlag is which tokens an issuer introspects: off, opaque or always.
type tokensFlag struct{ m *auth.IntrospectionTokens }

func (f tokensFlag) String() string {
	if f.m == nil {
		return auth.IntrospectNone.String()
	}
	return f.m.String()
}

func (f tokensFlag) Set(s string) error {
	m, err := auth.ParseIntrospectionTokens(s)
	if err != nil {
		return errors.New("want off, opaque or always")
	}
	*f.m = m
	return nil
}

func (tokensFlag) Type() string { return "tokens" }
