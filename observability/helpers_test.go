package observability_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/observability/logtest"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	os.Exit(m.Run())
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

// newLogger returns a JSON logger and access log at level writing to a
// buffer.
func newLogger(t testing.TB, level string) (*zap.Logger, *observability.AccessLog, *logtest.Buffer) {
	t.Helper()
	buf := &logtest.Buffer{}
	log, access, err := observability.NewLogger(buf, level, "json")
	if err != nil {
		t.Fatalf("NewLogger(%q, json) error: %v", level, err)
	}
	return log, access, buf
}

// newEngine returns a gin engine configured as the API is: Middleware
// first, no redirects, 405 for a known path with another method.
func newEngine(access *observability.AccessLog, reg prometheus.Registerer, trusted []netip.Prefix) *gin.Engine {
	return newTracedEngine(access, reg, trusted, nil)
}

// newTracedEngine is newEngine with tr's server spans.
func newTracedEngine(access *observability.AccessLog, reg prometheus.Registerer, trusted []netip.Prefix, tr *observability.Tracing) *gin.Engine {
	e := gin.New()
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.HandleMethodNotAllowed = true
	e.Use(observability.Middleware(access, observability.NewHTTPMetrics(reg), trusted, tr))
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
