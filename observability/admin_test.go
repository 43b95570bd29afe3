package observability_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/observability"
)

func TestAdminHandler(t *testing.T) {
	openapi := []byte(`{"openapi":"3.1.0"}`)
	ready := func(context.Context) error { return nil }
	notReady := func(context.Context) error { return errors.New("keys not loaded yet") }

	tests := []struct {
		name       string
		opts       observability.AdminOptions
		method     string
		path       string
		wantStatus int
		wantType   string // prefix of Content-Type
		wantBody   string // substring
		wantHeader map[string]string
	}{
		{"healthz", observability.AdminOptions{}, "GET", "/healthz", 200, "text/plain", "ok", nil},
		{"ready", observability.AdminOptions{Ready: ready}, "GET", "/readyz", 200, "text/plain", "ready", nil},
		{"ready without check", observability.AdminOptions{}, "GET", "/readyz", 200, "text/plain", "ready", nil},
		{"not ready", observability.AdminOptions{Ready: notReady}, "GET", "/readyz", 503, "text/plain", "keys not loaded yet", map[string]string{"Retry-After": "5"}},
		{"openapi", observability.AdminOptions{OpenAPI: openapi}, "GET", "/openapi.json", 200, "application/json", `"openapi":"3.1.0"`, nil},
		{"openapi absent", observability.AdminOptions{}, "GET", "/openapi.json", 404, "text/plain", "", nil},
		{"metrics", observability.AdminOptions{Registry: observability.NewRegistry("v1", "abc")}, "GET", "/metrics", 200, "text/plain; version=0.0.4", `plantstore_build_info{goversion=`, nil},
		{"unknown path", observability.AdminOptions{}, "GET", "/plants", 404, "text/plain", "", nil},
		{"root", observability.AdminOptions{}, "GET", "/", 404, "text/plain", "", nil},
		{"pprof off", observability.AdminOptions{}, "GET", "/debug/pprof/", 404, "text/plain", "", nil},
		{"pprof profile off", observability.AdminOptions{}, "GET", "/debug/pprof/heap", 404, "text/plain", "", nil},
		{"pprof index on", observability.AdminOptions{Pprof: true}, "GET", "/debug/pprof/", 200, "text/html", "goroutine", nil},
		{"pprof heap on", observability.AdminOptions{Pprof: true}, "GET", "/debug/pprof/heap?debug=1", 200, "text/plain", "heap profile", nil},
		{"pprof cmdline on", observability.AdminOptions{Pprof: true}, "GET", "/debug/pprof/cmdline", 200, "text/plain", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, observability.AdminHandler(tt.opts))
			resp, body := do(t, newRequest(t, tt.method, srv.URL+tt.path))
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("%s %s = %d %q, want %d", tt.method, tt.path, resp.StatusCode, body, tt.wantStatus)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tt.wantType) {
				t.Errorf("%s %s Content-Type = %q, want %q…", tt.method, tt.path, ct, tt.wantType)
			}
			if !strings.Contains(body, tt.wantBody) {
				t.Errorf("%s %s body = %q, want it to contain %q", tt.method, tt.path, body, tt.wantBody)
			}
			for k, v := range tt.wantHeader {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s %s %s = %q, want %q", tt.method, tt.path, k, got, v)
				}
			}
		})
	}
}

func TestAdminProbeBodies(t *testing.T) {
	srv := startServer(t, observability.AdminHandler(observability.AdminOptions{}))
	for _, tt := range []struct{ path, want string }{{"/healthz", "ok"}, {"/readyz", "ready"}} {
		if _, body := do(t, newRequest(t, http.MethodGet, srv.URL+tt.path)); body != tt.want {
			t.Errorf("GET %s body = %q, want %q", tt.path, body, tt.want)
		}
	}
}

func TestReadyzPassesContext(t *testing.T) {
	var hasDeadline bool
	srv := startServer(t, observability.AdminHandler(observability.AdminOptions{
		Ready: func(ctx context.Context) error {
			_, hasDeadline = ctx.Deadline()
			return ctx.Err()
		},
	}))
	if resp, body := do(t, newRequest(t, http.MethodGet, srv.URL+"/readyz")); resp.StatusCode != 200 {
		t.Fatalf("GET /readyz = %d %q, want 200", resp.StatusCode, body)
	}
	if !hasDeadline {
		t.Error("readiness check ran without a deadline, want a bounded context")
	}
}

// TestMetricsPassPromtool lints the /metrics output after some API traffic
// with promtool check metrics.
func TestMetricsPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("TEST_REQUIRE_TOOLS") == "1" {
			t.Fatalf("promtool not found and TEST_REQUIRE_TOOLS=1: %v", err)
		}
		t.Skipf("promtool not found: %v", err)
	}
	reg := observability.NewRegistry("v1.0.0", "0123abcd")
	api := startServer(t, newEngine(nil, reg, nil))
	for _, p := range []string{"/plants", "/plants", "/nope", "/plants?limit=1"} {
		do(t, newRequest(t, http.MethodGet, api.URL+p))
	}
	do(t, newRequest(t, http.MethodPost, api.URL+"/plants"))

	admin := startServer(t, observability.AdminHandler(observability.AdminOptions{Registry: reg}))
	resp, body := do(t, newRequest(t, http.MethodGet, admin.URL+"/metrics"))
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics = %d", resp.StatusCode)
	}
	for _, name := range []string{"plantstore_http_requests_total", "plantstore_http_request_duration_seconds_bucket", "plantstore_http_requests_in_flight", "plantstore_build_info", "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics has no %s", name)
		}
	}

	cmd := exec.CommandContext(t.Context(), promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
}
