package check_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tracing end-to-end test runs the gateway's parts as
// TestGatewayEndToEnd does, with plantstore exporting its spans by the
// standard OTEL_* variables to the OpenTelemetry Collector's own OTLP
// receiver (.ci/otlpsink, TEST_OTLPSINK_BIN), which writes each export it
// receives as a line of OTLP JSON. Besides what requireTools needs, it needs
// TEST_OTLPSINK_BIN: without it, it skips, unless TEST_REQUIRE_TOOLS=1
// makes it fail.

// Span kinds as OTLP JSON numbers them.
const (
	spanKindServer = 2
	spanKindClient = 3
)

// otlpSpan is one span of the sink's file, its attributes and its
// resource's flattened to strings ("200" for an intValue 200).
type otlpSpan struct {
	TraceID      string            `json:"traceId"`
	SpanID       string            `json:"spanId"`
	ParentSpanID string            `json:"parentSpanId"`
	Name         string            `json:"name"`
	Kind         int               `json:"kind"`
	Attributes   []otlpKeyValue    `json:"attributes"`
	Attrs        map[string]string `json:"-"`
	Resource     map[string]string `json:"-"`
}

type otlpKeyValue struct {
	Key   string         `json:"key"`
	Value map[string]any `json:"value"` // {"stringValue": "x"}, {"intValue": "200"}, ...
}

func flatten(kvs []otlpKeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		for _, v := range kv.Value {
			m[kv.Key] = fmt.Sprint(v)
		}
	}
	return m
}

func (s otlpSpan) String() string {
	return fmt.Sprintf("%s kind %d trace %s span %s parent %q %v resource %v",
		s.Name, s.Kind, s.TraceID, s.SpanID, s.ParentSpanID, s.Attrs, s.Resource)
}

// sinkSpans returns the spans of the sink's file path, in the order they
// arrived.
func sinkSpans(t testing.TB, path string) []otlpSpan {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []otlpSpan
	for _, line := range strings.Split(string(raw), "\n") {
		var export struct {
			ResourceSpans []struct {
				Resource struct {
					Attributes []otlpKeyValue `json:"attributes"`
				} `json:"resource"`
				ScopeSpans []struct {
					Spans []otlpSpan `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		if err := json.Unmarshal([]byte(line), &export); err != nil {
			t.Fatalf("otlpsink line %.200s: %v", line, err)
		}
		for _, rs := range export.ResourceSpans {
			resource := flatten(rs.Resource.Attributes)
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					s.Attrs, s.Resource = flatten(s.Attributes), resource
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// waitSpan waits for a span of the sink's file path that match accepts
// and returns it.
func waitSpan(t testing.TB, path, what string, match func(otlpSpan) bool) otlpSpan {
	t.Helper()
	var found otlpSpan
	waitFor(t, what+" in the sink's file", func() bool {
		for _, s := range sinkSpans(t, path) {
			if match(s) {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

// randomHex returns n random bytes in lower-case hex.
func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// tracingEnv is this process's environment without its OTEL_* variables,
// with plantstore's tracing to endpoint and extra.
func tracingEnv(endpoint string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return append(append(env,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint,
		"OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_SERVICE_NAME=plantstore-e2e"), extra...)
}

// checkCallerTrace sends GET /plants with token through the gateway with a
// traceparent of its own and requestID, and checks plantstore's server span
// for it in the sink's file: a child of the caller's span, with the route,
// method, status, request id and service name, and its ids on the access
// line in log.
func checkCallerTrace(t testing.TB, gateway, token, requestID, sinkOut, log string) {
	t.Helper()
	traceID, parentID := randomHex(t, 16), randomHex(t, 8)
	h := http.Header{
		"Authorization": {"Bearer " + token},
		"Traceparent":   {"00-" + traceID + "-" + parentID + "-01"},
	}
	if got := callWith(t, http.MethodGet, gateway, "/plants", h, requestID); got.status != 200 || got.body != wantCIPlants {
		t.Fatalf("GET /plants via nginx with a traceparent: got %d %s, want 200 %s", got.status, got.body, wantCIPlants)
	}
	span := waitSpan(t, sinkOut, "the server span of trace "+traceID, func(s otlpSpan) bool {
		return s.Kind == spanKindServer && s.TraceID == traceID
	})
	for k, want := range map[string]string{
		"http.route":                "/plants",
		"http.request.method":       "GET",
		"http.response.status_code": "200",
		"plantstore.request_id":     requestID,
	} {
		if span.Attrs[k] != want {
			t.Errorf("server span attribute %s = %q, want %q (span %v)", k, span.Attrs[k], want, span)
		}
	}
	if span.Name != "GET /plants" || span.ParentSpanID != parentID || span.Resource["service.name"] != "plantstore-e2e" {
		t.Errorf("server span %v: want name GET /plants, parent %s (the caller's), service.name plantstore-e2e", span, parentID)
	}
	entry := plantstoreLine(t, log, requestID)
	if entry["trace_id"] != traceID || entry["span_id"] != span.SpanID {
		t.Errorf("access line trace_id %v span_id %v, want %s %s (the server span's)", entry["trace_id"], entry["span_id"], traceID, span.SpanID)
	}
}

// noSecrets checks that the sink's file holds none of the tokens (neither
// their claims nor their signatures), no subject and no "Bearer".
func noSecrets(t testing.TB, sinkOut string, tokens ...string) {
	t.Helper()
	raw, err := os.ReadFile(sinkOut)
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{"Bearer": "the string Bearer", "plantstore-ci": "the subject plantstore-ci"}
	for i, tok := range tokens {
		parts := strings.Split(tok, ".")
		secrets[tok] = fmt.Sprintf("access token %d", i)
		for j, part := range parts[1:] {
			secrets[part] = fmt.Sprintf("part %d of access token %d", j+2, i)
		}
	}
	for s, what := range secrets {
		if strings.Contains(string(raw), s) {
			t.Errorf("the exported spans contain %s", what)
		}
	}
}

// TestGatewayEndToEndTracing runs an oidc-provider, plantstore by OIDC
// discovery tracing to the OpenTelemetry Collector's OTLP receiver
// (.ci/otlpsink) and nginx in front of it: a request with the caller's
// traceparent continues the caller's trace, one without starts a trace of
// its own, a 401 is traced too, the access lines name the server spans,
// the fetch of the keys is a client span, and no token, subject or
// Authorization value is exported. A second plantstore exports over
// OTLP/gRPC to the same receiver.
func TestGatewayEndToEndTracing(t *testing.T) {
	bin, nginx := requireTools(t)
	sinkBin := fromEnv(t, "TEST_OTLPSINK_BIN", "the built .ci/otlpsink")
	dir := t.TempDir()
	provider := startIdP(t, dir, freePort(t), "idp", genKey(t, "key-1"))

	sinkOut := filepath.Join(dir, "spans.jsonl")
	httpPort, grpcPort := freePort(t), freePort(t)
	sink := start(t, dir, "otlpsink", sinkBin, "-out", sinkOut,
		"-http", fmt.Sprintf("127.0.0.1:%d", httpPort), "-grpc", fmt.Sprintf("127.0.0.1:%d", grpcPort))
	waitFor(t, "otlpsink ready", func() bool {
		b, _ := os.ReadFile(sink.log)
		if !sink.running() {
			t.Fatalf("otlpsink exited:\n%s", b)
		}
		return strings.Contains(string(b), "otlpsink ready\n")
	})
	t.Cleanup(func() {
		if t.Failed() {
			lines := []string{}
			for _, s := range sinkSpans(t, sinkOut) {
				lines = append(lines, s.String())
			}
			if len(lines) == 0 {
				lines = append(lines, "(none)")
			}
			t.Logf("spans received by otlpsink:\n  %s", strings.Join(lines, "\n  "))
		}
	})
	args := []string{"-jwt-issuer", provider.issuer, "-jwt-audience", "plantstore", "-jwt-required-scope", "plants:read"}
	conf := filepath.Join(gatewayDir, "nginx.conf.in")
	var tokens []string // every token sent, none of which may be exported

	t.Run("over OTLP/HTTP", func(t *testing.T) {
		service, api, _ := runPlantstoreEnv(t, tracingEnv(fmt.Sprintf("http://127.0.0.1:%d", httpPort)),
			bin, dir, "plantstore-http", catalog, args...)
		gateway, _ := startNginx(t, nginx, dir, conf, api)
		token, _ := provider.token(t, "plantstore-ci", "plants:read")
		tokens = append(tokens, token)

		// a) the caller's trace continued.
		checkCallerTrace(t, gateway, token, "trace-parent", sinkOut, service.log)

		// b) no traceparent: a trace of plantstore's own.
		if got := get(t, gateway, token, "trace-root"); got.status != 200 {
			t.Errorf("GET /plants via nginx without traceparent: got %d %s, want 200", got.status, got.body)
		}
		entry := plantstoreLine(t, service.log, "trace-root")
		rootTrace, _ := entry["trace_id"].(string)
		if rootTrace == "" {
			t.Errorf("access line of the request without traceparent has no trace_id: %v", entry)
		} else {
			root := waitSpan(t, sinkOut, "the server span of trace "+rootTrace, func(s otlpSpan) bool {
				return s.Kind == spanKindServer && s.TraceID == rootTrace
			})
			if root.ParentSpanID != "" || root.SpanID != entry["span_id"] || root.Attrs["plantstore.request_id"] != "trace-root" {
				t.Errorf("server span %v of the request without traceparent: want a root span %v, request id trace-root", root, entry["span_id"])
			}
		}

		// c) no token: 401, traced as well.
		if got := get(t, gateway, "", "trace-401"); got.status != 401 {
			t.Errorf("GET /plants via nginx without a token: got %d %s, want 401", got.status, got.body)
		}
		waitSpan(t, sinkOut, "a server span with http.response.status_code 401", func(s otlpSpan) bool {
			return s.Kind == spanKindServer && s.Attrs["http.response.status_code"] == "401"
		})

		// The keys fetched at start, by discovery.
		waitSpan(t, sinkOut, "a client span auth.jwks.fetch with http.response.status_code 200", func(s otlpSpan) bool {
			return s.Name == "auth.jwks.fetch" && s.Kind == spanKindClient && s.Attrs["http.response.status_code"] == "200"
		})
		waitSpan(t, sinkOut, "a span auth.oidc.discovery", func(s otlpSpan) bool {
			return s.Name == "auth.oidc.discovery"
		})

		noSecrets(t, sinkOut, tokens...)
	})

	t.Run("over OTLP/gRPC", func(t *testing.T) {
		// Its own directory: a second nginx of the same conf needs its
		// own prefix.
		dir := filepath.Join(dir, "grpc")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		service, api, _ := runPlantstoreEnv(t, tracingEnv(fmt.Sprintf("http://127.0.0.1:%d", grpcPort), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"),
			bin, dir, "plantstore-grpc", catalog, args...)
		gateway, _ := startNginx(t, nginx, dir, conf, api)
		token, _ := provider.token(t, "plantstore-ci", "plants:read")
		tokens = append(tokens, token)
		// The sink's gRPC port speaks only gRPC: a span of this trace
		// came over OTLP/gRPC.
		checkCallerTrace(t, gateway, token, "trace-grpc", sinkOut, service.log)
		noSecrets(t, sinkOut, tokens...)
	})
}
