// Package testenv decides whether the tests that "go test ./..." leaves
// out run, and says which it left out. The soak and load tests, the docs
// test and the browser test take minutes or a browser: each runs only
// when its variable asks for it, and TEST_SOAK=1 (which .ci/run sets)
// runs them all. A test package whose TestMain goes through [Main] ends a
// run that skipped some with one line naming how many, of which kind, and
// what runs them, on the terminal the tests were started from: "go test"
// shows a passing package's output only with -v.
package testenv

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
)

// A kind is a kind of test that runs only when asked for.
type kind struct {
	name, names string // what one test is, and several: "soak or load test"
	env         string // the variable that runs this kind alone; "" for TEST_SOAK only
	what        string // what the reader should know before running them
}

// The kinds of optional tests, in the order the summary names them.
var (
	soakKind    = kind{name: "soak or load test", names: "soak and load tests", what: "minutes"}
	docsKind    = kind{name: "docs test", names: "docs tests", env: "TEST_DOCS", what: "every command of README.md and docs/, in a copy of the repository: minutes"}
	browserKind = kind{name: "browser test", names: "browser tests", env: "TEST_BROWSER", what: "drives Chromium"}
)

// Soak skips t unless TEST_SOAK=1: a soak, load or long end-to-end test.
func Soak(t testing.TB) {
	t.Helper()
	optional(t, soakKind)
}

// Docs skips t unless TEST_DOCS=1 or TEST_SOAK=1: the test that runs the
// commands of the documentation.
func Docs(t testing.TB) {
	t.Helper()
	optional(t, docsKind)
}

// Browser skips t unless TEST_BROWSER=1 or TEST_SOAK=1: a test that
// drives a browser.
func Browser(t testing.TB) {
	t.Helper()
	optional(t, browserKind)
}

// Skip skips t for a reason other than not being asked for (a tool that
// is missing: "no chromium: apt-get install chromium"), and counts it
// under that reason.
func Skip(t testing.TB, reason string) {
	t.Helper()
	record(reason)
	t.Skip(reason)
}

func optional(t testing.TB, k kind) {
	t.Helper()
	if os.Getenv("TEST_SOAK") == "1" || k.env != "" && os.Getenv(k.env) == "1" {
		return
	}
	how := "set TEST_SOAK=1 to run it"
	if k.env != "" {
		how = "set " + k.env + "=1 (or TEST_SOAK=1) to run it"
	}
	record(k.name)
	t.Skipf("a %s (%s): %s", k.name, k.what, how)
}

var skips struct {
	sync.Mutex
	by    map[string]int // tests skipped, by kind name or reason
	order []string       // the reasons in the order first seen
}

func record(reason string) {
	skips.Lock()
	defer skips.Unlock()
	if skips.by == nil {
		skips.by = map[string]int{}
	}
	if skips.by[reason] == 0 {
		skips.order = append(skips.order, reason)
	}
	skips.by[reason]++
}

// Summary returns the line [Main] prints: the package, how many tests
// were skipped, of which kind and what runs them; "" when none was.
func Summary() string {
	skips.Lock()
	defer skips.Unlock()
	total, kinds := 0, 0
	var parts []string
	for _, k := range []kind{soakKind, docsKind, browserKind} {
		n := skips.by[k.name]
		if n == 0 {
			continue
		}
		total, kinds = total+n, kinds+1
		env := "TEST_SOAK"
		if k.env != "" {
			env = k.env
		}
		what := fmt.Sprintf("%d %s (%s=1 runs them: %s)", n, k.names, env, k.what)
		if n == 1 {
			what = fmt.Sprintf("a %s (%s=1 runs it: %s)", k.name, env, k.what)
		}
		parts = append(parts, what)
	}
	for _, reason := range skips.order {
		if !slices.Contains([]string{soakKind.name, docsKind.name, browserKind.name}, reason) {
			total += skips.by[reason]
			parts = append(parts, fmt.Sprintf("%d for %s", skips.by[reason], reason))
		}
	}
	if total == 0 {
		return ""
	}
	tests, them := "tests", "them"
	if total == 1 {
		tests, them = "test", "it"
	}
	end := "; go test -v names " + them
	if kinds > 1 {
		end = "; TEST_SOAK=1 runs every kind, go test -v names each test"
	}
	return fmt.Sprintf("%s: %d %s skipped: %s%s", pkg(), total, tests, strings.Join(parts, ", "), end)
}

// pkg returns the import path of the package under test.
func pkg() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return strings.TrimSuffix(bi.Path, ".test")
	}
	return "this package"
}

// Main runs the tests of m, as a TestMain does, then prints [Summary]
// when some were skipped, and returns the exit status for os.Exit.
func Main(m *testing.M) int {
	code := m.Run()
	Print(Summary())
	return code
}

// Print writes each line that is not "" where a passing test run's
// reader sees it: the output, with -v; without, the terminal the tests
// were started from, when there is one.
func Print(lines ...string) {
	var w io.Writer = os.Stdout
	if !testing.Verbose() {
		if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
			defer tty.Close()
			w = tty
		}
	}
	for _, l := range lines {
		if l != "" {
			fmt.Fprintln(w, l)
		}
	}
}
