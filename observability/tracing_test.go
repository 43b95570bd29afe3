package observability_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/plantstore/plantstore/observability"
)

// newRecorded returns a Tracing whose spans end in the returned recorder,
// sampled as the service samples by default (parentbased_always_on).
func newRecorded(t testing.TB, subject bool) (*observability.Tracing, *tracetest.SpanRecorder) {
	t.Helper()
	return newSampled(t, nil, subject)
}

// newSampled is newRecorded with the sampler variables of env.
func newSampled(t testing.TB, env map[string]string, subject bool) (*observability.Tracing, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tr, err := observability.NewTracingRecorded(func(k string) string { return env[k] }, rec, subject)
	if err != nil {
		t.Fatalf("NewTracingRecorded(%v): %v", env, err)
	}
	// Not t.Context(): it is canceled before cleanups run.
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr, rec
}

// tracedServer serves the test engine with tr, plus /fail (500) and
// /deny (401, auth failure "expired"), and returns its URL, the access
// log and the registry.
func tracedServer(t testing.TB, tr *observability.Tracing) (string, func() []map[string]any, *prometheus.Registry) {
	t.Helper()
	return tracedServerBehind(t, tr, nil)
}

// tracedServerBehind is tracedServer trusting the proxies trusted.
func tracedServerBehind(t testing.TB, tr *observability.Tracing, trusted []netip.Prefix) (string, func() []map[string]any, *prometheus.Registry) {
	t.Helper()
	_, access, buf := newLogger(t, "info")
	reg := prometheus.NewRegistry()
	e := newTracedEngine(access, reg, trusted, tr)
	e.GET("/fail", func(c *gin.Context) { c.Status(http.StatusInternalServerError) })
	e.GET("/deny", func(c *gin.Context) {
		observability.Annotate(c).SetAuthFailure("expired")
		c.Status(http.StatusUnauthorized)
	})
	srv := startServer(t, e)
	return srv.URL, func() []map[string]any { return buf.Lines(t) }, reg
}

// lastEnded returns the span the recorder saw end last.
func lastEnded(t testing.TB, rec *tracetest.SpanRecorder) sdktrace.ReadOnlySpan {
	t.Helper()
	ended := rec.Ended()
	if len(ended) == 0 {
		t.Fatal("no span ended")
	}
	return ended[len(ended)-1]
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

// TestServerSpanNoMethod: a request gin answers through NoMethod starts
// with no route; the route the handler sets names the span when it ends.
func TestServerSpanNoMethod(t *testing.T) {
	tr, rec := newRecorded(t, false)
	_, access, _ := newLogger(t, "info")
	e := newTracedEngine(access, prometheus.NewRegistry(), nil, tr)
	e.NoMethod(func(c *gin.Context) {
		observability.Annotate(c).SetRoute("/plants")
		c.Status(http.StatusMethodNotAllowed)
	})
	srv := startServer(t, e)
	resp, _ := do(t, newRequest(t, http.MethodPost, srv.URL+"/plants"))
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /plants: %d, want 405", resp.StatusCode)
	}
	s := lastEnded(t, rec)
	if s.Name() != "POST /plants" || attrs(s)["http.route"].AsString() != "/plants" {
		t.Errorf("span %q, http.route %q; want POST /plants, /plants", s.Name(), attrs(s)["http.route"].AsString())
	}
}

// TestServerSpan checks the server span of each kind of request, its
// parent, and the ids the access line carries (SPEC §8, §12).
func TestServerSpan(t *testing.T) {
	tr, rec := newRecorded(t, false)
	url, lines, _ := tracedServer(t, tr)
	tests := []struct {
		name        string
		path        string
		traceparent string
		wantName    string
		wantRoute   string // "" for none
		wantStatus  int
		wantParent  bool // the caller's span is the parent
		wantError   bool
	}{
		{"caller's traceparent", "/plants?limit=1", "00-" + callerTrace + "-" + callerSpan + "-01", "GET /plants", "/plants", 200, true, false},
		{"no traceparent", "/plants", "", "GET /plants", "/plants", 200, false, false},
		{"malformed traceparent", "/plants", "00-zz-" + callerSpan + "-01", "GET /plants", "/plants", 200, false, false},
		{"all-zero trace id", "/plants", "00-00000000000000000000000000000000-" + callerSpan + "-01", "GET /plants", "/plants", 200, false, false},
		{"unknown path", "/nope", "", "GET", "", 404, false, false},
		{"refused", "/deny", "", "GET /deny", "/deny", 401, false, false},
		{"server error", "/fail", "", "GET /fail", "/fail", 500, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest(t, http.MethodGet, url+tt.path)
			req.Header.Set("X-Request-ID", "req-"+strings.ReplaceAll(tt.name, " ", "-")[:5])
			req.Header.Set("User-Agent", "plantstore-test/1")
			if tt.traceparent != "" {
				req.Header.Set("Traceparent", tt.traceparent)
			}
			resp, _ := do(t, req)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			s := lastEnded(t, rec)
			if s.Name() != tt.wantName || s.SpanKind() != trace.SpanKindServer {
				t.Errorf("span %q kind %v, want %q server", s.Name(), s.SpanKind(), tt.wantName)
			}
			a := attrs(s)
			if got := a["http.route"].AsString(); got != tt.wantRoute {
				t.Errorf("http.route = %q, want %q", got, tt.wantRoute)
			}
			if got := a["http.response.status_code"].AsInt64(); got != int64(tt.wantStatus) {
				t.Errorf("http.response.status_code = %d, want %d", got, tt.wantStatus)
			}
			for k, want := range map[attribute.Key]string{
				"http.request.method": "GET", "client.address": "127.0.0.1",
				"user_agent.original": "plantstore-test/1", "plantstore.request_id": req.Header.Get("X-Request-ID"),
				"url.path": strings.SplitN(tt.path, "?", 2)[0], "url.scheme": "http",
			} {
				if got := a[k].AsString(); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			if _, ok := a["enduser.id"]; ok {
				t.Errorf("enduser.id set without -trace-subject: %v", a["enduser.id"])
			}
			if tt.wantError != (s.Status().Code == codes.Error) {
				t.Errorf("span status %v, want error %t", s.Status(), tt.wantError)
			}
			parent := s.Parent()
			if tt.wantParent {
				if parent.TraceID().String() != callerTrace || parent.SpanID().String() != callerSpan || !parent.IsRemote() {
					t.Errorf("parent %s/%s remote %t, want the caller's %s/%s", parent.TraceID(), parent.SpanID(), parent.IsRemote(), callerTrace, callerSpan)
				}
				if s.SpanContext().TraceID().String() != callerTrace {
					t.Errorf("trace id %s, want the caller's %s", s.SpanContext().TraceID(), callerTrace)
				}
			} else if parent.IsValid() {
				t.Errorf("span has parent %s/%s, want a root span", parent.TraceID(), parent.SpanID())
			}
			line := findLine(t, lines(), req.Header.Get("X-Request-ID"))
			if line["trace_id"] != s.SpanContext().TraceID().String() || line["span_id"] != s.SpanContext().SpanID().String() {
				t.Errorf("access line trace_id %v span_id %v, want %s %s", line["trace_id"], line["span_id"], s.SpanContext().TraceID(), s.SpanContext().SpanID())
			}
		})
	}
}

func findLine(t testing.TB, lines []map[string]any, requestID string) map[string]any {
	t.Helper()
	for _, l := range lines {
		if l["msg"] == "request" && l["request_id"] == requestID {
			return l
		}
	}
	t.Fatalf("no access line with request_id %q in %v", requestID, lines)
	return nil
}

// TestServerSpanCarriesNoSecrets sends a token and secrets in every place
// a request can carry them: none reaches the span.
func TestServerSpanCarriesNoSecrets(t *testing.T) {
	for _, subject := range []bool{false, true} {
		tr, rec := newRecorded(t, subject)
		url, _, _ := tracedServer(t, tr)
		req := newRequest(t, http.MethodGet, url+"/plants?access_token=secret-in-query")
		req.Header.Set("Authorization", "Bearer secret-token")
		req.Header.Set("Cookie", "session=secret-cookie")
		req.Header.Set("Tracestate", "vendor=opaque")
		do(t, req)
		s := lastEnded(t, rec)
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.String(), "secret") {
				t.Errorf("subject %t: attribute %s = %q carries a secret", subject, kv.Key, kv.Value.String())
			}
		}
		// The engine's /plants handler annotates subject alice.
		if got, ok := attrs(s)["enduser.id"]; subject != ok || (ok && got.AsString() != "alice") {
			t.Errorf("subject %t: enduser.id = %v (set %t)", subject, got.String(), ok)
		}
	}
}

// TestExemplars checks that a sampled request's trace id is the exemplar
// of its duration observation, in OpenMetrics on /metrics, and that an
// unsampled one (a trusted proxy's, whose flag counts) leaves none while
// its ids are still logged.
func TestExemplars(t *testing.T) {
	tr, _ := newRecorded(t, false)
	url, lines, reg := tracedServerBehind(t, tr, loopbackProxy)
	admin := startServer(t, observability.AdminHandler(observability.AdminOptions{Registry: reg}))

	sampled := newRequest(t, http.MethodGet, url+"/plants")
	sampled.Header.Set("Traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	sampled.Header.Set("X-Request-ID", "sampled")
	do(t, sampled)
	const unsampledTrace = "0af7651916cd43dd8448eb211c80319c"
	unsampled := newRequest(t, http.MethodGet, url+"/deny")
	unsampled.Header.Set("Traceparent", "00-"+unsampledTrace+"-b7ad6b7169203331-00")
	unsampled.Header.Set("X-Request-ID", "unsampled")
	do(t, unsampled)

	metrics := newRequest(t, http.MethodGet, admin.URL+"/metrics")
	metrics.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, body := do(t, metrics)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("/metrics asked for OpenMetrics answered %q", ct)
	}
	var exemplar string
	for line := range strings.Lines(body) {
		if strings.HasPrefix(line, "plantstore_http_request_duration_seconds_bucket{") && strings.Contains(line, "# {") {
			if strings.Contains(line, `route="/plants"`) {
				exemplar = line
			}
			if strings.Contains(line, unsampledTrace) {
				t.Errorf("an unsampled request left an exemplar: %s", line)
			}
		}
	}
	if !strings.Contains(exemplar, `trace_id="`+callerTrace+`"`) || !strings.Contains(exemplar, `span_id="`) {
		t.Errorf("no exemplar with trace_id %s on the /plants buckets; /metrics:\n%s", callerTrace, body)
	}
	if l := findLine(t, lines(), "unsampled"); l["trace_id"] != unsampledTrace {
		t.Errorf("unsampled request logged trace_id %v, want %s", l["trace_id"], unsampledTrace)
	}

	plain := newRequest(t, http.MethodGet, admin.URL+"/metrics")
	resp, body = do(t, plain)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") || strings.Contains(body, "# {") {
		t.Errorf("/metrics without Accept answered %q with exemplars %t, want the text format", ct, strings.Contains(body, "# {"))
	}
}

// TestTracingOff checks that without tracing the access line carries no
// ids and Middleware reads no trace header.
func TestTracingOff(t *testing.T) {
	url, lines, _ := tracedServer(t, nil)
	req := newRequest(t, http.MethodGet, url+"/plants")
	req.Header.Set("Traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	req.Header.Set("X-Request-ID", "untraced")
	do(t, req)
	l := findLine(t, lines(), "untraced")
	if _, ok := l["trace_id"]; ok {
		t.Errorf("tracing off logged trace_id %v", l["trace_id"])
	}
	off, err := observability.NewTracing(t.Context(), observability.TracingOptions{})
	if err != nil || off.Enabled() {
		t.Errorf("NewTracing without variables = enabled %t, %v; want off", off.Enabled(), err)
	}
}

// TestTracingOn checks which variables turn tracing on (SPEC §12).
func TestTracingOn(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, false},
	}
	for _, tt := range tests {
		if got := observability.TracingOn(func(k string) string { return tt.env[k] }); got != tt.want {
			t.Errorf("TracingOn(%v) = %t, want %t", tt.env, got, tt.want)
		}
	}
}

// TestNewTracingRefusesUnknownExporter checks that a value the SDK does not
// know stops the start instead of silently tracing nothing. The SDK reads
// the process environment.
func TestNewTracingRefusesUnknownExporter(t *testing.T) {
	for k, v := range map[string]string{"OTEL_TRACES_EXPORTER": "zipkin-typo", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"} {
		t.Run(k, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			t.Setenv(k, v)
			_, err := observability.NewTracing(t.Context(), observability.TracingOptions{Getenv: func(name string) string {
				if name == k {
					return v
				}
				return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}[name]
			}})
			if !errors.Is(err, observability.ErrTracingConfig) || !strings.Contains(err.Error(), v) {
				t.Errorf("NewTracing with %s=%s: %v, want an ErrTracingConfig naming the value", k, v, err)
			}
		})
	}
}
