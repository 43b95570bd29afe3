package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/plantstore/plantstore/auth/authtest"
)

// otlpReceiver is an OTLP/HTTP trace endpoint (protobuf encoding, the
// exporter's default) that keeps what it receives.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	raw   [][]byte
	spans []*tracepb.Span
	res   map[*tracepb.Span]map[string]string // resource attributes of each span
	got   chan struct{}                       // a value after each export
}

func newOTLPReceiver(t testing.TB) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{res: map[*tracepb.Span]map[string]string{}, got: make(chan struct{}, 1)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &msg)
		}
		if req.URL.Path != "/v1/traces" || err != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.raw = append(r.raw, body)
		for _, rs := range msg.ResourceSpans {
			res := map[string]string{}
			for _, kv := range rs.GetResource().GetAttributes() {
				res[kv.Key] = kv.GetValue().GetStringValue()
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					r.spans = append(r.spans, s)
					r.res[s] = res
				}
			}
		}
		r.mu.Unlock()
		select {
		case r.got <- struct{}{}:
		default:
		}
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

// has returns a condition for waitFor: a span that match accepts has
// arrived, and is put in *found.
func (r *otlpReceiver) has(found **tracepb.Span, match func(*tracepb.Span) bool) func() bool {
	return func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, s := range r.spans {
			if match(s) {
				*found = s
				return true
			}
		}
		return false
	}
}

func otlpAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			if v, ok := kv.Value.Value.(*commonpb.AnyValue_IntValue); ok {
				return strconv.FormatInt(v.IntValue, 10)
			}
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// TestTracingExport runs the service with the standard OTEL_* variables
// pointing at a real OTLP/HTTP endpoint and finds its spans: the server
// span under the caller's traceparent, with the ids the access line
// carries, and the key fetch spans with the JWKS URL's secrets redacted.
// No export carries the token or a URL secret.
func TestTracingExport(t *testing.T) {
	recv := newOTLPReceiver(t)
	k := authtest.NewKey(t, "ES256")
	idp := authtest.NewServer(t, authtest.JWKS(t, k))
	jwksURL := strings.Replace(idp.URL, "http://", "http://idp-user:idp-pass@", 1) + "/jwks?api_key=idp-api-key"
	c := startChild(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": recv.URL,
		"OTEL_BSP_SCHEDULE_DELAY":     "20",
	}, "-jwt-jwks-url", jwksURL, "-shutdown-delay", "0s")
	waitFor(t, patience, "/readyz 200", answers(c.admin+"/readyz", http.StatusOK))

	tok := authtest.Token(t, k, nil, authtest.Claims(map[string]any{"sub": "alice", "groups": []string{"gardeners"}}))
	req, _ := http.NewRequest(http.MethodGet, c.api+"/plants", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	req.Header.Set("X-Request-ID", "traced-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /plants: %d", resp.StatusCode)
	}

	var server, fetch *tracepb.Span
	waitFor(t, patience, "the server span of traced-1", recv.has(&server, func(s *tracepb.Span) bool {
		return s.Kind == tracepb.Span_SPAN_KIND_SERVER && otlpAttr(s, "plantstore.request_id") == "traced-1"
	}))
	if got := hex.EncodeToString(server.TraceId); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("server span trace id %s, want the caller's", got)
	}
	if got := hex.EncodeToString(server.ParentSpanId); got != "00f067aa0ba902b7" {
		t.Errorf("server span parent %s, want the caller's span", got)
	}
	if server.Name != "GET /plants" || otlpAttr(server, "http.route") != "/plants" || otlpAttr(server, "http.response.status_code") != "200" {
		t.Errorf("server span %q route %q status %q", server.Name, otlpAttr(server, "http.route"), otlpAttr(server, "http.response.status_code"))
	}
	recv.mu.Lock()
	res := recv.res[server]
	recv.mu.Unlock()
	if res["service.name"] != "plantstore" || res["service.version"] == "" {
		t.Errorf("resource %v, want service.name plantstore and a service.version", res)
	}
	line := c.stderr.WaitLine(t, "access line of traced-1", func(l map[string]any) bool { return l["request_id"] == "traced-1" })
	if line["trace_id"] != hex.EncodeToString(server.TraceId) || line["span_id"] != hex.EncodeToString(server.SpanId) {
		t.Errorf("access line trace_id %v span_id %v, want the server span's", line["trace_id"], line["span_id"])
	}

	waitFor(t, patience, "the JWKS fetch span", recv.has(&fetch, func(s *tracepb.Span) bool { return s.Name == "auth.jwks.fetch" }))
	if want := strings.Replace(idp.URL, "http://", "http://idp-user:xxxxx@", 1) + "/jwks?xxxxx"; otlpAttr(fetch, "url.full") != want {
		t.Errorf("auth.jwks.fetch url.full = %q, want %q", otlpAttr(fetch, "url.full"), want)
	}

	c.signal(t, syscall.SIGTERM)
	if code := c.wait(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	recv.mu.Lock()
	all := bytes.Join(recv.raw, nil)
	recv.mu.Unlock()
	for _, secret := range []string{tok, strings.Split(tok, ".")[2], "idp-pass", "idp-api-key", "alice", "Bearer"} {
		if bytes.Contains(all, []byte(secret)) {
			t.Errorf("the exported spans carry %q", secret)
		}
	}
}

// TestTracingCollectorDown runs the service against a collector that
// never answers: every request is still served, and the exit is not held
// longer than the shutdown timeout.
func TestTracingCollectorDown(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	t.Cleanup(func() { close(release); hung.Close() })
	k := authtest.NewKey(t, "ES256")
	c := startChild(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": hung.URL,
		"OTEL_EXPORTER_OTLP_TIMEOUT":  "60000",
		"OTEL_BSP_SCHEDULE_DELAY":     "1",
		"OTEL_BSP_MAX_QUEUE_SIZE":     "16",
	}, "-jwt-key-file", authtest.WriteJWKS(t, k), "-shutdown-delay", "0s", "-shutdown-timeout", "1s")
	tok := authtest.Token(t, k, nil, authtest.Claims(nil))
	for i := range 300 {
		if code, _, _ := get(t, c.api+"/plants", tok); code != http.StatusOK {
			t.Fatalf("request %d with the collector hung: %d", i, code)
		}
	}
	c.signal(t, syscall.SIGTERM)
	if code := c.wait(t); code != 0 {
		t.Fatalf("exit %d; log:\n%s", code, c.stderr)
	}
	c.stderr.WaitLine(t, "the dropped spans warning", func(l map[string]any) bool {
		return l["msg"] == "tracing: spans still queued at exit were dropped"
	})
}

// TestTracingBadVariable checks that an OTEL_* value the SDK does not know
// stops the start as a usage error naming it.
func TestTracingBadVariable(t *testing.T) {
	argv, _ := json.Marshal([]string{"serve", "-dev", "-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0"})
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{childArgsVar + "=" + string(argv), "OTEL_TRACES_EXPORTER=jeager"}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), `OTEL_TRACES_EXPORTER="jeager"`) {
		t.Errorf("serve with OTEL_TRACES_EXPORTER=jeager: %v, output:\n%s\nwant exit 2 naming the variable", err, out)
	}
}
