package observability_test

import (
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/plantstore/plantstore/observability"
)

// TestAccessLog checks the access line Middleware writes for each kind of
// answer.
func TestAccessLog(t *testing.T) {
	_, access, buf := newLogger(t, "debug")
	const token = "eyJhbGciOiJFZERTQSJ9.c2VjcmV0LXBheWxvYWQ.c2lnbmF0dXJl"
	e := newEngine(access, newCapture(), nil)
	e.GET("/deny", func(c *gin.Context) {
		observability.Annotate(c).SetAuthFailure("expired")
		c.Status(http.StatusUnauthorized)
	})
	e.GET("/fail", func(c *gin.Context) {
		c.Status(http.StatusServiceUnavailable)
	})
	srv := startServer(t, e)

	base := []string{"ts", "level", "msg", "method", "route", "path", "status", "duration", "bytes", "request_id", "remote_ip", "user_agent"}
	tests := []struct {
		name       string
		method     string
		target     string
		wantLevel  string
		wantRoute  string
		wantPath   string
		wantStatus float64
		wantBytes  float64
		extra      map[string]any
	}{
		{"authenticated list", "GET", "/plants?limit=2&access_token=" + token, "info", "/plants", "/plants", 200, 27, map[string]any{"sub": "alice", "plants": 2.0}},
		{"refused", "GET", "/deny?token=" + token, "info", "/deny", "/deny", 401, 0, map[string]any{"auth_failure": "expired"}},
		{"server error", "GET", "/fail", "error", "/fail", "/fail", 503, 0, nil},
		{"unknown path", "GET", "/nope/x?x=" + token, "info", "unmatched", "/nope/x", 404, 35, nil},
		{"other method", "DELETE", "/plants", "info", "unmatched", "/plants", 405, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(buf.Lines(t))
			req := newRequest(t, tt.method, srv.URL+tt.target)
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("User-Agent", "plantstore-test/1")
			resp, _ := do(t, req)

			lines := buf.Lines(t)
			if len(lines) != before+1 {
				t.Fatalf("%s %s wrote %d log lines, want 1", tt.method, tt.target, len(lines)-before)
			}
			l := lines[before]
			want := slices.Clone(base)
			for k := range tt.extra {
				want = append(want, k)
			}
			slices.Sort(want)
			got := keys(l)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s %s: keys %v, want %v", tt.method, tt.target, got, want)
			}
			checks := map[string]any{
				"level": tt.wantLevel, "msg": "request", "method": tt.method, "route": tt.wantRoute,
				"path": tt.wantPath, "status": tt.wantStatus, "bytes": tt.wantBytes,
				"request_id": resp.Header.Get("X-Request-ID"), "remote_ip": "127.0.0.1",
				"user_agent": "plantstore-test/1",
			}
			for k, v := range tt.extra {
				checks[k] = v
			}
			for k, v := range checks {
				if l[k] != v {
					t.Errorf("%s %s: %s = %#v, want %#v", tt.method, tt.target, k, l[k], v)
				}
			}
			if d, ok := l["duration"].(float64); !ok || d <= 0 || d > 60 {
				t.Errorf("%s %s: duration = %#v, want seconds as a positive number", tt.method, tt.target, l["duration"])
			}
		})
	}
	if all := buf.String(); strings.Contains(all, token) || strings.Contains(all, "Bearer") || strings.Contains(all, "?") {
		t.Errorf("log holds a token, an Authorization value or a query string:\n%s", all)
	}
}

func TestRequestID(t *testing.T) {
	e := newEngine(nil, newCapture(), nil)
	srv := startServer(t, e)
	tests := []struct {
		name string
		in   string // "" sends no header
		keep bool
	}{
		{"uuid", "3f2b8c1e-9d4a-4c7b-8e1f-2a6d5b9c0e7f", true},
		{"dots and underscores", "req_1.2-3", true},
		{"one char", "a", true},
		{"128 chars", strings.Repeat("x", 128), true},
		{"129 chars", strings.Repeat("x", 129), false},
		{"absent", "", false},
		{"spaces", "abc def", false},
		{"unicode", "ré-quest", false},
		{"slash", "a/b", false},
		{"quote", `a"b`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest(t, http.MethodGet, srv.URL+"/plants")
			if tt.in != "" {
				req.Header.Set("X-Request-ID", tt.in)
			}
			resp, _ := do(t, req)
			got := resp.Header.Values("X-Request-ID")
			if len(got) != 1 {
				t.Fatalf("X-Request-ID %q: response has %q, want one value", tt.in, got)
			}
			if tt.keep {
				if got[0] != tt.in {
					t.Errorf("X-Request-ID %q: response has %q, want it echoed", tt.in, got[0])
				}
				return
			}
			if got[0] == tt.in || len(got[0]) != 32 || strings.Trim(got[0], "0123456789abcdef") != "" {
				t.Errorf("X-Request-ID %q: response has %q, want 32 new hex digits", tt.in, got[0])
			}
		})
	}
}

func TestRequestIDsDiffer(t *testing.T) {
	e := newEngine(nil, newCapture(), nil)
	seen := map[string]bool{}
	for range 100 {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/plants", nil))
		id := rec.Header().Get("X-Request-ID")
		if seen[id] {
			t.Fatalf("request ID %q generated twice", id)
		}
		seen[id] = true
	}
}

func TestRequestIDForHandlers(t *testing.T) {
	e := newEngine(nil, newCapture(), nil)
	var got string
	e.GET("/id", func(c *gin.Context) { got = observability.RequestID(c) })
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/id", nil)
	req.Header.Set("X-Request-ID", "abc")
	e.ServeHTTP(httptest.NewRecorder(), req)
	if got != "abc" {
		t.Errorf("RequestID in handler = %q, want abc", got)
	}
}

func TestAnnotateWithoutMiddleware(t *testing.T) {
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	e := observability.Annotate(c)
	if e != nil {
		t.Fatalf("Annotate without Middleware = %v, want nil", e)
	}
	e.SetSubject("alice") // must not panic
	e.SetPlants(1)
	e.SetAuthFailure("expired")
}

func TestMetrics(t *testing.T) {
	reg := newCapture()
	e := newEngine(nil, reg, nil)
	gauge := reg.gauge(t)
	var inFlight float64
	e.GET("/slow", func(c *gin.Context) { inFlight = testutil.ToFloat64(gauge) })
	srv := startServer(t, e)

	sends := []struct{ method, path string }{
		{"GET", "/plants"}, {"GET", "/plants?limit=1"}, {"HEAD", "/plants"},
		{"GET", "/slow"}, {"POST", "/plants"}, {"GET", "/nope"}, {"FOO", "/nope"}, {"PROPFIND", "/plants"},
	}
	for _, s := range sends {
		do(t, newRequest(t, s.method, srv.URL+s.path))
	}

	counters := reg.counterVec(t)
	tests := []struct {
		method, route, code string
		want                float64
	}{
		{"GET", "/plants", "200", 2},
		{"HEAD", "unmatched", "405", 1},
		{"GET", "/slow", "200", 1},
		{"POST", "unmatched", "405", 1},
		{"GET", "unmatched", "404", 1},
		{"OTHER", "unmatched", "404", 1},
		{"OTHER", "unmatched", "405", 1},
		{"FOO", "unmatched", "404", 0},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.route+" "+tt.code, func(t *testing.T) {
			if got := testutil.ToFloat64(counters.WithLabelValues(tt.method, tt.route, tt.code)); got != tt.want {
				t.Errorf("plantstore_http_requests_total{method=%q,route=%q,code=%q} = %v, want %v", tt.method, tt.route, tt.code, got, tt.want)
			}
		})
	}
	// The FOO row above created an empty child; drop it before counting.
	counters.DeleteLabelValues("FOO", "unmatched", "404")
	if got, want := testutil.CollectAndCount(counters), 7; got != want {
		t.Errorf("requests_total has %d series, want %d", got, want)
	}
	if got, want := sampleCount(t, reg, "plantstore_http_request_duration_seconds"), uint64(len(sends)); got != want {
		t.Errorf("duration histogram count = %d, want %d requests", got, want)
	}
	if inFlight != 1 {
		t.Errorf("in-flight gauge during a request = %v, want 1", inFlight)
	}
	if got := testutil.ToFloat64(gauge); got != 0 {
		t.Errorf("in-flight gauge after the requests = %v, want 0", got)
	}
}

// sampleCount sums the sample counts of every series of a histogram.
func sampleCount(t testing.TB, reg *capture, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// TestMetricsRegisterOnce: the HTTP metrics are built once per registry;
// a second registration is a programming error and must fail loudly.
func TestMetricsRegisterOnce(t *testing.T) {
	reg := newCapture()
	observability.NewHTTPMetrics(reg)
	defer func() {
		if recover() == nil {
			t.Error("NewHTTPMetrics twice on one registry did not panic")
		}
	}()
	observability.NewHTTPMetrics(reg)
}

func TestPanicIsLoggedAndCounted(t *testing.T) {
	_, access, buf := newLogger(t, "info")
	reg := newCapture()
	e := newEngine(access, reg, nil)
	e.GET("/abort", func(c *gin.Context) { panic(http.ErrAbortHandler) })
	srv := startServer(t, e)

	resp, err := http.DefaultClient.Do(newRequest(t, http.MethodGet, srv.URL+"/abort"))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("GET /abort = %s, want the connection cut", resp.Status)
	}
	lines := buf.Lines(t)
	if len(lines) != 1 || lines[0]["level"] != "error" || lines[0]["status"] != 500.0 {
		t.Errorf("log after a panic = %v, want one error line with status 500", lines)
	}
	if got := testutil.ToFloat64(reg.counterVec(t).WithLabelValues("GET", "/abort", "500")); got != 1 {
		t.Errorf("requests_total{route=/abort,code=500} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(reg.gauge(t)); got != 0 {
		t.Errorf("in-flight gauge after a panic = %v, want 0", got)
	}
}

// TestCardinality sends hundreds of requests with random paths, methods,
// request IDs and Authorization values, and checks that the HTTP metrics
// keep a bounded number of series, none labelled with anything sent.
func TestCardinality(t *testing.T) {
	reg := newCapture()
	srv := startServer(t, newEngine(nil, reg, nil))
	rnd := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~"
		b := make([]byte, 4+rnd.IntN(20))
		for i := range b {
			b[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		return string(b)
	}
	methods := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "FOO", "PROPFIND", "get", "BREW"}
	var sent []string
	send := func(n int) {
		for range n {
			method := methods[rnd.IntN(len(methods))]
			var path string
			switch rnd.IntN(4) {
			case 0:
				path = "/plants"
			case 1:
				path = "/plants/" + url.PathEscape(word())
			case 2:
				path = "/" + url.PathEscape(word()) + "/" + url.PathEscape(word())
			default:
				path = "/plants?limit=" + url.QueryEscape(word())
			}
			id, auth := word(), "Bearer "+word()
			sent = append(sent, path, id, auth, strings.TrimPrefix(auth, "Bearer "))
			if !slices.Contains([]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"}, method) {
				sent = append(sent, method)
			}
			req := newRequest(t, method, srv.URL+path)
			req.Header.Set("X-Request-ID", id)
			req.Header.Set("Authorization", auth)
			do(t, req)
		}
	}

	// Method (9 used + OTHER) × route (/plants, unmatched) × code (200,
	// 404, 405) bounds every labelled metric, however many requests.
	const bound = 10 * 2 * 3
	send(300)
	first := seriesCounts(t, reg)
	send(300)
	second := seriesCounts(t, reg)
	for _, name := range []string{"plantstore_http_requests_total", "plantstore_http_request_duration_seconds", "plantstore_http_requests_in_flight"} {
		if first[name] == 0 || first[name] > bound || second[name] > bound {
			t.Errorf("%s: %d series after 300 requests, %d after 600; want a fixed bound of %d", name, first[name], second[name], bound)
		}
	}
	if second["plantstore_http_requests_in_flight"] != 1 {
		t.Errorf("in-flight gauge has %d series, want 1", second["plantstore_http_requests_in_flight"])
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	allowed := map[string]bool{"/plants": true, "unmatched": true, "OTHER": true}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				v := l.GetValue()
				if slices.Contains(sent, v) && !allowed[v] {
					t.Errorf("%s has label %s=%q, a value sent by the client", mf.GetName(), l.GetName(), v)
				}
				if l.GetName() == "route" && !allowed[v] {
					t.Errorf("%s has route %q, want /plants or unmatched", mf.GetName(), v)
				}
			}
		}
	}
}

func seriesCounts(t testing.TB, reg *capture) map[string]int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]int{}
	for _, mf := range mfs {
		out[mf.GetName()] = len(mf.GetMetric())
	}
	return out
}

// discardWriter is a ResponseWriter that drops everything, so the benchmark
// measures the middleware and not a recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header               { return w.h }
func (w *discardWriter) Write(p []byte) (int, error)       { return len(p), nil }
func (w *discardWriter) WriteHeader(int)                   {}
func (w *discardWriter) WriteString(s string) (int, error) { return len(s), nil }

func BenchmarkMiddleware(b *testing.B) {
	for _, bc := range []struct {
		name   string
		id     string
		access func(testing.TB) *observability.AccessLog
	}{
		{"caller ID", "3f2b8c1e-9d4a-4c7b", jsonDiscard},
		{"new ID", "", jsonDiscard},
		{"no access log", "3f2b8c1e-9d4a-4c7b", func(testing.TB) *observability.AccessLog { return nil }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := gin.New()
			e.Use(observability.Middleware(bc.access(b), observability.NewHTTPMetrics(newCapture()), nil, nil))
			e.GET("/plants", func(c *gin.Context) {
				observability.Annotate(c).SetSubject("alice")
				observability.Annotate(c).SetPlants(2)
				c.Status(http.StatusOK)
				_, _ = c.Writer.WriteString("[]")
			})
			req := httptest.NewRequest(http.MethodGet, "/plants?limit=2", nil)
			req.Header.Set("User-Agent", "bench/1")
			if bc.id != "" {
				req.Header.Set("X-Request-ID", bc.id)
			}
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				e.ServeHTTP(w, req)
			}
		})
	}
}

func jsonDiscard(tb testing.TB) *observability.AccessLog {
	_, access, err := observability.NewLogger(io.Discard, "info", "json")
	if err != nil {
		tb.Fatal(err)
	}
	return access
}
