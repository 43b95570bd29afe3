package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/dpop"
)

// TestShutdownDrains starts slow responses, stops the service and checks
// that /readyz turned 503 during the delay and that every in-flight
// response completed.
func TestShutdownDrains(t *testing.T) {
	data := writeOpenCatalog(t, 20000, "t")
	token, keyFile := mintTestToken(t, "EdDSA", "-sub", "drain")
	in := startServe(t, nil, "-jwt-key-file", keyFile, "-data", data, "-shutdown-delay", "300ms", "-shutdown-timeout", "10s")
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))

	// Each client reads its response slowly, so it is still in flight when
	// the listener closes.
	const clients = 8
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	started := make(chan struct{}, clients)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, in.api+"/plants", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				started <- struct{}{}
				return
			}
			defer resp.Body.Close()
			started <- struct{}{}
			var n int
			buf := make([]byte, 4096)
			for {
				k, err := resp.Body.Read(buf)
				n += k
				if err == io.EOF {
					break
				}
				if err != nil {
					errs <- fmt.Errorf("read after %d bytes: %w", n, err)
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
			if resp.StatusCode != http.StatusOK || n < 20000*20 {
				errs <- fmt.Errorf("status %d, %d bytes", resp.StatusCode, n)
			}
		}()
	}
	for range clients {
		<-started
	}
	in.stop()
	waitFor(t, patience, "/readyz 503", answers(in.admin+"/readyz", http.StatusServiceUnavailable))
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("in-flight request failed during shutdown: %v", err)
	}
	select {
	case err := <-in.done:
		in.done <- err // for the cleanup of startServe
		if err != nil {
			t.Errorf("run after shutdown = %v, want nil (exit 0)", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("service did not stop")
	}
}

// writeOpenCatalog writes a catalog of n plants readable by everyone, each
// with the given tag, and returns its path.
func writeOpenCatalog(t testing.TB, n int, tag string) string {
	t.Helper()
	var sb strings.Builder
	sb.WriteString("[")
	for i := range n {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"name":"Plant %06d","tag":%q,"readers":["*"]}`, i, tag)
	}
	sb.WriteString("]")
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReloadOnSIGHUP swaps the catalog file and sends SIGHUP: a good file
// replaces the catalog, a bad one is refused while the old one serves.
func TestReloadOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "catalog.json")
	write := func(s string) {
		t.Helper()
		tmp := data + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, data); err != nil {
			t.Fatal(err)
		}
	}
	write(`[{"name":"Aloe","readers":["*"]}]`)
	token, keyFile := mintTestToken(t, "ES256", "-sub", "reloader")
	in := startServe(t, nil, "-jwt-key-file", keyFile, "-data", data)
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	list := func() string {
		status, body, _ := get(t, in.api+"/plants", token)
		if status != http.StatusOK {
			t.Fatalf("GET /plants = %d %s", status, body)
		}
		return string(body)
	}
	if got := list(); got != `[{"name":"Aloe"}]` {
		t.Fatalf("before reload: %s", got)
	}
	hup := func() {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	write(`[{"name":"Basil","tag":"herb","readers":["*"]}]`)
	hup()
	waitFor(t, patience, "the new catalog to serve", func() bool { return list() == `[{"name":"Basil","tag":"herb"}]` })
	// The key file, unchanged, is read again and says so, by name.
	in.stderr.WaitLine(t, "the key file's SIGHUP line", func(l map[string]any) bool {
		return l["msg"] == "keys unchanged" && l["source"] != nil && strings.Contains(l["source"].(string), keyFile)
	})

	write(`[{"name":"Cactus","readers":["nobody"]}]`)
	hup()
	waitFor(t, patience, "the refusal to be logged", func() bool { return strings.Contains(in.stderr.String(), "catalog reload refused") })
	if got := list(); got != `[{"name":"Basil","tag":"herb"}]` {
		t.Errorf("after a bad reload: %s, want the previous catalog", got)
	}
}

// TestTokenNeverLogged runs requests at debug level and checks that no log
// line holds the token or any part of its signature.
func TestTokenNeverLogged(t *testing.T) {
	token, keyFile := mintTestToken(t, "RS256", "-sub", "secretive")
	in := startServe(t, nil, "-jwt-key-file", keyFile, "-log-level", "debug")
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	for _, tok := range []string{token, token + "x", strings.ToUpper(token)} {
		get(t, in.api+"/plants", tok)
		get(t, in.api+"/plants?limit=x", tok)
		get(t, in.api+"/nope", tok)
	}
	waitFor(t, patience, "9 access log lines", func() bool { return strings.Count(in.stderr.String(), `"msg":"request"`) >= 9 })
	logs := in.stderr.String()
	sig := token[strings.LastIndex(token, ".")+1:]
	for _, secret := range []string{token, sig, strings.ToUpper(sig), token[:strings.Index(token, ".")]} {
		if strings.Contains(logs, secret) {
			t.Fatalf("the log holds a token part %.12s…:\n%s", secret, logs)
		}
	}
	if !strings.Contains(logs, `"sub":"secretive"`) {
		t.Errorf("the access log has no sub for the valid token:\n%s", logs)
	}
}

// TestPostgresDownAtStart starts the service against a database that does
// not answer: it runs, /readyz is 503, and requests get 503 with
// Retry-After in the Error shape.
func TestPostgresDownAtStart(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	closed.Close()
	secret := hmacSecretFile(t)
	in := startServe(t, nil, "-jwt-hmac-secret-file", secret, "-database-url", "postgres://plantstore:s3cret-pass@"+addr+"/test?sslmode=disable", "-db-connect-timeout", "200ms")
	waitFor(t, patience, "/readyz 503", answers(in.admin+"/readyz", http.StatusServiceUnavailable))
	token := hmacToken(t, secret, "alice")
	status, body, header := get(t, in.api+"/plants", token)
	if status != http.StatusServiceUnavailable || header.Get("Retry-After") == "" || header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /plants with the database down = %d %v %s, want 503 with Retry-After", status, header, body)
	}
	var e struct {
		Error   int    `json:"error"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error != 503 || e.Message == "" {
		t.Errorf("body %s: want the Error shape with 503", body)
	}
	waitFor(t, patience, "the access log line", func() bool { return strings.Count(in.stderr.String(), `"msg":"request"`) >= 1 })
	for _, leak := range []string{"s3cret-pass", "SELECT"} {
		if strings.Contains(string(body), leak) || strings.Contains(in.stderr.String(), leak) {
			t.Errorf("%q appears in the response or the log", leak)
		}
	}
}

// TestKeysGauge checks that plantstore_jwks_keys counts the static key
// sources too.
func TestKeysGauge(t *testing.T) {
	in := startServe(t, nil, "-jwt-key-file", edKeyFile(t), "-jwt-hmac-secret-file", hmacSecretFile(t))
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	_, body, _ := get(t, in.admin+"/metrics", "")
	if !regexp.MustCompile(`(?m)^plantstore_jwks_keys{issuer="default"} 2$`).Match(body) {
		t.Errorf("with a key file and an HMAC secret, /metrics has no \"plantstore_jwks_keys{issuer=\"default\"} 2\":\n%s", regexp.MustCompile(`(?m)^plantstore_jwks_keys.*$`).Find(body))
	}
}

// TestOptionsStar checks that "OPTIONS *" gets the API's 404 in the Error
// shape, not net/http's bare 200.
func TestOptionsStar(t *testing.T) {
	in := startServe(t, nil, "-dev")
	conn, err := net.Dial("tcp", strings.TrimPrefix(in.api, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(body), `"error":404`) {
		t.Errorf("OPTIONS * = %d %q %s, want 404 in the Error shape", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

// TestShutdownTimeoutStillExitsClean stops the service while a client
// holds a response it never reads: after -shutdown-timeout the connection is
// cut and run still returns nil (exit 0), as a requested stop should.
func TestShutdownTimeoutStillExitsClean(t *testing.T) {
	data := writeOpenCatalog(t, 100000, "a tag long enough to fill buffers")
	token, keyFile := mintTestToken(t, "EdDSA", "-sub", "stuck")
	in := startServe(t, nil, "-jwt-key-file", keyFile, "-data", data, "-shutdown-timeout", "300ms")
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	conn, err := net.Dial("tcp", strings.TrimPrefix(in.api, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", token)
	buf := make([]byte, 1)
	if _, err := conn.Read(buf); err != nil { // the response has started; now stop reading
		t.Fatal(err)
	}
	in.stop()
	select {
	case err := <-in.done:
		if err != nil {
			t.Errorf("run after a shutdown that had to cut a request = %v, want nil (exit 0)", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("service did not stop")
	}
	in.done <- nil // for the cleanup of startServe
	if !strings.Contains(in.stderr.String(), "cut") {
		t.Errorf("no warning about the cut request in the log:\n%s", in.stderr)
	}
}

// TestMethodNotAllowedRoute checks that a 405 on /plants is counted under
// its route template, and an unknown path under "unmatched".
func TestMethodNotAllowedRoute(t *testing.T) {
	in := startServe(t, nil, "-dev")
	req, _ := http.NewRequest(http.MethodPost, in.api+"/plants", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	get(t, in.api+"/nope", "")
	_, body, _ := get(t, in.admin+"/metrics", "")
	for _, want := range []string{
		`plantstore_http_requests_total{code="405",method="POST",route="/plants"} 1`,
		`plantstore_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// hmacToken returns a token for sub signed with the HMAC secret file, by
// the token command.
func hmacToken(t testing.TB, secret, sub string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), append([]string{"token", "-hmac-secret-file", secret, "-sub", sub}, args...), nil, nil, &out, io.Discard); err != nil {
		t.Fatalf("token -sub %s: %v", sub, err)
	}
	return strings.TrimSpace(out.String())
}

// TestSecretsRedacted configures a JWKS URL and a DSN that carry secrets in
// their passwords and queries, both unreachable, and checks that no
// response, /readyz answer, log line or metric shows any of them; the user
// names stay, to name the role or account an error is about.
func TestSecretsRedacted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	secrets := []string{"jwks-pass", "jwks-api-key", "db-pass", "db-app-secret"}
	in := startServe(t, nil,
		"-jwt-jwks-url", "http://jwks-user:jwks-pass@"+closed+"/jwks?api_key=jwks-api-key",
		"-database-url", "postgres://db-user:db-pass@"+closed+"/plants?sslmode=disable&application_name=db-app-secret",
		"-db-connect-timeout", "200ms", "-log-level", "debug")
	var seen strings.Builder
	for range 3 {
		_, body, h := get(t, in.admin+"/readyz", "")
		fmt.Fprintf(&seen, "%s %v\n", body, h)
	}
	in.stderr.WaitLine(t, "for a failed JWKS fetch", func(l map[string]any) bool { return l["msg"] == "jwks fetch failed" })
	for _, path := range []string{"/plants", "/plants?limit=1", "/nope"} {
		_, body, h := get(t, in.api+path, "eyJhbGciOiJFUzI1NiJ9.e30.c2ln")
		fmt.Fprintf(&seen, "%s %v\n", body, h)
	}
	_, metrics, _ := get(t, in.admin+"/metrics", "")
	seen.Write(metrics)
	in.stop()
	<-in.done
	in.done <- nil
	seen.WriteString(in.stderr.String())
	seen.WriteString(in.stdout.String())
	for _, s := range secrets {
		if strings.Contains(seen.String(), s) {
			t.Errorf("%q appears in what the service showed:\n%s", s, seen.String())
		}
	}
	if !strings.Contains(seen.String(), "jwks-user:xxxxx@"+closed) || !strings.Contains(seen.String(), "db-user") {
		t.Errorf("the redacted JWKS URL appears nowhere; the test shows nothing:\n%s", seen.String())
	}
}

// TestSecondSignalForcesExit sends SIGTERM to a service in its own process:
// /readyz turns 503 and the API keeps serving through the shutdown delay;
// a second SIGTERM ends the process at once with status 1.
func TestSecondSignalForcesExit(t *testing.T) {
	secret := hmacSecretFile(t)
	c := startChild(t, nil, "-jwt-hmac-secret-file", secret, "-shutdown-delay", "1h")
	waitFor(t, patience, "/readyz 200", answers(c.admin+"/readyz", http.StatusOK))
	c.signal(t, syscall.SIGTERM)
	c.stderr.WaitLine(t, "draining", func(l map[string]any) bool { return l["msg"] == "draining" })
	waitFor(t, patience, "/readyz 503", answers(c.admin+"/readyz", http.StatusServiceUnavailable))
	if status, body, _ := get(t, c.api+"/plants", hmacToken(t, secret, "alice")); status != http.StatusOK {
		t.Errorf("GET /plants during the shutdown delay = %d %s, want 200", status, body)
	}
	start := time.Now()
	c.signal(t, syscall.SIGTERM)
	if code := c.wait(t); code != 1 {
		t.Errorf("exit status after a second SIGTERM = %d, want 1; log:\n%s", code, c.stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the second SIGTERM took %v to end the process", d)
	}
	if !strings.Contains(c.stderr.String(), "second stop signal") {
		t.Errorf("the log does not say why the drain was cut:\n%s", c.stderr)
	}
}

// TestSIGTERMExitsClean: one SIGTERM with no delay drains and exits 0.
func TestSIGTERMExitsClean(t *testing.T) {
	// SIGINT is Ctrl-C, which -dev relies on; SIGTERM is the kubelet's.
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			c := startChild(t, nil, "-jwt-hmac-secret-file", hmacSecretFile(t), "-shutdown-delay", "0s")
			c.signal(t, sig)
			if code := c.wait(t); code != 0 {
				t.Errorf("exit status after %v = %d, want 0; log:\n%s", sig, code, c.stderr)
			}
			if !strings.Contains(c.stderr.String(), `"msg":"stopped"`) {
				t.Errorf("no stopped line:\n%s", c.stderr)
			}
		})
	}
}

// TestServeLeavesNoGoroutines runs the service with a JWKS key source (a
// background loop) through requests and a stop, and checks that nothing it
// started outlives run.
func TestServeLeavesNoGoroutines(t *testing.T) {
	k := authtest.NewKey(t, "ES256")
	idp := authtest.NewServer(t, authtest.JWKS(t, k))
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	in := startServe(t, nil, "-jwt-jwks-url", idp.URL, "-jwks-refresh", "1s")
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	token := authtest.Token(t, k, nil, authtest.Claims(nil))
	for range 3 {
		if status, body, _ := get(t, in.api+"/plants?limit=1", token); status != http.StatusOK {
			t.Fatalf("GET /plants = %d %s", status, body)
		}
	}
	in.stop()
	if err := <-in.done; err != nil {
		t.Fatalf("run = %v", err)
	}
	in.done <- nil
	http.DefaultClient.CloseIdleConnections()
}

// TestStreamOutlivesWriteTimeout reads a long list slowly, for several
// times -write-timeout in all but never stalling longer than it: the
// deadline is per write, so the whole list arrives.
func TestStreamOutlivesWriteTimeout(t *testing.T) {
	data := writeOpenCatalog(t, 40000, "a tag to make the list longer")
	secret := hmacSecretFile(t)
	in := startServe(t, nil, "-jwt-hmac-secret-file", secret, "-data", data, "-write-timeout", "300ms")
	req, _ := http.NewRequest(http.MethodGet, in.api+"/plants", nil)
	req.Header.Set("Authorization", "Bearer "+hmacToken(t, secret, "reader"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	var body bytes.Buffer
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		body.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read after %d bytes and %v: %v", body.Len(), time.Since(start), err)
		}
		time.Sleep(30 * time.Millisecond) // a slow reader, never stalled for long
	}
	var got []wirePlant
	if err := json.Unmarshal(body.Bytes(), &got); err != nil || len(got) != 40000 {
		t.Fatalf("got %d plants (%v) in %d bytes; want all 40000", len(got), err, body.Len())
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("the read took %v, under 3 x -write-timeout: the test proves nothing", d)
	}
}

// TestServeRateLimit runs the service with -rate-limit: a subject over its
// burst gets 429 with Retry-After in the Error shape, while another subject
// is still served; without the flag nobody is limited.
func TestServeRateLimit(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		want429   bool
		wantRetry string
	}{
		{name: "limited", args: []string{"-rate-limit", "0.01", "-rate-burst", "3"}, want429: true, wantRetry: "100"},
		{name: "limited through the environment", args: nil, want429: true, wantRetry: "100"},
		{name: "off by default", args: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			alice, keyFile := mintTestToken(t, "EdDSA", "-sub", "alice")
			env := map[string]string{}
			if tt.name == "limited through the environment" {
				env = map[string]string{"PLANTSTORE_RATE_LIMIT": "0.01", "PLANTSTORE_RATE_BURST": "3"}
			}
			in := startServe(t, env, append([]string{"-jwt-key-file", keyFile}, tt.args...)...)
			waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
			for i := range 3 {
				if status, body, _ := get(t, in.api+"/plants", alice); status != http.StatusOK {
					t.Fatalf("request %d of the burst: %d %s; want 200", i, status, body)
				}
			}
			status, body, h := get(t, in.api+"/plants", alice)
			if !tt.want429 {
				if status != http.StatusOK {
					t.Fatalf("request over the burst without -rate-limit: %d %s; want 200", status, body)
				}
				return
			}
			var e struct {
				Error   int    `json:"error"`
				Message string `json:"message"`
			}
			if status != http.StatusTooManyRequests || json.Unmarshal(body, &e) != nil || e.Error != 429 || e.Message == "" {
				t.Fatalf("request over the burst: %d %s; want 429 in the Error shape", status, body)
			}
			if got := h.Get("Retry-After"); got != tt.wantRetry {
				t.Errorf("429 Retry-After %q; want %q", got, tt.wantRetry)
			}
			if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("429 Content-Type %q; want application/json", ct)
			}
			// Another subject signed by another key is not affected. Only
			// one key file is served, so use a token of the same key.
			bob := mintWithKeyFile(t, keyFile, "bob")
			if status, body, _ := get(t, in.api+"/plants", bob); status != http.StatusOK {
				t.Errorf("bob after alice was limited: %d %s; want 200", status, body)
			}
			// A refused credential is refused before the limit counts.
			if status, _, _ := get(t, in.api+"/plants", alice+"x"); status != http.StatusUnauthorized {
				t.Errorf("invalid token while limited: %d; want 401", status)
			}
		})
	}
}

// mintWithKeyFile returns a token for sub signed by the private key whose
// public JWKS is jwksPath (as written by mintTestToken).
func mintWithKeyFile(t testing.TB, jwksPath, sub string) string {
	t.Helper()
	var out strings.Builder
	key := strings.TrimSuffix(jwksPath, ".jwks.json") + ".key"
	if err := run(t.Context(), []string{"token", "-key", key, "-sub", sub, "-ttl", time.Hour.String()}, envOf(nil), nil, &out, &out); err != nil {
		t.Fatalf("token -sub %s: %v", sub, err)
	}
	return strings.TrimSpace(out.String())
}

// TestWatchNonceKey: serve follows a nonce key file rewritten without
// SIGHUP (a new key issues from then on), and the watch ends with its
// context.
func TestWatchNonceKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nonce.key")
	write := func(key string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(strings.Repeat("a", 32))
	n, err := dpop.LoadNonces(path, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := watchNonceKey(ctx, path, n, zap.NewNop())
	before := n.Issue(time.Now())
	write(strings.Repeat("b", 32))
	waitFor(t, patience, "the new key's nonce", func() bool { return n.Issue(time.Now()) != before })
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not stop within 10s of its context's end")
	}
}
