package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plantstore/plantstore/observability/testenv"
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

// TestIntrospectionOIDCProvider runs a real provider, oidc-provider
// (deploy/gateway/introspection.mjs), issuing opaque access tokens with
// introspection on, and the service as its confidential client
// plantstore, with the endpoint from discovery and signed answers (RFC
// 9701) verified with the provider's keys: a token of the provider passes;
// once it is revoked at the provider, it is refused when its cached answer
// expires.
func TestIntrospectionOIDCProvider(t *testing.T) {
	testenv.Soak(t)
	if _, err := exec.LookPath("node"); err != nil {
		requireTool(t, "node: apt-get install nodejs")
	}
	gateway, err := filepath.Abs("deploy/gateway")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(gateway, "node_modules", "oidc-provider")); err != nil {
		requireTool(t, "deploy/gateway/node_modules/oidc-provider: npm ci --prefix deploy/gateway")
	}
	dir := t.TempDir()
	key, err := exec.CommandContext(t.Context(), "node", filepath.Join(gateway, "oidc.mjs"), "genkey", "op-1").Output()
	if err != nil {
		t.Fatalf("genkey: %v", err)
	}
	keysPath := filepath.Join(dir, "keys.json")
	if err := os.WriteFile(keysPath, []byte(`{"keys":[`+strings.TrimSpace(string(key))+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	logFile, err := os.Create(filepath.Join(dir, "provider.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join(gateway, "introspection.mjs"), strconv.Itoa(port), keysPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("provider log:\n%s", b)
		}
	})
	issuer := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitFor(t, patience, "the provider's discovery", answers(issuer+"/.well-known/openid-configuration", http.StatusOK))

	in := startServe(t, nil, "-jwt-issuer", issuer, "-jwt-audience", "plantstore", "-jwt-required-scope", "plants:read",
		"-jwt-introspection", "opaque", "-jwt-introspection-client-id", "plantstore",
		"-jwt-introspection-secret-file", writeTemp(t, "ci-secret\n"), "-jwt-introspection-cache", "1s", "-jwt-introspection-jwt")
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))

	token := providerToken(t, issuer)
	if strings.Count(token, ".") == 2 {
		t.Fatalf("the provider issued a JWT %.20s…; want an opaque token", token)
	}
	if status, body, h := get(t, in.api+"/plants", token); status != http.StatusOK {
		t.Fatalf("the provider's opaque token: %d %s %q; want 200", status, body, h.Get("WWW-Authenticate"))
	}
	waitFor(t, patience, "the access line", func() bool { return strings.Contains(in.stderr.String(), `"sub":"plantstore-ci","introspected":true`) })

	// Revoked at the provider: refused once the cached answer expires.
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, issuer+"/token/revocation", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("plantstore-ci", "ci-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revocation: %d", resp.StatusCode)
	}
	revoked := time.Now()
	waitFor(t, patience, "the revoked token refused", func() bool {
		status, _, h := get(t, in.api+"/plants", token)
		return status == http.StatusUnauthorized && strings.Contains(h.Get("WWW-Authenticate"), "token not active")
	})
	if d := time.Since(revoked); d > 3*time.Second {
		t.Errorf("the revoked token passed for %s; want about the cache's 1s", d)
	}
	if status, _, _ := get(t, in.api+"/plants", providerToken(t, issuer)); status != http.StatusOK {
		t.Errorf("a fresh token after the revocation: %d; want 200", status)
	}
	_, metrics, _ := get(t, in.admin+"/metrics", "")
	if !strings.Contains(string(metrics), `plantstore_introspection_requests_total{issuer="default",result="active"} 2`) {
		t.Errorf("/metrics: want 2 active answers:\n%s", grepLines(string(metrics), "plantstore_introspection_requests_total"))
	}
}

// providerToken gets an access token of plantstore-ci from the provider at
// issuer by client_credentials.
func providerToken(t testing.TB, issuer string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, issuer+"/token",
		strings.NewReader(url.Values{"grant_type": {"client_credentials"}, "scope": {"plants:read"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("plantstore-ci", "ci-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.AccessToken == "" {
		t.Fatalf("token: %d %v", resp.StatusCode, err)
	}
	return body.AccessToken
}

// requireTool skips t for want of what, or fails it under
// TEST_REQUIRE_TOOLS=1.
func requireTool(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("TEST_REQUIRE_TOOLS") == "1" {
		t.Fatalf("%s is required (TEST_REQUIRE_TOOLS=1)", what)
	}
	testenv.Skip(t, "no "+what)
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
