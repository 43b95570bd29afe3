package check_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The gateway end-to-end test runs the real parts on 127.0.0.1: the
// oidc-provider identity provider (deploy/gateway/oidc.mjs), plantstore
// configured by OIDC discovery, and nginx with deploy/gateway/nginx.conf.in
// in front of it. It needs PLANTSTORE_BIN (the built binary), node with
// deploy/gateway/node_modules installed, and nginx; without them it skips,
// unless PLANTSTORE_REQUIRE_TOOLS=1 makes it fail.

const gatewayDir = "../gateway"

// catalog is the plantstore data file: plantstore-ci reads the first two
// plants (by its user and by *), never the third.
const catalog = `[
  {"id": "p1", "name": "Monstera deliciosa", "tag": "aroid", "readers": ["user:plantstore-ci"]},
  {"id": "p2", "name": "Aloe vera", "tag": "succulent", "readers": ["*"]},
  {"id": "p3", "name": "Venus flytrap", "readers": ["user:plantstore-writer", "group:botanists"]}
]`

const wantCIPlants = `[{"name":"Aloe vera","tag":"succulent"},{"name":"Monstera deliciosa","tag":"aroid"}]`

func requireTools(t testing.TB) (bin, nginx string) {
	t.Helper()
	missing := func(what string) {
		t.Helper()
		if os.Getenv("PLANTSTORE_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%s is required (PLANTSTORE_REQUIRE_TOOLS=1)", what)
		}
		t.Skipf("%s is missing", what)
	}
	bin = os.Getenv("PLANTSTORE_BIN")
	if bin == "" {
		missing("PLANTSTORE_BIN (the built plantstore binary)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("node")
	}
	if _, err := os.Stat(filepath.Join(gatewayDir, "node_modules", "oidc-provider")); err != nil {
		missing("deploy/gateway/node_modules (npm ci --prefix deploy/gateway)")
	}
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		if _, err := os.Stat("/usr/sbin/nginx"); err != nil {
			missing("nginx")
		}
		nginx = "/usr/sbin/nginx"
	}
	return bin, nginx
}

// freePort returns a port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// process is a started command whose output goes to a file.
type process struct {
	cmd *exec.Cmd
	log string
}

// start runs name with args, its output in a file of dir, and stops it by
// PID (SIGTERM, then SIGKILL after 10 s) when the test ends, unless stopped
// before.
func start(t testing.TB, dir, label, name string, args ...string) *process {
	t.Helper()
	logPath := filepath.Join(dir, label+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", label, err)
	}
	p := &process{cmd: cmd, log: logPath}
	t.Cleanup(func() {
		p.stop(t)
		f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s output:\n%s", label, b)
		}
	})
	return p
}

func (p *process) stop(t testing.TB) {
	t.Helper()
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

func (p *process) running() bool {
	return p.cmd.ProcessState == nil && p.cmd.Process.Signal(syscall.Signal(0)) == nil
}

// waitFor polls until ok returns true, for up to 20 s.
func waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func status(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// idp is a running oidc-provider.
type idp struct {
	*process
	issuer string
}

// genKey returns a new private RS256 JWK named kid.
func genKey(t testing.TB, kid string) json.RawMessage {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "node", filepath.Join(gatewayDir, "oidc.mjs"), "genkey", kid).Output()
	if err != nil {
		t.Fatalf("genkey %s: %v", kid, err)
	}
	return json.RawMessage(bytes.TrimSpace(out))
}

// startIdP runs the provider on port with keys, the first one signing.
func startIdP(t testing.TB, dir string, port int, label string, keys ...json.RawMessage) *idp {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, label+".jwks.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, dir, label, "node", filepath.Join(gatewayDir, "oidc.mjs"), "serve", strconv.Itoa(port), path)
	issuer := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitFor(t, label+" discovery", func() bool { return status(issuer+"/.well-known/openid-configuration") == 200 })
	return &idp{p, issuer}
}

// token gets an access token for client by client_credentials and returns
// it with its header's kid.
func (i *idp) token(t testing.TB, client, scope string) (tok, kid string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, i.issuer+"/token",
		strings.NewReader(url.Values{"grant_type": {"client_credentials"}, "scope": {scope}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(client, "ci-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
		Scope       string `json:"scope"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(raw, &body) != nil || body.AccessToken == "" {
		t.Fatalf("token for %s (%s): %d %s", client, scope, resp.StatusCode, raw)
	}
	head, _, _ := strings.Cut(body.AccessToken, ".")
	hb, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Alg, Typ, Kid string
	}
	if err := json.Unmarshal(hb, &h); err != nil {
		t.Fatal(err)
	}
	if h.Alg != "RS256" || h.Typ != "at+jwt" {
		t.Fatalf("token header %s, want RS256 at+jwt", hb)
	}
	return body.AccessToken, h.Kid
}

// startPlantstore runs the service by OIDC discovery against issuer and
// returns it with its API address once /readyz answers 200.
func startPlantstore(t testing.TB, bin, dir, issuer string) (*process, string) {
	t.Helper()
	data := filepath.Join(dir, "catalog.json")
	if err := os.WriteFile(data, []byte(catalog), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, dir, "plantstore", bin, "serve",
		"-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0",
		"-jwt-issuer", issuer, "-jwt-audience", "plantstore", "-jwt-required-scope", "plants:read",
		"-trusted-proxies", "127.0.0.1/32", "-data", data,
		// An unknown kid may trigger a refetch every second, so the
		// rotation below is seen at once.
		"-jwks-min-refresh", "1s", "-shutdown-delay", "0s")
	var api, admin string
	waitFor(t, "plantstore listening line", func() bool {
		for _, e := range logEntries(t, p.log) {
			if e["msg"] == "listening" {
				api, _ = e["api_addr"].(string)
				admin, _ = e["admin_addr"].(string)
				return true
			}
		}
		return false
	})
	waitFor(t, "plantstore /readyz", func() bool { return status("http://"+admin+"/readyz") == 200 })
	return p, api
}

// logEntries returns the JSON lines of a log file.
func logEntries(t testing.TB, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e map[string]any
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// placeholder matches an @NAME@ left unfilled in nginx.conf.in.
var placeholder = regexp.MustCompile(`@[A-Z_]+@`)

// startNginx runs nginx with deploy/gateway/nginx.conf.in in front of
// upstream and returns its address.
func startNginx(t testing.TB, nginx, dir, upstream string) string {
	t.Helper()
	prefix := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(filepath.Join(gatewayDir, "nginx.conf.in"))
	if err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	conf := strings.NewReplacer("@PREFIX@", prefix, "@UPSTREAM@", upstream, "@LISTEN@", listen).Replace(string(tmpl))
	if placeholder.MatchString(conf) {
		t.Fatalf("nginx.conf.in: placeholder left in\n%s", conf)
	}
	path := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(t.Context(), nginx, "-t", "-q", "-p", prefix, "-c", path).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	start(t, dir, "nginx", nginx, "-p", prefix, "-c", path, "-g", "daemon off;")
	waitFor(t, "nginx", func() bool { return status("http://"+listen+"/") == 404 })
	return listen
}

type result struct {
	status int
	auth   string
	body   string
}

// get calls GET /plants on addr as a client behind 203.0.113.7.
func get(t testing.TB, addr, token, requestID string) result {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/plants", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	req.Header.Set("X-Request-ID", requestID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return result{resp.StatusCode, resp.Header.Get("WWW-Authenticate"), strings.TrimSpace(string(b))}
}

// forge signs a token with the provider's claims and kid but a key of its own.
func forge(t testing.TB, bin, dir, issuer, kid string) string {
	t.Helper()
	prefix := filepath.Join(dir, "forger")
	if out, err := exec.CommandContext(t.Context(), bin, "keygen", "-alg", "RS256", "-out", prefix).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(t.Context(), bin, "token", "-key", prefix+".key", "-kid", kid,
		"-sub", "plantstore-ci", "-scope", "plants:read", "-aud", "plantstore", "-iss", issuer, "-ttl", "5m").Output()
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func TestGatewayEndToEnd(t *testing.T) {
	bin, nginx := requireTools(t)
	dir := t.TempDir()
	port := freePort(t)
	key1 := genKey(t, "key-1")
	provider := startIdP(t, dir, port, "idp-1", key1)
	service, api := startPlantstore(t, bin, dir, provider.issuer)
	gateway := startNginx(t, nginx, dir, api)

	reader, kid := provider.token(t, "plantstore-ci", "plants:read")
	if kid != "key-1" {
		t.Fatalf("token kid %q, want key-1", kid)
	}
	writer, _ := provider.token(t, "plantstore-writer", "plants:write")

	tests := []struct {
		name, token, requestID string
		status                 int
		auth, body             string // substrings; body "" is not checked
	}{
		{"reader gets its plants", reader, "e2e-reader", 200, "", wantCIPlants},
		{"no plants:read scope", writer, "e2e-writer", 403, `error="insufficient_scope"`, `"error":403`},
		{"forged signature", forge(t, bin, dir, provider.issuer, kid), "e2e-forged", 401, `error="invalid_token"`, `"error":401`},
		{"no token", "", "e2e-none", 401, `Bearer realm="plantstore"`, `"error":401`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := get(t, gateway, tt.token, tt.requestID)
			if got.status != tt.status || !strings.Contains(got.auth, tt.auth) || !strings.Contains(got.body, tt.body) {
				t.Errorf("GET /plants via nginx (%s): got %d %q %s, want %d, WWW-Authenticate with %q, body with %s",
					tt.name, got.status, got.auth, got.body, tt.status, tt.auth, tt.body)
			}
			if tt.status == 200 && got.body != tt.body {
				t.Errorf("GET /plants via nginx: body %s, want exactly %s", got.body, tt.body)
			}
		})
	}

	t.Run("access log has the client IP from X-Forwarded-For", func(t *testing.T) {
		var entry map[string]any
		waitFor(t, "access log line for e2e-reader", func() bool {
			for _, e := range logEntries(t, service.log) {
				if e["msg"] == "request" && e["request_id"] == "e2e-reader" {
					entry = e
					return true
				}
			}
			return false
		})
		for k, want := range map[string]any{"remote_ip": "203.0.113.7", "sub": "plantstore-ci", "status": 200.0, "plants": 2.0} {
			if entry[k] != want {
				t.Errorf("access log %s = %v, want %v (entry %v)", k, entry[k], want, entry)
			}
		}
	})

	t.Run("key rotation is picked up without a restart", func(t *testing.T) {
		provider.stop(t)
		rotated := startIdP(t, dir, port, "idp-2", genKey(t, "key-2"), key1)
		tok, kid := rotated.token(t, "plantstore-ci", "plants:read")
		if kid != "key-2" {
			t.Fatalf("token kid after rotation %q, want key-2", kid)
		}
		// plantstore refetches for an unknown kid at most once per
		// -jwks-min-refresh (1 s) after its last fetch: let that pass.
		var last time.Time
		for _, e := range logEntries(t, service.log) {
			if e["msg"] == "jwks keys updated" {
				ts, _ := e["ts"].(string)
				last, _ = time.Parse(time.RFC3339Nano, ts)
			}
		}
		if last.IsZero() {
			t.Fatal(`no "jwks keys updated" line in the plantstore log`)
		}
		time.Sleep(time.Until(last.Add(1500 * time.Millisecond)))
		if got := get(t, gateway, tok, "e2e-rotated"); got.status != 200 || got.body != wantCIPlants {
			t.Errorf("GET /plants with a key-2 token: got %d %s, want 200 %s", got.status, got.body, wantCIPlants)
		}
		if got := get(t, gateway, reader, "e2e-old-key"); got.status != 200 {
			t.Errorf("GET /plants with the key-1 token after rotation: got %d %s, want 200", got.status, got.body)
		}
		if !service.running() {
			t.Errorf("plantstore is no longer running (pid %d)", service.cmd.Process.Pid)
		}
		starts, updated := 0, false
		for _, e := range logEntries(t, service.log) {
			switch e["msg"] {
			case "listening":
				starts++
			case "jwks keys updated":
				updated = updated || fmt.Sprint(e["kids"]) == "[key-1 key-2]"
			}
		}
		if !updated {
			t.Errorf(`plantstore logged no "jwks keys updated" with kids [key-1 key-2]`)
		}
		if starts != 1 {
			t.Errorf("plantstore logged %d listening lines, want 1 (no restart)", starts)
		}
	})
}
