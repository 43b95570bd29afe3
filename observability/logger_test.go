package observability_test

import (
	"strings"
	"testing"
	"time"

	"github.com/plantstore/plantstore/observability"
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
			log, err := observability.NewLogger(tt.level, tt.format, &syncBuffer{})
			if tt.wantErr == "" {
				if err != nil || log == nil {
					t.Fatalf("NewLogger(%q, %q) = %v, %v; want a logger, nil", tt.level, tt.format, log, err)
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
	log, buf := newLogger(t, "info")
	log.Debug("hidden")
	log.Info("shown")
	log.Error("failed")

	lines := buf.lines(t)
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
	buf := &syncBuffer{}
	log, err := observability.NewLogger("debug", "console", buf)
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

// TestNewLoggerOnBatchWriter: on a BatchWriter, lines other than the access
// lines Middleware writes go out before the call that logs them returns,
// after what was batched.
func TestNewLoggerOnBatchWriter(t *testing.T) {
	out := &syncBuffer{}
	bw := observability.NewBatchWriter(out)
	defer bw.Close()
	log, err := observability.NewLogger("info", "json", bw)
	if err != nil {
		t.Fatal(err)
	}
	bw.Write([]byte("{\"msg\":\"request\"}\n"))
	bw.Write([]byte("{\"msg\":\"request\"}\n")) // close behind: batched
	log.Info("jwks keys updated")
	lines := out.lines(t)
	if len(lines) != 3 || lines[2]["msg"] != "jwks keys updated" {
		t.Fatalf("right after logging, the output holds %v; want two access lines, then the new line", lines)
	}
}
