package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/plants"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	os.Exit(m.Run())
}

// syncBuffer is an io.Writer safe for the concurrent writes of a running
// service and the reads of the test.
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

// instance is a service started by startServe.
type instance struct {
	api, admin string // base URLs
	stdout     *syncBuffer
	stderr     *syncBuffer
	stop       context.CancelFunc
	done       chan error
}

// envOf returns a getenv that reads only env.
func envOf(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// startServe runs "serve" with args on loopback ports and waits until the
// service has logged its listening addresses. The service is stopped at the
// end of the test.
func startServe(t testing.TB, env map[string]string, args ...string) *instance {
	t.Helper()
	stderr := &syncBuffer{}
	return startLogging(t, env, stderr, stderr, args...)
}

// startLogging is startServe with the service's log written to logTo and
// read back, for the listening line and by the test, from view.
func startLogging(t testing.TB, env map[string]string, logTo io.Writer, view *syncBuffer, args ...string) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{stdout: &syncBuffer{}, stderr: view, stop: cancel, done: make(chan error, 1)}
	full := append([]string{"serve", "-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0", "-shutdown-delay", "0s"}, args...)
	go func() { in.done <- run(ctx, full, envOf(env), strings.NewReader(""), in.stdout, logTo) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-in.done:
		case <-time.After(30 * time.Second):
			t.Errorf("service did not stop within 30s")
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range logLines(t, view.String()) {
			if line["msg"] == "listening" {
				in.api = "http://" + line["api_addr"].(string)
				in.admin = "http://" + line["admin_addr"].(string)
				return in
			}
		}
		select {
		case err := <-in.done:
			t.Fatalf("serve %q ended before listening: %v\nstderr:\n%s", args, err, view)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("serve %q did not log its addresses within 20s; stderr:\n%s", args, view)
	return nil
}

// logLines decodes the JSON log lines in s.
func logLines(t testing.TB, s string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err == nil {
			lines = append(lines, m)
		}
	}
	return lines
}

// waitReady polls /readyz until it answers want.
func waitReady(t testing.TB, in *instance, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	last := 0
	for time.Now().Before(deadline) {
		resp, err := http.Get(in.admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			last = resp.StatusCode
			if last == want {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("GET /readyz = %d, want %d within 20s", last, want)
}

// get sends GET url with an optional bearer token and returns the status
// and body.
func get(t testing.TB, url, token string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, body, resp.Header
}

type wirePlant struct {
	Name string `json:"name"`
	Tag  string `json:"tag,omitempty"`
}

// expectedPlants lists, independently of the store, what id may read in c.
func expectedPlants(c *plants.Catalog, id auth.Identity) []wirePlant {
	out := []wirePlant{}
	principals := map[string]bool{"*": true, "user:" + id.Subject: true}
	for _, g := range id.Groups {
		principals["group:"+g] = true
	}
	for _, p := range c.Plants() {
		if slices.ContainsFunc(p.Readers, func(r string) bool { return principals[r] }) {
			out = append(out, wirePlant{p.Name, p.Tag})
		}
	}
	return out
}

var curlLine = regexp.MustCompile(`(?m)^# (\S+) .*\ncurl -sS -H 'Authorization: Bearer ([A-Za-z0-9_.-]+)' (http://\S+)$`)

// TestDevBanner pastes each curl line that -dev prints and checks that it
// returns exactly that sample user's plants.
func TestDevBanner(t *testing.T) {
	in := startServe(t, nil, "-dev")
	waitReady(t, in, http.StatusOK)
	matches := curlLine.FindAllStringSubmatch(in.stdout.String(), -1)
	if len(matches) < 3 {
		t.Fatalf("-dev printed %d curl lines, want at least 3; stdout:\n%s", len(matches), in.stdout)
	}
	users := map[string]auth.Identity{}
	for _, u := range plants.SampleUsers() {
		users[u.Subject] = u
	}
	seen := map[string]bool{}
	for _, m := range matches {
		user, token, url := m[1], m[2], m[3]
		id, ok := users[user]
		if !ok {
			t.Errorf("curl line for %q, which is not a sample user", user)
			continue
		}
		if url != in.api+"/plants" {
			t.Errorf("curl line URL = %s, want %s/plants", url, in.api)
		}
		status, body, _ := get(t, url, token)
		if status != http.StatusOK {
			t.Fatalf("%s: GET /plants = %d %s, want 200", user, status, body)
		}
		var got []wirePlant
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%s: body %s: %v", user, body, err)
		}
		want := expectedPlants(plants.SampleCatalog(), id)
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", user, got, want)
		}
		if len(want) == 0 {
			t.Errorf("%s sees no plants in the sample catalog", user)
		}
		seen[string(body)] = true
	}
	if len(seen) < 3 {
		t.Errorf("the sample users see %d distinct lists, want at least 3", len(seen))
	}
}

// TestServeUsage checks that every bad flag value stops the start with one
// line and errUsage (exit status 2), before anything listens.
func TestServeUsage(t *testing.T) {
	dev := []string{"-dev"}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string // substring of the message
	}{
		{"unknown flag", append(dev, "-nope"), nil, "-nope"},
		{"bad duration", append(dev, "-jwt-leeway", "soon"), nil, "-jwt-leeway"},
		{"negative leeway", append(dev, "-jwt-leeway", "-1s"), nil, "-jwt-leeway"},
		{"bad addr", append(dev, "-addr", "8080"), nil, "-addr"},
		{"bad admin addr", append(dev, "-admin-addr", "localhost"), nil, "-admin-addr"},
		{"bad log level", append(dev, "-log-level", "loud"), nil, "-log-level"},
		{"bad log format", append(dev, "-log-format", "xml"), nil, "-log-format"},
		{"bad algorithm", append(dev, "-jwt-algorithms", "RS256,none"), nil, "none"},
		{"bad trusted proxies", append(dev, "-trusted-proxies", "10.0.0.0/33"), nil, "-trusted-proxies"},
		{"bad jwks url", []string{"-jwt-jwks-url", "ftp://x/jwks"}, nil, "-jwt-jwks-url"},
		{"issuer not a URL for discovery", []string{"-jwt-issuer", "plantstore"}, nil, "-jwt-issuer"},
		{"bad env value", dev, map[string]string{"PLANTSTORE_JWT_LEEWAY": "x"}, "PLANTSTORE_JWT_LEEWAY"},
		{"no key source", nil, nil, "-jwt-issuer"},
		{"PLANTSTORE_DEV is not a flag", nil, map[string]string{"PLANTSTORE_DEV": "true"}, "no key source"},
		{"stray argument", append(dev, "extra"), nil, "extra"},
		{"two stores", append(dev, "-data", "x.json", "-database-url", "postgres://x"), nil, "-database-url"},
		{"bad db pool", append(dev, "-db-max-conns", "0"), nil, "-db-max-conns"},
		{"port out of range", append(dev, "-addr", "127.0.0.1:99999"), nil, "-addr"},
		{"port not a number", append(dev, "-admin-addr", "127.0.0.1:abc"), nil, "-admin-addr"},
		{"host not an IP", append(dev, "-addr", "999.1.1.1:80"), nil, "-addr"},
		{"malformed DSN", append(dev, "-database-url", "mysql://u:s3cret@x/y"), nil, "-database-url"},
		{"malformed DSN from env", dev, map[string]string{"PLANTSTORE_DATABASE_URL": "postgres://%zz"}, "-database-url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"serve", "-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0"}, tt.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := run(ctx, args, envOf(tt.env), nil, &stdout, &stderr)
			if !errors.Is(err, errUsage) {
				t.Fatalf("run(%q) = %v, want a usage error", tt.args, err)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, tt.want) {
				t.Errorf("run(%q) message %q: want one line containing %q", tt.args, msg, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("run(%q) message %q repeats the DSN's password", tt.args, err)
			}
			if strings.Contains(stderr.String(), "listening") {
				t.Errorf("run(%q) started listening before refusing", tt.args)
			}
		})
	}
}

// TestServeEnv checks the PLANTSTORE_* fallback and that the flag wins.
func TestServeEnv(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want func(serveConfig) bool
	}{
		{"env sets", []string{"-dev"}, map[string]string{"PLANTSTORE_JWT_LEEWAY": "5s", "PLANTSTORE_JWT_AUDIENCE": "a, b"},
			func(c serveConfig) bool {
				return c.JWT.Leeway == 5*time.Second && slices.Equal(c.JWT.Audiences, []string{"a", "b"})
			}},
		{"flag wins", []string{"-dev", "-jwt-leeway", "7s"}, map[string]string{"PLANTSTORE_JWT_LEEWAY": "5s"},
			func(c serveConfig) bool { return c.JWT.Leeway == 7*time.Second }},
		{"bool from env", []string{"-dev"}, map[string]string{"PLANTSTORE_PPROF": "true"},
			func(c serveConfig) bool { return c.Pprof }},
		{"dev only by flag", nil, map[string]string{"PLANTSTORE_DEV": "true", "PLANTSTORE_JWT_KEY_FILE": "k.json"},
			func(c serveConfig) bool { return !c.Dev && c.KeyFile == "k.json" }},
		{"defaults", []string{"-dev"}, nil,
			func(c serveConfig) bool {
				return c.Addr == ":8080" && c.AdminAddr == ":9090" && c.JWT.Leeway == 30*time.Second &&
					c.JWKSRefresh == 15*time.Minute && c.JWKSMinRefresh == 30*time.Second &&
					c.ShutdownDelay == 5*time.Second && c.ShutdownTimeout == 20*time.Second &&
					c.JWT.GroupsClaim == "groups" && c.LogFormat == "json" && c.LogLevel == "info" && !c.Pprof
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseServeFlags(tt.args, envOf(tt.env), io.Discard)
			if err != nil {
				t.Fatalf("parseServeFlags(%q, %v) = %v", tt.args, tt.env, err)
			}
			if !tt.want(cfg) {
				t.Errorf("parseServeFlags(%q, %v) = %+v: not what the row wants", tt.args, tt.env, cfg)
			}
		})
	}
}

// TestServeCannotRun checks exit status 1 (not a usage error) when the
// service cannot run.
func TestServeCannotRun(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`[{"name":"Fern","readers":["*"]},{"name":"","readers":["*"]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"bad catalog", []string{"-dev", "-data", bad}, []string{"bad.json", "1"}},
		{"missing catalog", []string{"-dev", "-data", filepath.Join(dir, "none.json")}, []string{"none.json"}},
		{"address in use", []string{"-dev", "-addr", busy.Addr().String()}, []string{busy.Addr().String()}},
		{"missing key file", []string{"-jwt-key-file", filepath.Join(dir, "none.jwks")}, []string{"none.jwks"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"serve", "-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0"}, tt.args...)
			err := run(context.Background(), args, envOf(nil), nil, io.Discard, io.Discard)
			if err == nil || errors.Is(err, errUsage) {
				t.Fatalf("run(%q) = %v, want a non-usage error", tt.args, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("run(%q) = %q, want it to mention %q", tt.args, err, w)
				}
			}
		})
	}
}

// TestShutdownDrains starts slow responses, stops the service and checks
// that /readyz turned 503 during the delay and that every in-flight
// response completed.
func TestShutdownDrains(t *testing.T) {
	data := writeOpenCatalog(t, 20000, "t")
	token, keyFile := mintTestToken(t, "EdDSA", "-sub", "drain")
	in := startServe(t, nil, "-jwt-key-file", keyFile, "-data", data, "-shutdown-delay", "300ms", "-shutdown-timeout", "10s")
	waitReady(t, in, http.StatusOK)

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
	waitReady(t, in, http.StatusServiceUnavailable)
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

// mintTestToken makes a key pair with keygen and a token with the token
// command, and returns the token and the public JWKS path.
func mintTestToken(t testing.TB, alg string, tokenArgs ...string) (token, jwksPath string) {
	t.Helper()
	prefix := filepath.Join(t.TempDir(), "key")
	if err := run(context.Background(), []string{"keygen", "-alg", alg, "-out", prefix}, envOf(nil), nil, io.Discard, io.Discard); err != nil {
		t.Fatalf("keygen -alg %s: %v", alg, err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), append([]string{"token", "-key", prefix + ".key"}, tokenArgs...), envOf(nil), nil, &out, io.Discard); err != nil {
		t.Fatalf("token %q: %v", tokenArgs, err)
	}
	token = strings.TrimSuffix(out.String(), "\n")
	if strings.Contains(token, "\n") || token == "" {
		t.Fatalf("token printed %q, want one line", out.String())
	}
	return token, prefix + ".jwks.json"
}

// TestKeygenAndToken checks that keys and tokens made by the CLI verify in
// the service, for every keygen algorithm.
func TestKeygenAndToken(t *testing.T) {
	for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
		t.Run(alg, func(t *testing.T) {
			token, jwks := mintTestToken(t, alg, "-sub", "bob", "-groups", "gardeners", "-aud", "plants-api", "-iss", "https://idp.example", "-scope", "plants:read other", "-ttl", "5m")
			in := startServe(t, nil, "-jwt-key-file", jwks, "-jwt-issuer", "https://idp.example",
				"-jwt-audience", "plants-api", "-jwt-required-scope", "plants:read")
			status, body, _ := get(t, in.api+"/plants", token)
			if status != http.StatusOK {
				t.Fatalf("GET /plants with a %s token from the token command = %d %s, want 200", alg, status, body)
			}
			want := expectedPlants(plants.SampleCatalog(), auth.Identity{Subject: "bob", Groups: []string{"gardeners"}})
			var got []wirePlant
			if err := json.Unmarshal(body, &got); err != nil || !slices.Equal(got, want) {
				t.Errorf("GET /plants = %s (%v), want %v", body, err, want)
			}
		})
	}
	t.Run("keygen refuses to overwrite", func(t *testing.T) {
		prefix := filepath.Join(t.TempDir(), "k")
		args := []string{"keygen", "-alg", "EdDSA", "-out", prefix}
		if err := run(context.Background(), args, envOf(nil), nil, io.Discard, io.Discard); err != nil {
			t.Fatal(err)
		}
		before, _ := os.ReadFile(prefix + ".key")
		if err := run(context.Background(), args, envOf(nil), nil, io.Discard, io.Discard); err == nil {
			t.Errorf("second keygen -out %s succeeded, want an error", prefix)
		}
		after, _ := os.ReadFile(prefix + ".key")
		if !bytes.Equal(before, after) {
			t.Errorf("second keygen changed %s.key", prefix)
		}
	})
	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"token", "-sub", "x"},
			{"token", "-key", "k"},
			{"token", "-key", "k", "-sub", "x", "-ttl", "-1h"},
			{"keygen", "-alg", "HS256", "-out", "x"},
			{"keygen"},
			{"nosuchcommand"},
			{"version", "extra"},
		} {
			if err := run(context.Background(), args, envOf(nil), nil, io.Discard, io.Discard); !errors.Is(err, errUsage) {
				t.Errorf("run(%q) = %v, want a usage error", args, err)
			}
		}
	})
}

// TestVersion checks the version command's output.
func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"version"}, envOf(nil), nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "plantstore ") || !strings.Contains(out.String(), "go1.") {
		t.Errorf("version printed %q, want \"plantstore <version> (revision <rev>, go...)\"", out.String())
	}
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
	waitReady(t, in, http.StatusOK)
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
	waitFor(t, func() bool { return list() == `[{"name":"Basil","tag":"herb"}]` }, "the new catalog to serve")

	write(`[{"name":"Cactus","readers":["nobody"]}]`)
	hup()
	waitFor(t, func() bool { return strings.Contains(in.stderr.String(), "catalog reload refused") }, "the refusal to be logged")
	if got := list(); got != `[{"name":"Basil","tag":"herb"}]` {
		t.Errorf("after a bad reload: %s, want the previous catalog", got)
	}
}

func waitFor(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestTokenNeverLogged runs requests at debug level and checks that no log
// line holds the token or any part of its signature.
func TestTokenNeverLogged(t *testing.T) {
	token, keyFile := mintTestToken(t, "RS256", "-sub", "secretive")
	in := startServe(t, nil, "-jwt-key-file", keyFile, "-log-level", "debug")
	waitReady(t, in, http.StatusOK)
	for _, tok := range []string{token, token + "x", strings.ToUpper(token)} {
		get(t, in.api+"/plants", tok)
		get(t, in.api+"/plants?limit=x", tok)
		get(t, in.api+"/nope", tok)
	}
	waitFor(t, func() bool { return strings.Count(in.stderr.String(), `"msg":"request"`) >= 9 }, "9 access log lines")
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

// testDatabase returns a DSN whose search_path is a fresh schema, dropped
// when the test ends. It skips without a reachable server, unless
// PLANTSTORE_REQUIRE_DB=1.
func testDatabase(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("PLANTSTORE_TEST_DATABASE_URL")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		if os.Getenv("PLANTSTORE_REQUIRE_DB") == "1" {
			t.Fatalf("test database unreachable (PLANTSTORE_REQUIRE_DB=1): %v", err)
		}
		t.Skipf("test database unreachable: %v", err)
	}
	defer conn.Close(context.Background())
	schema := fmt.Sprintf("plantstore_main_%d", time.Now().UnixNano())
	if _, err := conn.Exec(t.Context(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestPostgresCommands runs migrate and import from the command line, then
// serves from the database and checks that each sample user gets what the
// memory store gives.
func TestPostgresCommands(t *testing.T) {
	dsn := testDatabase(t)
	ctx := context.Background()
	var out bytes.Buffer
	if err := run(ctx, []string{"migrate", "-database-url", dsn}, envOf(nil), nil, &out, io.Discard); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if err := run(ctx, []string{"migrate"}, envOf(map[string]string{"PLANTSTORE_DATABASE_URL": dsn}), nil, &out, io.Discard); err != nil {
		t.Fatalf("migrate again, DSN from PLANTSTORE_DATABASE_URL: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`[{"name":"Fern","readers":[]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, []string{"import", "-database-url", dsn, bad}, envOf(nil), nil, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Fatalf("import of a bad file = %v, want an error naming it", err)
	}
	sample := filepath.Join("plants", "sample_catalog.json")
	out.Reset()
	if err := run(ctx, []string{"import", "-database-url", dsn, sample, "-replace"}, envOf(nil), nil, &out, io.Discard); err != nil {
		t.Fatalf("import -replace: %v", err)
	}
	if want := fmt.Sprintf("imported %d plants\n", plants.SampleCatalog().Len()); out.String() != want {
		t.Errorf("import printed %q, want %q", out.String(), want)
	}
	for _, args := range [][]string{{"import", sample}, {"import", "-database-url", dsn}, {"import", "-database-url", dsn, sample, sample}, {"migrate", "-database-url", dsn, "x"}, {"migrate", "-database-url", "mysql://x/y"}} {
		if err := run(ctx, args, envOf(nil), nil, io.Discard, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("run(%q) = %v, want a usage error", args, err)
		}
	}

	in := startServe(t, nil, "-dev", "-database-url", dsn)
	waitReady(t, in, http.StatusOK)
	matches := curlLine.FindAllStringSubmatch(in.stdout.String(), -1)
	if len(matches) < 3 {
		t.Fatalf("-dev printed %d curl lines", len(matches))
	}
	for _, m := range matches {
		user, token := m[1], m[2]
		var id auth.Identity
		for _, u := range plants.SampleUsers() {
			if u.Subject == user {
				id = u
			}
		}
		status, body, _ := get(t, in.api+"/plants", token)
		var got []wirePlant
		if err := json.Unmarshal(body, &got); status != http.StatusOK || err != nil {
			t.Fatalf("%s: GET /plants = %d %s", user, status, body)
		}
		if want := expectedPlants(plants.SampleCatalog(), id); !slices.Equal(got, want) {
			t.Errorf("%s from PostgreSQL: got %v, want %v", user, got, want)
		}
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
	in := startServe(t, nil, "-dev", "-database-url", "postgres://plantstore:s3cret-pass@"+addr+"/test?sslmode=disable", "-db-connect-timeout", "200ms")
	waitReady(t, in, http.StatusServiceUnavailable)
	token := curlLine.FindStringSubmatch(in.stdout.String())[2]
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
	waitFor(t, func() bool { return strings.Count(in.stderr.String(), `"msg":"request"`) >= 1 }, "the access log line")
	for _, leak := range []string{"s3cret-pass", "SELECT"} {
		if strings.Contains(string(body), leak) || strings.Contains(in.stderr.String(), leak) {
			t.Errorf("%q appears in the response or the log", leak)
		}
	}
}

// TestImportRules checks the dependency direction of the house style:
// observability ← auth ← plants ← main, plants/postgres → plants, and the
// third-party libraries only in the files that own them.
func TestImportRules(t *testing.T) {
	const mod = "github.com/plantstore/plantstore"
	allowed := map[string][]string{
		"observability":   nil,
		"auth":            {"observability"},
		"plants":          {"auth", "observability"},
		"plants/postgres": {"plants"},
	}
	// Each library, and the only files (by directory/file) that may import it.
	owners := map[string]func(dir, file string) bool{
		"github.com/gin-gonic/gin": func(dir, file string) bool {
			return file == "main.go" || dir == "auth" && file == "middleware.go" ||
				dir == "plants" && file == "http.go" || dir == "observability" && (file == "middleware.go" || file == "entry.go")
		},
		"github.com/jackc/pgx/v5":      func(dir, _ string) bool { return dir == "plants/postgres" },
		"github.com/pressly/goose/v3":  func(dir, _ string) bool { return dir == "plants/postgres" },
		"github.com/golang-jwt/jwt/v5": func(dir, _ string) bool { return dir == "auth" },
		"github.com/MicahParks/jwkset": func(dir, _ string) bool { return dir == "auth" },
	}
	fset := token.NewFileSet()
	for dir, deps := range allowed {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if rel, ok := strings.CutPrefix(p, mod+"/"); ok && !slices.Contains(deps, rel) {
					t.Errorf("%s imports %s; %s may import only %v", path, rel, dir, deps)
				}
				for lib, may := range owners {
					if (p == lib || strings.HasPrefix(p, lib+"/")) && !may(dir, filepath.Base(path)) {
						t.Errorf("%s imports %s, which belongs elsewhere", path, p)
					}
				}
			}
		}
	}
}

// TestKeysGauge checks that plantstore_jwks_keys counts the static key
// sources too.
func TestKeysGauge(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(strings.Repeat("k", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := startServe(t, nil, "-dev", "-jwt-hmac-secret-file", secret)
	waitReady(t, in, http.StatusOK)
	_, body, _ := get(t, in.admin+"/metrics", "")
	if !regexp.MustCompile(`(?m)^plantstore_jwks_keys 2$`).Match(body) {
		t.Errorf("with -dev and an HMAC secret, /metrics has no \"plantstore_jwks_keys 2\":\n%s", regexp.MustCompile(`(?m)^plantstore_jwks_keys.*$`).Find(body))
	}
}

// TestHelp checks that -h prints the flags of each command and succeeds.
func TestHelp(t *testing.T) {
	for _, cmd := range []string{"serve", "token", "keygen", "migrate", "import"} {
		var stderr bytes.Buffer
		if err := run(context.Background(), []string{cmd, "-h"}, envOf(nil), nil, io.Discard, &stderr); err != nil {
			t.Errorf("%s -h = %v, want nil (exit 0)", cmd, err)
		}
		if !strings.Contains(stderr.String(), "usage of plantstore "+cmd) {
			t.Errorf("%s -h printed %q, want its usage", cmd, stderr.String())
		}
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
	waitReady(t, in, http.StatusOK)
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
