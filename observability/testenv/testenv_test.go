package testenv_test

import (
	"strings"
	"testing"

	"github.com/plantstore/plantstore/observability/testenv"
)

// TestOptional runs each kind of optional test with and without the
// variables that ask for it, and checks what ran, what was skipped, and
// the summary line that names the skipped ones.
func TestOptional(t *testing.T) {
	t.Setenv("TEST_SOAK", "")
	t.Setenv("TEST_DOCS", "")
	t.Setenv("TEST_BROWSER", "1")
	if s := testenv.Summary(); s != "" {
		t.Fatalf("Summary() before any skip = %q; want nothing", s)
	}
	tests := []struct {
		name     string
		gate     func(testing.TB)
		soak     string // TEST_SOAK for this row
		wantSkip bool
	}{
		{"soak, not asked for", testenv.Soak, "", true},
		{"docs, not asked for", testenv.Docs, "", true},
		{"docs, not asked for, twice", testenv.Docs, "", true},
		{"browser, asked for by TEST_BROWSER", testenv.Browser, "", false},
		{"soak, asked for", testenv.Soak, "1", false},
		{"docs, asked for by TEST_SOAK", testenv.Docs, "1", false},
		{"a tool missing", func(t testing.TB) { testenv.Skip(t, "no chromium: apt-get install chromium") }, "1", true},
	}
	for _, tt := range tests {
		t.Setenv("TEST_SOAK", tt.soak)
		skipped := false
		t.Run(tt.name, func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			tt.gate(t)
		})
		if skipped != tt.wantSkip {
			t.Errorf("%s: skipped %v; want %v", tt.name, skipped, tt.wantSkip)
		}
	}
	s := testenv.Summary()
	for _, want := range []string{
		"github.com/plantstore/plantstore/observability/testenv: 4 tests skipped: ",
		"a soak or load test (TEST_SOAK=1 runs it: minutes)",
		"2 docs tests (TEST_DOCS=1 runs them: every command of README.md and docs/",
		"1 for no chromium: apt-get install chromium",
		"; TEST_SOAK=1 runs every kind, go test -v names each test",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("Summary() = %q; want it to hold %q", s, want)
		}
	}
	if strings.Contains(s, "browser") {
		t.Errorf("Summary() = %q names the browser test, which ran", s)
	}
}
