package observability_test

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/observability/logtest"
)

func TestNewLoggerRejectsBadValues(t *testing.T) {
	tests := []struct {
		name, level, format string
		wantErr             string // "" when the values are good
	}{
		{"json info", "info", "json", ""},
		{"console debug", "debug", "console", ""},
		{"warn", "warn", "json", ""},
		{"error", "error", "json", ""},
		{"unknown level", "verbose", "json", `"verbose"`},
		{"upper case level", "INFO", "json", `"INFO"`},
		{"empty level", "", "json", `""`},
		{"unknown format", "info", "logfmt", `"logfmt"`},
		{"empty format", "info", "", `""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, access, err := observability.NewLogger(&logtest.Buffer{}, tt.level, tt.format)
			if tt.wantErr == "" {
				if err != nil || log == nil || access == nil {
					t.Fatalf("NewLogger(%q, %q) = %v, %v, %v; want a logger, an access log, nil", tt.level, tt.format, log, access, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewLogger(%q, %q) error = %v; want one naming %s", tt.level, tt.format, err, tt.wantErr)
			}
		})
	}
}

func TestNewLoggerJSONLine(t *testing.T) {
	log, _, buf := newLogger(t, "info")
	log.Debug("hidden")
	log.Info("shown")
	log.Error("failed")

	lines := buf.Lines(t)
	if len(lines) != 2 {
		t.Fatalf("got %d lines at level info, want 2 (debug dropped): %s", len(lines), buf)
	}
	want := []struct{ level, msg string }{{"info", "shown"}, {"error", "failed"}}
	for i, l := range lines {
		if len(l) != 3 {
			t.Errorf("line %d has keys %v; want exactly ts, level, msg", i, keys(l))
		}
		if l["level"] != want[i].level || l["msg"] != want[i].msg {
			t.Errorf("line %d = level %v msg %v; want %s %s", i, l["level"], l["msg"], want[i].level, want[i].msg)
		}
		ts, _ := l["ts"].(string)
		parsed, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || !strings.HasSuffix(ts, "Z") {
			t.Errorf("line %d ts = %q; want RFC 3339 in UTC (%v)", i, ts, err)
		}
		if d := time.Since(parsed); d < 0 || d > time.Hour {
			t.Errorf("line %d ts = %q, %v from now; want about now", i, ts, d)
		}
	}
}

func TestNewLoggerConsole(t *testing.T) {
	buf := &logtest.Buffer{}
	log, _, err := observability.NewLogger(buf, "debug", "console")
	if err != nil {
		t.Fatalf("NewLogger(debug, console): %v", err)
	}
	log.Debug("hello")
	got := buf.String()
	if !strings.Contains(got, "debug\thello") || strings.HasPrefix(got, "{") {
		t.Fatalf("console line = %q; want tab-separated text with debug and hello", got)
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// countingWriter counts the writes it gets.
type countingWriter struct {
	logtest.Buffer
	mu     sync.Mutex
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.writes++
	w.mu.Unlock()
	return w.Buffer.Write(p)
}

func (w *countingWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes
}

// TestLogOutputWritesAtOnceWhenIdle: a line after a quiet spell (here the
// first) reaches the output before Write returns, without Sync. It writes
// to the LogOutput directly, as access lines do: the logger's own lines
// are written through whatever the spell.
func TestLogOutputWritesAtOnceWhenIdle(t *testing.T) {
	w := &countingWriter{}
	out := observability.NewLogOutput(w)
	t.Cleanup(func() { out.Close() })
	if _, err := out.Write([]byte(`{"msg":"request"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if lines := w.Lines(t); len(lines) != 1 || lines[0]["msg"] != "request" {
		t.Fatalf("right after a write at rest, the output holds %v; want the line", lines)
	}
}

// TestLogOutputServiceLinesAtOnce: under load, when access lines wait for
// a batch, a line of the logger (an error, a key update) is written at
// once, after the access lines before it.
func TestLogOutputServiceLinesAtOnce(t *testing.T) {
	w := &countingWriter{}
	out := observability.NewLogOutput(w)
	t.Cleanup(func() { out.Close() })
	log, _, err := observability.NewLogger(out, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	// Lines close together: the later ones wait for a batch.
	for i := range 50 {
		out.Write([]byte(`{"n":` + strconv.Itoa(i) + "}\n"))
	}
	log.Error("jwks fetch failed")
	lines := w.Lines(t)
	if len(lines) != 51 || lines[50]["msg"] != "jwks fetch failed" {
		t.Fatalf("right after logging under load, the output holds %d lines, the last %v; want the 50 before and the error", len(lines), lines[len(lines)-1])
	}
}

// TestLogOutputBatchesUnderLoad: lines that come close together share
// writes, all arrive in order without a Sync, and Close writes the rest.
func TestLogOutputBatchesUnderLoad(t *testing.T) {
	w := &countingWriter{}
	out := observability.NewLogOutput(w)
	const n = 2000
	for i := range n {
		out.Write([]byte(`{"n":` + strconv.Itoa(i) + "}\n"))
	}
	w.WaitLine(t, "for the last line without a Sync", func(l map[string]any) bool { return l["n"] == float64(n-1) })
	if err := out.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	lines := w.Lines(t)
	if len(lines) != n {
		t.Fatalf("%d lines written, want %d", len(lines), n)
	}
	for i, l := range lines {
		if l["n"] != float64(i) {
			t.Fatalf("line %d is %v: out of order", i, l)
		}
	}
	if w.count() >= n/2 {
		t.Errorf("%d lines took %d writes; want them batched", n, w.count())
	}
	out.Write([]byte("{\"n\":-1}\n"))
	if lines := w.Lines(t); lines[len(lines)-1]["n"] != float64(-1) {
		t.Errorf("a line after Close did not reach the output")
	}
}
