package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// kubeLine is a line of /readyz?verbose as the Kubernetes API server
// prints it: [+] or [-], the check's name, a space and the rest.
var kubeLine = regexp.MustCompile(`^\[[+-]\][a-z][a-z0-9:._-]* \S.*$`)

// closedPort returns a loopback address that nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestServeReadyzVerbose runs the service in the states readiness tells
// apart and reads /readyz?verbose: one line per check in the Kubernetes
// format (each issuer's keys, the store, Redis when set, draining), then
// "readyz check passed" or "readyz check failed", with the status of
// /readyz itself, whose body stays "ready" or the reason; /livez and
// /healthz answer "ok" alike. A Redis that does not answer is said on its
// line and fails nothing; its password shows nowhere.
func TestServeReadyzVerbose(t *testing.T) {
	dir := t.TempDir()
	_, keyFile := mintTestToken(t, "EdDSA", "-sub", "alice")
	issuers := filepath.Join(dir, "issuers.yaml")
	// customers' JWKS is at an address nothing answers: its keys never
	// come, and readiness names it.
	if err := os.WriteFile(issuers, []byte(fmt.Sprintf(`issuers:
  - name: staff
    issuer: https://sso.example/realms/staff
    key_file: %s
  - name: customers
    issuer: https://sso.example/realms/customers
    jwks_url: http://%s/jwks
`, keyFile, closedPort(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	redisURL := "redis://:s3cret-pw@" + closedPort(t) + "/0"

	tests := []struct {
		name      string
		args      []string
		drain     bool
		status    int
		plain     string // the body of /readyz, a substring
		lines     []string
		forbidden string
	}{
		{
			name: "one issuer, ready", args: []string{"-dev"}, status: http.StatusOK, plain: "ready",
			lines: []string{"[+]keys ok", "[+]store ok", "[+]draining ok", "readyz check passed"},
		},
		{
			name: "an issuer without keys", args: []string{"-jwt-issuers-file", issuers}, status: http.StatusServiceUnavailable,
			plain: "keys: issuer customers:",
			lines: []string{"[+]issuer:staff ok", "[-]issuer:customers ", "[+]store ok", "[+]draining ok", "readyz check failed"},
		},
		{
			name: "Redis down", args: []string{"-jwt-key-file", keyFile, "-redis-url", redisURL, "-redis-timeout", "100ms"},
			status: http.StatusOK, plain: "ready", forbidden: "s3cret-pw",
			lines: []string{"[+]keys ok", "[+]store ok", "[-]redis unavailable: this replica uses its own replay cache and rate limit", "[+]draining ok", "readyz check passed"},
		},
		{
			name: "draining", args: []string{"-dev", "-shutdown-delay", "2s"}, drain: true, status: http.StatusServiceUnavailable, plain: "draining",
			lines: []string{"[+]keys ok", "[+]store ok", "[-]draining shutting down", "readyz check failed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := startServe(t, nil, tt.args...)
			waitFor(t, patience, "/livez 200", answers(in.admin+"/livez", http.StatusOK))
			if tt.drain {
				waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
				in.stop()
				waitFor(t, patience, "/readyz 503", answers(in.admin+"/readyz", http.StatusServiceUnavailable))
			}
			// Wait for the state the row is about: the first key fetch
			// fails at once, but is still a fetch to wait for.
			waitFor(t, patience, fmt.Sprintf("/readyz %d", tt.status), answers(in.admin+"/readyz", tt.status))
			status, body, h := get(t, in.admin+"/readyz?verbose", "")
			plainStatus, plain, _ := get(t, in.admin+"/readyz", "")
			if status != tt.status || plainStatus != tt.status {
				t.Errorf("/readyz?verbose %d, /readyz %d; want both %d\n%s", status, plainStatus, tt.status, body)
			}
			if !strings.Contains(string(plain), tt.plain) || strings.Contains(string(plain), "[+]") {
				t.Errorf("/readyz body %q; want the plain answer, with %q", plain, tt.plain)
			}
			if ct := h.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("/readyz?verbose Content-Type %q; want text/plain; charset=utf-8", ct)
			}
			if status != http.StatusOK && h.Get("Retry-After") != "5" {
				t.Errorf("/readyz?verbose %d without Retry-After: 5", status)
			}
			t.Logf("/readyz?verbose %d:\n%s", status, body)
			lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
			if len(lines) != len(tt.lines) {
				t.Fatalf("/readyz?verbose:\n%s\nwant %d lines starting:\n%s", body, len(tt.lines), strings.Join(tt.lines, "\n"))
			}
			for i, want := range tt.lines {
				if !strings.HasPrefix(lines[i], want) {
					t.Errorf("line %d %q; want it to start with %q", i+1, lines[i], want)
				}
				if i < len(lines)-1 && !kubeLine.MatchString(lines[i]) {
					t.Errorf("line %d %q is not [+]name ... or [-]name ...", i+1, lines[i])
				}
			}
			if tt.forbidden != "" && strings.Contains(string(body)+string(plain)+in.stderr.String(), tt.forbidden) {
				t.Errorf("%q shows in /readyz or the log", tt.forbidden)
			}
			for _, path := range []string{"/livez", "/healthz"} {
				if status, body, _ := get(t, in.admin+path, ""); status != http.StatusOK || string(body) != "ok" {
					t.Errorf("%s = %d %q; want 200 ok", path, status, body)
				}
			}
		})
	}
}
