package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/observability/metricstest"
	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/api"
)

// Test headers read by the fake identity middleware.
const (
	hdrSub    = "X-Test-Sub"    // the identity's subject; absent: no identity
	hdrGroups = "X-Test-Groups" // comma-separated groups
	hdrRefuse = "X-Test-Refuse" // "401" or "403": refuse as auth does
)

// fakeAuth stands in for auth.Middleware (real tokens are tested in auth and
// main): it puts the identity named by the test headers in the context, or
// refuses the way auth.Middleware does.
func fakeAuth(c *gin.Context) {
	switch c.GetHeader(hdrRefuse) {
	case "401":
		c.Header("WWW-Authenticate", `Bearer realm="plantstore", error="invalid_token", error_description="expired"`)
		c.Error(&auth.Error{Status: http.StatusUnauthorized, Code: "invalid_token", Reason: auth.ReasonExpired})
		c.Abort()
		return
	case "403":
		c.Header("WWW-Authenticate", `Bearer realm="plantstore", error="insufficient_scope", scope="plants:read"`)
		c.Error(&auth.Error{Status: http.StatusForbidden, Code: "insufficient_scope", Reason: auth.ReasonScope, Scope: "plants:read"})
		c.Abort()
		return
	}
	sub, ok := c.Request.Header[hdrSub]
	if !ok {
		return
	}
	id := auth.Identity{Subject: sub[0]}
	if g := c.GetHeader(hdrGroups); g != "" {
		id.Groups = strings.Split(g, ",")
	}
	c.Request = c.Request.WithContext(auth.NewContext(c.Request.Context(), &id))
}

// testAPI is a real gin engine set up as main sets it up, behind a loopback
// server.
type testAPI struct {
	srv  *httptest.Server
	logs *observer.ObservedLogs
	reg  *prometheus.Registry
}

func newEngine(store plants.Store, log *zap.Logger, m *api.Metrics) *gin.Engine {
	return newEngineAt(store, log, m, "")
}

// newEngineAt is newEngine with base as the handler's link base.
func newEngineAt(store plants.Store, log *zap.Logger, m *api.Metrics, base string) *gin.Engine {
	e := gin.New()
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.HandleMethodNotAllowed = true
	e.Use(api.RenderErrors(log), api.HeaderLimit(16<<10))
	e.NoRoute(api.NotFound)
	e.NoMethod(api.MethodNotAllowed)
	list := api.ListHandler(store, m, time.Minute, base)
	e.GET("/plants", fakeAuth, list)
	e.HEAD("/plants", fakeAuth, list)
	return e
}

func newTestAPI(t testing.TB, store plants.Store) *testAPI {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	reg := prometheus.NewPedanticRegistry()
	srv := httptest.NewServer(newEngine(store, zap.New(core), api.NewMetrics(reg)))
	t.Cleanup(srv.Close)
	return &testAPI{srv: srv, logs: logs, reg: reg}
}

type response struct {
	status int
	header http.Header
	body   []byte
	err    error // reading the body
}

// do sends a request with the given headers ("Key: value" strings).
func (a *testAPI) do(t testing.TB, method, target string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, a.srv.URL+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Add(k, v)
	}
	resp, err := a.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, body, err}
}

// as returns the test headers of a sample identity.
func as(sub string, groups ...string) []string {
	h := []string{hdrSub + ": " + sub}
	if len(groups) > 0 {
		h = append(h, hdrGroups+": "+strings.Join(groups, ","))
	}
	return h
}

// checkError checks an error response: status, the Error shape with that
// status, the content type, and the message when want is not "".
func checkError(t testing.TB, what string, r response, status int, msg string) {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: status %d; want %d (body %s)", what, r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q; want application/json", what, ct)
	}
	var fields map[string]any
	if err := json.Unmarshal(r.body, &fields); err != nil {
		t.Fatalf("%s: body %q is not a JSON object: %v", what, r.body, err)
	}
	if len(fields) != 2 {
		t.Errorf("%s: body %s has %d fields; want error and message", what, r.body, len(fields))
	}
	var e api.Error
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatal(err)
	}
	if e.Status != status || e.Message == "" || (msg != "" && e.Message != msg) {
		t.Errorf("%s: body %s; want error %d, message %q", what, r.body, status, msg)
	}
}

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode) // as main sets it once; keeps gin's debug lines out
	os.Exit(m.Run())
}

func TestErrorResponses(t *testing.T) {
	ta := newTestAPI(t, plants.NewMemoryStore(plants.SampleCatalog(), nil))
	bob := as("bob")
	big := "X-Big: " + strings.Repeat("a", 16<<10)
	tests := []struct {
		name    string
		method  string
		target  string
		headers []string
		status  int
		msg     string
		header  [2]string // a header the response must carry
	}{
		{"path with trailing slash", "GET", "/plants/", bob, 404, "not found", [2]string{}},
		{"sub path", "GET", "/plants/1", bob, 404, "not found", [2]string{}},
		{"root", "GET", "/", bob, 404, "not found", [2]string{}},
		{"other case", "GET", "/Plants", bob, 404, "not found", [2]string{}},
		{"unknown path, other method", "POST", "/nope", bob, 404, "not found", [2]string{}},
		{"trailing slash, other method", "DELETE", "/plants/", bob, 404, "not found", [2]string{}},
		{"POST", "POST", "/plants", bob, 405, "method not allowed", [2]string{"Allow", "GET, HEAD"}},
		{"PUT", "PUT", "/plants", bob, 405, "method not allowed", [2]string{"Allow", "GET, HEAD"}},
		{"DELETE", "DELETE", "/plants", bob, 405, "method not allowed", [2]string{"Allow", "GET, HEAD"}},
		{"PATCH", "PATCH", "/plants", bob, 405, "method not allowed", [2]string{"Allow", "GET, HEAD"}},
		{"OPTIONS", "OPTIONS", "/plants", bob, 405, "method not allowed", [2]string{"Allow", "GET, HEAD"}},
		{"405 before credentials", "POST", "/plants", []string{hdrRefuse + ": 401"}, 405, "method not allowed", [2]string{"Allow", "GET, HEAD"}},
		{"401", "GET", "/plants", []string{hdrRefuse + ": 401"}, 401, "missing or invalid credential", [2]string{"WWW-Authenticate", `Bearer realm="plantstore", error="invalid_token", error_description="expired"`}},
		{"401 before limit", "GET", "/plants?limit=x", []string{hdrRefuse + ": 401"}, 401, "missing or invalid credential", [2]string{}},
		{"403", "GET", "/plants", []string{hdrRefuse + ": 403"}, 403, "insufficient scope", [2]string{"WWW-Authenticate", `Bearer realm="plantstore", error="insufficient_scope", scope="plants:read"`}},
		{"400 bad limit", "GET", "/plants?limit=-1", bob, 400, "invalid limit: want an integer from 0 to 2147483647, digits only", [2]string{"Cache-Control", "no-store"}},
		{"400 empty limit", "GET", "/plants?limit=", bob, 400, "invalid limit: empty value; want an integer from 0 to 2147483647", [2]string{}},
		{"400 limit twice", "GET", "/plants?limit=1&limit=1", bob, 400, "invalid limit: given more than once", [2]string{}},
		{"400 limit overflow", "GET", "/plants?limit=2147483648", bob, 400, "invalid limit: over 2147483647", [2]string{}},
		{"400 on HEAD", "HEAD", "/plants?limit=a", bob, 400, "", [2]string{}},
		{"431", "GET", "/plants", append([]string{big}, bob...), 431, "request header fields too large", [2]string{}},
		{"431 before 404", "GET", "/nope", []string{big}, 431, "request header fields too large", [2]string{}},
		{"500 without identity", "GET", "/plants", nil, 500, "internal error", [2]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ta.do(t, tt.method, tt.target, tt.headers...)
			what := tt.method + " " + tt.target
			if tt.method == "HEAD" {
				if r.status != tt.status || len(r.body) != 0 {
					t.Errorf("%s: status %d, body %q; want %d, no body", what, r.status, r.body, tt.status)
				}
				return
			}
			checkError(t, what, r, tt.status, tt.msg)
			if k := tt.header[0]; k != "" && r.header.Get(k) != tt.header[1] {
				t.Errorf("%s: %s = %q; want %q", what, k, r.header.Get(k), tt.header[1])
			}
		})
	}

	// Only the 500 is logged, at Error, with its cause.
	logged := ta.logs.All()
	if len(logged) != 1 || logged[0].Level != zapcore.ErrorLevel || !strings.Contains(fmt.Sprint(logged[0].ContextMap()["error"]), "no identity") {
		t.Errorf("logged %+v; want one Error entry about the missing identity", logged)
	}
}

func TestHeaderLimitBoundary(t *testing.T) {
	ta := newTestAPI(t, plants.NewMemoryStore(plants.SampleCatalog(), nil))
	// Find the largest X-Pad that passes, then check one more byte fails.
	ok := 0
	for pad := 16<<10 - 400; pad < 16<<10; pad++ {
		r := ta.do(t, "GET", "/plants?limit=0", append(as("bob"), "X-Pad: "+strings.Repeat("p", pad))...)
		if r.status != 200 {
			if r.status != 431 {
				t.Fatalf("pad %d: status %d; want 200 or 431", pad, r.status)
			}
			break
		}
		ok = pad
	}
	if ok == 0 || ok == 16<<10-1 {
		t.Fatalf("no boundary found between 200 and 431 (last ok pad %d)", ok)
	}
	if r := ta.do(t, "GET", "/plants?limit=0", append(as("bob"), "X-Pad: "+strings.Repeat("p", ok+1))...); r.status != 431 {
		t.Errorf("pad %d: status %d; want 431", ok+1, r.status)
	}
}

// failingStore fails every listing; after yields that many plants first.
type failingStore struct {
	after int
	err   error
}

func (s failingStore) List(ctx context.Context, q plants.Query) iter.Seq2[plants.Plant, error] {
	return func(yield func(plants.Plant, error) bool) {
		for i := range s.after {
			p := plants.Plant{ID: strconv.Itoa(i), Name: fmt.Sprintf("plant %08d %s", i, strings.Repeat("x", 100)), Readers: []string{"*"}}
			if !yield(p, nil) {
				return
			}
		}
		yield(plants.Plant{}, s.err)
	}
}

func TestStoreUnavailable(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		msg    string
		retry  bool
		errLog int // Error log entries
	}{
		{"unavailable", fmt.Errorf("query plants: %w", plants.ErrUnavailable), 503, "store unavailable", true, 1},
		{"unavailable after some plants", fmt.Errorf("query plants: %w", plants.ErrUnavailable), 503, "store unavailable", true, 1},
		{"a bug", errors.New("SELECT secret FROM plants failed at /etc/passwd"), 500, "internal error", false, 1},
		{"canceled", fmt.Errorf("query plants: %w", context.Canceled), 503, "request canceled", true, 0},
		{"deadline", fmt.Errorf("query plants: %w", context.DeadlineExceeded), 503, "request timed out", true, 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ta := newTestAPI(t, failingStore{after: i % 2 * 3, err: tt.err})
			r := ta.do(t, "GET", "/plants", as("bob")...)
			checkError(t, "GET /plants", r, tt.status, tt.msg)
			if got := r.header.Get("Retry-After") != ""; got != tt.retry {
				t.Errorf("Retry-After %q; want present %v", r.header.Get("Retry-After"), tt.retry)
			}
			if strings.Contains(string(r.body), "SELECT") || strings.Contains(string(r.body), "/etc") {
				t.Errorf("body %s leaks the cause", r.body)
			}
			if n := len(ta.logs.FilterLevelExact(zapcore.ErrorLevel).All()); n != tt.errLog {
				t.Errorf("%d Error log entries; want %d", n, tt.errLog)
			}
			if h := ta.do(t, "HEAD", "/plants", as("bob")...); h.status != tt.status || len(h.body) != 0 {
				t.Errorf("HEAD: status %d, body %q; want %d, none", h.status, h.body, tt.status)
			}
		})
	}
}

func TestStoreFailsMidStream(t *testing.T) {
	ta := newTestAPI(t, failingStore{after: 2000, err: plants.ErrUnavailable})
	r := ta.do(t, "GET", "/plants", as("bob")...)
	if r.status != 200 {
		t.Fatalf("status %d; want 200 (the failure comes after the first chunk)", r.status)
	}
	if r.err == nil {
		t.Errorf("reading the body: no error after %d bytes; want a cut transfer", len(r.body))
	}
	if json.Valid(r.body) {
		t.Errorf("body is valid JSON; want it cut short")
	}
	// The server keeps serving, and the handler holds a store that
	// ignores the limit to it.
	if r := ta.do(t, "GET", "/plants?limit=1", as("bob")...); r.status != 200 || !strings.HasPrefix(string(r.body), `[{"name":"plant 00000000`) || !json.Valid(r.body) {
		t.Errorf("next request: %d %q; want 200 and one plant", r.status, r.body)
	}
}

// panickyStore panics on its first listing, then lists nothing.
type panickyStore struct{ calls *atomic.Int32 }

func (s panickyStore) List(ctx context.Context, q plants.Query) iter.Seq2[plants.Plant, error] {
	return func(yield func(plants.Plant, error) bool) {
		if s.calls.Add(1) == 1 {
			panic("boom: secret detail")
		}
	}
}

func TestPanicRecovered(t *testing.T) {
	ta := newTestAPI(t, panickyStore{new(atomic.Int32)})
	r := ta.do(t, "GET", "/plants", as("bob")...)
	checkError(t, "GET /plants (panics)", r, 500, "internal error")
	if strings.Contains(string(r.body), "boom") || strings.Contains(string(r.body), "goroutine") {
		t.Errorf("body %s leaks the panic", r.body)
	}
	panics := ta.logs.FilterMessage("panic serving request").All()
	if len(panics) != 1 || panics[0].Level != zapcore.ErrorLevel {
		t.Errorf("logged %v; want one Error entry for the panic", ta.logs.All())
	}
	if r := ta.do(t, "GET", "/plants", as("bob")...); r.status != 200 || string(r.body) != "[]" {
		t.Errorf("next request: %d %s; want 200 []", r.status, r.body)
	}
}

func TestListHeaders(t *testing.T) {
	ta := newTestAPI(t, plants.NewMemoryStore(plants.SampleCatalog(), nil))
	get := ta.do(t, "GET", "/plants", as("alice", "gardeners")...)
	head := ta.do(t, "HEAD", "/plants", as("alice", "gardeners")...)
	for _, r := range []response{get, head} {
		if r.status != 200 {
			t.Fatalf("status %d; want 200", r.status)
		}
		for k, v := range map[string]string{
			"Content-Type":   "application/json",
			"Cache-Control":  "no-store",
			"Vary":           "Authorization",
			"Content-Length": strconv.Itoa(len(get.body)),
		} {
			if got := r.header.Get(k); got != v {
				t.Errorf("%s = %q; want %q", k, got, v)
			}
		}
	}
	if len(head.body) != 0 {
		t.Errorf("HEAD body %q; want none", head.body)
	}
}

// TestListContentLengthAroundBuffer: whether net/http sets the length (a
// body that fits its 2 KiB buffer) or the handler does (a larger one
// written at once), every unstreamed response carries it.
func TestListContentLengthAroundBuffer(t *testing.T) {
	for _, size := range []int{2, 2047, 2048, 2049, 5000, 30000} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			// k-1 plants of 62 bytes with their commas, and one that
			// makes up the size: 2 + 62(k-1) + 11 + last.
			var ps []plants.Plant
			if size > 2 {
				k := (size - 2 - 11 - 1) / 62
				for i := range k {
					ps = append(ps, plants.Plant{Name: fmt.Sprintf("p%049d", i), Readers: []string{"*"}})
				}
				last := size - 2 - 62*k - 11
				ps = append(ps, plants.Plant{Name: "z" + strings.Repeat("z", last-1), Readers: []string{"*"}})
			}
			c, err := plants.NewCatalog(ps)
			if err != nil {
				t.Fatal(err)
			}
			ta := newTestAPI(t, plants.NewMemoryStore(c, nil))
			get := ta.do(t, "GET", "/plants", as("x")...)
			if get.status != 200 || len(get.body) != size {
				t.Fatalf("GET: %d with %d bytes; want 200 with %d", get.status, len(get.body), size)
			}
			head := ta.do(t, "HEAD", "/plants", as("x")...)
			for name, r := range map[string]response{"GET": get, "HEAD": head} {
				if got := r.header.Get("Content-Length"); got != strconv.Itoa(size) {
					t.Errorf("%s: Content-Length %q; want %d", name, got, size)
				}
			}
		})
	}
}

// listNames lists through the API and returns the names and tags.
func listJSON(t testing.TB, ta *testAPI, target string, headers ...string) []map[string]any {
	t.Helper()
	r := ta.do(t, "GET", target, headers...)
	if r.status != 200 || r.err != nil {
		t.Fatalf("GET %s: %d %s %v", target, r.status, r.body, r.err)
	}
	var out []map[string]any
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("GET %s: body %q: %v", target, r.body, err)
	}
	if out == nil {
		t.Fatalf("GET %s: body %q is null; want an array", target, r.body)
	}
	return out
}

func TestListSampleUsers(t *testing.T) {
	c := plants.SampleCatalog()
	ta := newTestAPI(t, plants.NewMemoryStore(c, nil))
	for _, id := range append(plants.SampleUsers(), plants.Caller{Subject: "nobody"}) {
		t.Run(id.Subject, func(t *testing.T) {
			var want []map[string]any
			for _, p := range c.Plants() {
				if plants.Readable(p.Readers, id) {
					m := map[string]any{"name": p.Name}
					if p.Tag != "" {
						m["tag"] = p.Tag
					}
					want = append(want, m)
				}
			}
			headers := as(id.Subject, id.Groups...)
			full := listJSON(t, ta, "/plants", headers...)
			if fmt.Sprint(full) != fmt.Sprint(want) && !(len(full) == 0 && len(want) == 0) {
				t.Errorf("GET /plants as %s = %v; want %v", id.Subject, full, want)
			}
			for _, obj := range full {
				for k, v := range obj {
					if s, ok := v.(string); (k != "name" && k != "tag") || !ok || (k == "tag" && s == "") {
						t.Errorf("object %v has field %q = %#v; want only name and a non-empty tag", obj, k, v)
					}
				}
			}
			for n := 0; n <= len(full)+2; n++ {
				got := listJSON(t, ta, "/plants?limit="+strconv.Itoa(n)+"&other=x", headers...)
				if wantN := min(n, len(full)); fmt.Sprint(got) != fmt.Sprint(full[:wantN]) {
					t.Errorf("GET /plants?limit=%d as %s = %v; want the first %d of the full list", n, id.Subject, got, wantN)
				}
			}
		})
	}
	private, err := plants.NewCatalog([]plants.Plant{{Name: "a", Readers: []string{"user:alice", "group:g"}}})
	if err != nil {
		t.Fatal(err)
	}
	ta = newTestAPI(t, plants.NewMemoryStore(private, nil))
	for _, headers := range [][]string{as("bob"), as("bob", "h"), as("alice")} {
		want := "[]"
		if headers[0] == hdrSub+": alice" {
			want = `[{"name":"a"}]`
		}
		if r := ta.do(t, "GET", "/plants", headers...); string(r.body) != want {
			t.Errorf("GET /plants as %q = %q; want %s", headers, r.body, want)
		}
	}
}

func TestListLargeAndEscaped(t *testing.T) {
	ps := make([]plants.Plant, 5000)
	for i := range ps {
		ps[i] = plants.Plant{Name: fmt.Sprintf("<%05d> \"é\" \n\u2028", i), Tag: map[bool]string{true: "t&"}[i%2 == 0], Readers: []string{"*"}}
	}
	c, err := plants.NewCatalog(ps)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	srv := httptest.NewServer(newEngine(plants.NewMemoryStore(c, plants.NewMetrics(reg)), zap.NewNop(), api.NewMetrics(reg)))
	t.Cleanup(srv.Close)
	ta := &testAPI{srv: srv, reg: reg}
	r := ta.do(t, "GET", "/plants", as("x")...)
	if r.header.Get("Content-Length") != "" {
		t.Errorf("Content-Length %q on a streamed response; want none", r.header.Get("Content-Length"))
	}
	var got []struct{ Name, Tag string }
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatalf("body is not JSON: %v", err)
	}
	if len(got) != 5000 || got[0].Name != ps[0].Name || got[4999].Name != ps[4999].Name || got[0].Tag != "t&" || got[1].Tag != "" {
		t.Errorf("got %d plants, first %+v, last %+v; want 5000 in order with escapes kept", len(got), got[0], got[len(got)-1])
	}
	if n := int(metricstest.Sum(t, reg, "plantstore_plants_returned", nil)); n != 1 {
		t.Errorf("plantstore_plants_returned count %d; want 1", n)
	}
	head := ta.do(t, "HEAD", "/plants", as("x")...)
	if head.status != 200 || len(head.body) != 0 || head.header.Get("Content-Length") != "" {
		t.Errorf("HEAD: %d, %d bytes, Content-Length %q; want 200, none, none", head.status, len(head.body), head.header.Get("Content-Length"))
	}
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

func newBenchCatalog(tb testing.TB, n int) *plants.Catalog {
	tb.Helper()
	ps := make([]plants.Plant, n)
	for i := range ps {
		ps[i] = plants.Plant{Name: fmt.Sprintf("Plant number %07d", i), Tag: "herb", Readers: []string{"*"}}
	}
	c, err := plants.NewCatalog(ps)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// serveFunc returns a function serving one GET /plants over a full catalog
// of n plants into a writer that keeps nothing.
func serveFunc(tb testing.TB, n int) func() {
	// A store that only lists: every request encodes its page.
	e := newEngine(listOnly{plants.NewMemoryStore(newBenchCatalog(tb, n), nil)}, zap.NewNop(), nil)
	req := httptest.NewRequest("GET", "/plants", nil)
	req = req.WithContext(auth.NewContext(req.Context(), &auth.Identity{Subject: "u"}))
	req.Header.Set(hdrSub, "u")
	return func() {
		w := &discard{h: http.Header{}}
		e.ServeHTTP(w, req)
	}
}

func TestListMemoryFlat(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random, so allocations per request vary")
	}
	small := testing.AllocsPerRun(20, serveFunc(t, 10))
	large := testing.AllocsPerRun(20, serveFunc(t, 10_000))
	if large > small+2 {
		t.Errorf("allocations per request: %v for 10 plants, %v for 10,000; want no growth", small, large)
	}
}

func BenchmarkListHandler(b *testing.B) {
	for _, n := range []int{10, 10_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			serve := serveFunc(b, n)
			b.ReportAllocs()
			for b.Loop() {
				serve()
			}
		})
	}
}

func TestOpenAPI(t *testing.T) {
	var doc struct {
		OpenAPI string `json:"openapi"`
		Info    struct {
			Version string                `json:"version"`
			License struct{ Name string } `json:"license"`
		} `json:"info"`
		Security []map[string][]string `json:"security"`
		Paths    map[string]map[string]struct {
			Parameters []map[string]any          `json:"parameters"`
			Responses  map[string]map[string]any `json:"responses"`
			Security   *[]map[string][]string    `json:"security"`
		} `json:"paths"`
		Components struct {
			Parameters map[string]struct {
				Name, In string
				Schema   map[string]any
			} `json:"parameters"`
			Schemas map[string]struct {
				Required   []string                  `json:"required"`
				Properties map[string]map[string]any `json:"properties"`
			} `json:"schemas"`
			SecuritySchemes map[string]map[string]any `json:"securitySchemes"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatalf("OpenAPI is not JSON: %v", err)
	}
	checks := []struct {
		what string
		ok   bool
	}{
		{"openapi 3.1.0", doc.OpenAPI == "3.1.0"},
		{"version 1.0.0", doc.Info.Version == "1.0.0"},
		{"license MIT", doc.Info.License.Name == "MIT"},
		{"bearer security for the whole interface", len(doc.Security) == 1 && doc.Security[0]["bearerAuth"] != nil},
		{"GET /plants: bearer or DPoP", doc.Paths["/plants"]["get"].Security != nil && len(*doc.Paths["/plants"]["get"].Security) == 2 &&
			(*doc.Paths["/plants"]["get"].Security)[0]["bearerAuth"] != nil && (*doc.Paths["/plants"]["get"].Security)[1]["dpopAuth"] != nil},
		{"bearer scheme", doc.Components.SecuritySchemes["bearerAuth"]["type"] == "http" && doc.Components.SecuritySchemes["bearerAuth"]["scheme"] == "bearer"},
		{"DPoP scheme", doc.Components.SecuritySchemes["dpopAuth"]["type"] == "http" && doc.Components.SecuritySchemes["dpopAuth"]["scheme"] == "DPoP"},
		{"/plants and the resource metadata", len(doc.Paths) == 2 && doc.Paths["/plants"] != nil && doc.Paths["/.well-known/oauth-protected-resource"] != nil},
		{"metadata needs no credential", doc.Paths["/.well-known/oauth-protected-resource"]["get"].Security != nil && len(*doc.Paths["/.well-known/oauth-protected-resource"]["get"].Security) == 0},
		{"limit int32 in query", doc.Components.Parameters["limit"].Name == "limit" && doc.Components.Parameters["limit"].In == "query" &&
			doc.Components.Parameters["limit"].Schema["type"] == "integer" && doc.Components.Parameters["limit"].Schema["format"] == "int32"},
		{"after string in query, at most 512", doc.Components.Parameters["after"].Name == "after" && doc.Components.Parameters["after"].In == "query" &&
			doc.Components.Parameters["after"].Schema["type"] == "string" && doc.Components.Parameters["after"].Schema["maxLength"] == float64(plants.MaxCursorLen)},
		{"GET /plants takes limit and after", len(doc.Paths["/plants"]["get"].Parameters) == 2 && doc.Paths["/plants"]["get"].Parameters[1]["$ref"] == "#/components/parameters/after"},
		{"GET /plants 200 has Link", doc.Paths["/plants"]["get"].Responses["200"]["headers"].(map[string]any)["Link"] != nil},
		{"HEAD /plants 200 has Link", doc.Paths["/plants"]["head"].Responses["200"]["headers"].(map[string]any)["Link"] != nil},
		{"Plant requires name", slices.Equal(doc.Components.Schemas["Plant"].Required, []string{"name"})},
		{"Plant has name and tag only", len(doc.Components.Schemas["Plant"].Properties) == 2 && doc.Components.Schemas["Plant"].Properties["tag"]["type"] == "string"},
		{"Error error int32", doc.Components.Schemas["Error"].Properties["error"]["format"] == "int32"},
		{"Error message", doc.Components.Schemas["Error"].Properties["message"]["type"] == "string"},
	}
	for _, status := range []string{"200", "400", "401", "403", "405", "431", "500", "503"} {
		_, ok := doc.Paths["/plants"]["get"].Responses[status]
		checks = append(checks, struct {
			what string
			ok   bool
		}{"GET /plants response " + status, ok})
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("OpenAPI: want %s", c.what)
		}
	}
	if strings.Contains(string(api.OpenAPI), `"$ref": "#/components/responses`) {
		t.Errorf("OpenAPI refers to undefined components/responses")
	}
}
