package observability_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/plantstore/plantstore/observability"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	os.Exit(m.Run())
}

// syncBuffer is a bytes.Buffer safe for a server goroutine to write while a
// test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines decodes every JSON line written so far.
func (b *syncBuffer) lines(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader([]byte(b.String())))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// capture is a Registerer that remembers what was registered on it, so
// tests can read the collectors Middleware created.
type capture struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func newCapture() *capture { return &capture{Registry: prometheus.NewRegistry()} }

func (r *capture) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *capture) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *capture) counterVec(t testing.TB) *prometheus.CounterVec {
	t.Helper()
	for _, c := range r.collectors {
		if v, ok := c.(*prometheus.CounterVec); ok {
			return v
		}
	}
	t.Fatal("no CounterVec registered")
	return nil
}

func (r *capture) gauge(t testing.TB) prometheus.Gauge {
	t.Helper()
	for _, c := range r.collectors {
		if v, ok := c.(prometheus.Gauge); ok {
			return v
		}
	}
	t.Fatal("no Gauge registered")
	return nil
}

// newLogger returns a JSON logger at level writing to a buffer.
func newLogger(t testing.TB, level string) (*zap.Logger, *syncBuffer) {
	t.Helper()
	buf := &syncBuffer{}
	log, err := observability.NewLogger(level, "json", buf)
	if err != nil {
		t.Fatalf("NewLogger(%q, json) error: %v", level, err)
	}
	return log, buf
}

// newEngine returns a gin engine configured as the API is: Middleware
// first, no redirects, 405 for a known path with another method.
func newEngine(log *zap.Logger, reg prometheus.Registerer, trusted []netip.Prefix) *gin.Engine {
	e := gin.New()
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.HandleMethodNotAllowed = true
	e.Use(observability.Middleware(log, reg, trusted))
	e.GET("/plants", func(c *gin.Context) {
		observability.Annotate(c).SetSubject("alice")
		observability.Annotate(c).SetPlants(2)
		c.Data(http.StatusOK, "application/json", []byte(`[{"name":"a"},{"name":"b"}]`))
	})
	e.NoRoute(func(c *gin.Context) {
		c.Data(http.StatusNotFound, "application/json", []byte(`{"error":404,"message":"not found"}`))
	})
	return e
}

// startServer serves h on 127.0.0.1 for the test's lifetime.
func startServer(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// do sends a request and returns the response with its body read.
func do(t testing.TB, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.URL, err)
	}
	return resp, b.String()
}

func newRequest(t testing.TB, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatalf("NewRequest(%q, %q): %v", method, url, err)
	}
	return req
}
