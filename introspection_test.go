package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestServeIntrospection runs the service with the -jwt-introspection
// flags and no key source: an opaque token the endpoint says is active is
// served, one it says is not is 401, /readyz is 200 whether the endpoint
// answers or not, and neither the token nor the client's secret reaches
// the log.
func TestServeIntrospection(t *testing.T) {
	const secret = "intro-s3cret-value"
	const token = "opaque-token-of-alice-0123456789"
	var calls atomic.Int64
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		id, pass, ok := r.BasicAuth()
		if !ok || id != "plantstore" || pass != secret || r.ParseForm() != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		answer := map[string]any{"active": false}
		if r.PostForm.Get("token") == token {
			answer = map[string]any{"active": true, "sub": "alice", "exp": time.Now().Add(time.Hour).Unix(), "groups": []string{"staff"}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer)
	}))
	t.Cleanup(idp.Close)
	in := startServe(t, nil, "-jwt-introspection", "opaque", "-jwt-introspection-url", idp.URL,
		"-jwt-introspection-client-id", "plantstore", "-jwt-introspection-secret-file", writeTemp(t, secret+"\n"), "-log-level", "debug")
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	if status, body, _ := get(t, in.api+"/plants", token); status != http.StatusOK {
		t.Errorf("active opaque token: %d %s; want 200", status, body)
	}
	if status, _, h := get(t, in.api+"/plants", "another-opaque-token"); status != http.StatusUnauthorized || !strings.Contains(h.Get("WWW-Authenticate"), "token not active") {
		t.Errorf("inactive opaque token: %d %q; want 401 inactive", status, h.Get("WWW-Authenticate"))
	}
	idp.Close()
	if status, _, h := get(t, in.api+"/plants", "yet-another-opaque-token"); status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Errorf("endpoint down: %d Retry-After %q; want 503 with Retry-After", status, h.Get("Retry-After"))
	}
	if status, _, _ := get(t, in.api+"/plants", token); status != http.StatusOK {
		t.Errorf("cached token with the endpoint down: %d; want 200", status)
	}
	waitFor(t, patience, "/readyz 200 with the endpoint down", answers(in.admin+"/readyz", http.StatusOK))
	waitFor(t, patience, "4 access lines", func() bool { return strings.Count(in.stderr.String(), `"msg":"request"`) >= 4 })
	logs := in.stderr.String()
	if !strings.Contains(logs, `"sub":"alice","introspected":true`) {
		t.Errorf("no access line says introspected:\n%s", logs)
	}
	_, metrics, _ := get(t, in.admin+"/metrics", "")
	for _, want := range []string{`plantstore_introspection_requests_total{issuer="default",result="active"} 1`, `plantstore_introspection_requests_total{issuer="default",result="inactive"} 1`, `plantstore_introspection_requests_total{issuer="default",result="error"} 1`, "plantstore_introspection_duration_seconds_count"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, s := range []string{secret, token} {
		if strings.Contains(logs, s) || strings.Contains(string(metrics), s) {
			t.Errorf("the log or /metrics holds %q:\n%s", s, logs)
		}
	}
}
