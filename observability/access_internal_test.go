package observability

import (
	"bytes"
	"math"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// fixedClock is a zapcore.Clock stopped at one instant.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time                         { return c.t }
func (c fixedClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

// zapLine returns the line NewLogger's JSON logger writes for a at lvl and
// t through zap's own encoder.
func zapLine(t testing.TB, a *accessEntry, lvl zapcore.Level, at time.Time) []byte {
	t.Helper()
	var buf bytes.Buffer
	log, err := NewLogger("debug", "json", &buf)
	if err != nil {
		t.Fatal(err)
	}
	ce := log.WithOptions(zap.WithClock(fixedClock{at})).Check(lvl, accessMsg)
	if ce == nil {
		t.Fatalf("level %v not enabled", lvl)
	}
	ce.Write(a.fields(nil)...)
	return buf.Bytes()
}

func TestAccessLineMatchesZap(t *testing.T) {
	base := accessEntry{
		method: "GET", route: "/plants", path: "/plants", status: 200, duration: 0.000061234,
		bytes: 379, requestID: "0123456789abcdef0123456789abcdef", remoteIP: "203.0.113.7",
		userAgent: "curl/8.5.0",
	}
	at := time.Date(2026, 11, 23, 9, 36, 48, 123456789, time.UTC)
	tests := []struct {
		name string
		edit func(a *accessEntry)
		lvl  zapcore.Level
		at   time.Time
	}{
		{"plain", func(a *accessEntry) {}, zapcore.InfoLevel, at},
		{"error level", func(a *accessEntry) { a.status = 500 }, zapcore.ErrorLevel, at},
		{"all optional fields", func(a *accessEntry) {
			a.subject, a.authFailure = "alice", "expired"
			a.plants, a.hasPlants = 10, true
		}, zapcore.InfoLevel, at},
		{"zero plants are logged", func(a *accessEntry) { a.hasPlants = true }, zapcore.InfoLevel, at},
		{"empty strings", func(a *accessEntry) { a.userAgent, a.path, a.remoteIP = "", "", "" }, zapcore.InfoLevel, at},
		{"quotes and backslashes", func(a *accessEntry) { a.userAgent = `say "hi" \ bye\` }, zapcore.InfoLevel, at},
		{"control characters", func(a *accessEntry) { a.userAgent = "a\nb\rc\td\x00e\x1f\x7f\bf\fg" }, zapcore.InfoLevel, at},
		{"non-ASCII and separators", func(a *accessEntry) { a.path = "/plänts/\u2028\u2029/🌵<>&" }, zapcore.InfoLevel, at},
		{"invalid UTF-8", func(a *accessEntry) { a.userAgent = "a\xffb\xc3\x28c\xed\xa0\x80" }, zapcore.InfoLevel, at},
		{"truncated rune at the end", func(a *accessEntry) { a.subject = "x\xe2\x82" }, zapcore.InfoLevel, at},
		{"zero duration", func(a *accessEntry) { a.duration = 0 }, zapcore.InfoLevel, at},
		{"tiny duration", func(a *accessEntry) { a.duration = 1e-9 }, zapcore.InfoLevel, at},
		{"long duration", func(a *accessEntry) { a.duration = 12345.678 }, zapcore.InfoLevel, at},
		{"NaN duration", func(a *accessEntry) { a.duration = math.NaN() }, zapcore.InfoLevel, at},
		{"infinite durations", func(a *accessEntry) { a.duration = math.Inf(1); a.bytes = -1 }, zapcore.InfoLevel, at},
		{"negative infinity", func(a *accessEntry) { a.duration = math.Inf(-1) }, zapcore.InfoLevel, at},
		{"local time zone", func(a *accessEntry) {}, zapcore.InfoLevel, at.In(time.FixedZone("X", -7*3600-1800))},
		{"start of a second", func(a *accessEntry) {}, zapcore.InfoLevel, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		{"last millisecond of a year", func(a *accessEntry) {}, zapcore.InfoLevel, time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
		{"year 1", func(a *accessEntry) {}, zapcore.InfoLevel, time.Date(1, 1, 1, 0, 0, 0, 1e6, time.UTC)},
		{"five-digit year", func(a *accessEntry) {}, zapcore.InfoLevel, time.Date(12345, 6, 7, 8, 9, 10, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := base
			tt.edit(&a)
			want := zapLine(t, &a, tt.lvl, tt.at)
			got := a.appendJSON(nil, tt.lvl, tt.at)
			if !bytes.Equal(got, want) {
				t.Errorf("access line differs from zap's\n got: %s\nwant: %s", got, want)
			}
		})
	}
}

func FuzzAccessLine(f *testing.F) {
	f.Add("/plants", "curl/8.5.0", "alice", "expired", 0.000061, int64(1700000000123456789), 10)
	f.Add("/a\"b\\c", "\x00\xff\u2028", "", "", math.Inf(1), int64(-62135596800000000), -1)
	f.Fuzz(func(t *testing.T, path, ua, sub, failure string, dur float64, unixNano int64, plants int) {
		a := accessEntry{
			method: "GET", route: "unmatched", path: path, status: 404, duration: dur,
			bytes: len(path), requestID: "id", remoteIP: "127.0.0.1", userAgent: ua,
		}
		a.subject, a.authFailure = sub, failure
		a.plants, a.hasPlants = plants, plants >= 0
		at := time.Unix(0, unixNano)
		want := zapLine(t, &a, zapcore.InfoLevel, at)
		if got := a.appendJSON(nil, zapcore.InfoLevel, at); !bytes.Equal(got, want) {
			t.Fatalf("access line differs from zap's\n got: %s\nwant: %s", got, want)
		}
	})
}

func TestAccessOutputOnlyForNewLoggersJSON(t *testing.T) {
	jsonLog, err := NewLogger("info", "json", &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	consoleLog, err := NewLogger("info", "console", &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if accessOutput(jsonLog) == nil {
		t.Error("NewLogger's JSON logger: no access output; want the fast path")
	}
	for name, log := range map[string]*zap.Logger{
		"console":         consoleLog,
		"with fields":     jsonLog.With(zap.String("k", "v")),
		"increased level": jsonLog.WithOptions(zap.IncreaseLevel(zapcore.ErrorLevel)),
		"nop":             zap.NewNop(),
	} {
		if accessOutput(log) != nil {
			t.Errorf("%s: access output set; its lines would lose what zap adds", name)
		}
	}
}
