package observability

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/zap/zapcore"
)

// perByteValid is s as a JSON decoder reads it back from AppendJSONString:
// each byte of invalid UTF-8 becomes U+FFFD.
func perByteValid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// checkLine decodes the JSON line of a and checks every field against a,
// the keys' order included.
func checkLine(t testing.TB, line []byte, a *accessEntry, lvl zapcore.Level, at time.Time) {
	t.Helper()
	if !bytes.HasSuffix(line, []byte("}\n")) || bytes.Count(line, []byte("\n")) != 1 {
		t.Fatalf("line %q is not one line ending in }\\n", line)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	var keys []string
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("line %q does not start a JSON object: %v", line, err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		keys = append(keys, k.(string))
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("line %q: value of %s: %v", line, k, err)
		}
	}
	var got map[string]any
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatalf("line %q is not JSON: %v", line, err)
	}
	want := []string{"level", "ts", "msg", "method", "route", "path", "status", "duration", "bytes", "request_id", "remote_ip", "user_agent"}
	wantValues := map[string]any{
		"level": lvl.String(), "msg": "request", "method": a.method, "route": a.route,
		"path": perByteValid(a.path), "status": float64(a.status), "bytes": float64(a.bytes),
		"request_id": a.requestID, "remote_ip": a.remoteIP, "user_agent": perByteValid(a.userAgent),
	}
	for _, f := range []struct {
		key string
		on  bool
		v   any
	}{
		{"iss", a.issuer != "", perByteValid(a.issuer)},
		{"sub", a.subject != "", perByteValid(a.subject)},
		{"auth_failure", a.authFailure != "", perByteValid(a.authFailure)},
		{"audit", a.audit != "", perByteValid(a.audit)},
		{"claim_rule", a.claimRule != "", perByteValid(a.claimRule)},
		{"plants", a.hasPlants, float64(a.plants)},
	} {
		if f.on {
			want = append(want, f.key)
			wantValues[f.key] = f.v
		}
	}
	if strings.Join(keys, ",") != strings.Join(want, ",") {
		t.Errorf("keys %v, want %v", keys, want)
	}
	for k, v := range wantValues {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v (line %q)", k, got[k], v, line)
		}
	}
	switch d := got["duration"].(type) {
	case float64:
		if d != a.duration {
			t.Errorf("duration = %v, want %v", d, a.duration)
		}
	case string:
		if want := string(appendLogFloat(nil, a.duration)); `"`+d+`"` != want {
			t.Errorf("duration = %q, want %s", d, want)
		}
	}
	ts, _ := got["ts"].(string)
	if want := at.UTC().Format(timeLayout); ts != want {
		t.Errorf("ts = %q, want %q", ts, want)
	}
}

func TestAccessLine(t *testing.T) {
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
			a.issuer, a.subject, a.authFailure = "staff", "alice", "expired"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := base
			tt.edit(&a)
			l := &AccessLog{}
			checkLine(t, l.appendLine(nil, &a, tt.lvl, tt.at), &a, tt.lvl, tt.at)
		})
	}
}

// TestAccessLineConsole: in the console format the line is laid out as
// zap's console lines, ts, level and msg tab-separated, then the fields as
// the JSON object of the json format.
func TestAccessLineConsole(t *testing.T) {
	a := accessEntry{method: "GET", route: "/plants", path: "/plants", status: 200, bytes: 2, requestID: "r", remoteIP: "127.0.0.1"}
	at := time.Date(2026, 11, 23, 9, 36, 48, 123e6, time.UTC)
	got := string((&AccessLog{console: true}).appendLine(nil, &a, zapcore.InfoLevel, at))
	jsonLine := string((&AccessLog{}).appendLine(nil, &a, zapcore.InfoLevel, at))
	fields := jsonLine[strings.Index(jsonLine, `"method"`):]
	if want := "2026-11-23T09:36:48.123Z\tinfo\trequest\t{" + fields; got != want {
		t.Errorf("console line = %q\nwant %q", got, want)
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
		checkLine(t, (&AccessLog{}).appendLine(nil, &a, zapcore.InfoLevel, at), &a, zapcore.InfoLevel, at)
	})
}

// TestAppendLogFloatSeconds checks the short path of durations under a
// second against strconv for every order of magnitude and random values,
// and that other floats still go to strconv.
func TestAppendLogFloatSeconds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fs := []float64{0, 1e-9, 0.5, 0.999999999, 1, 1.5, 12345.678, 0.1 + 0.2, 1e-10, 2.5e-7, math.Nextafter(1, 0)}
	for range 200_000 {
		n := rng.Int64N(1e9)
		if rng.IntN(2) == 0 {
			n = rng.Int64N(1e6)
		}
		fs = append(fs, time.Duration(n).Seconds(), rng.Float64())
	}
	for _, f := range fs {
		if got, want := string(appendLogFloat(nil, f)), strconv.FormatFloat(f, 'f', -1, 64); got != want {
			t.Fatalf("appendLogFloat(%v) = %s; want %s", f, got, want)
		}
	}
}
