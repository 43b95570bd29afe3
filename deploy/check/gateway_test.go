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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The gateway end-to-end tests run the real parts on 127.0.0.1: the
// oidc-provider identity provider (deploy/gateway/oidc.mjs), plantstore
// configured by OIDC discovery, and nginx with deploy/gateway/nginx.conf.in
// in front of it; TestGatewayEndToEndIssuers runs two providers as two
// issuers and a DPoP client (deploy/gateway/dpop-client.mjs). They need
// TEST_PLANTSTORE_BIN (the built binary), node with deploy/gateway/node_modules
// installed, and nginx; without them they skip, unless TEST_REQUIRE_TOOLS=1
// makes them fail.

const gatewayDir = "../gateway"

// catalog is the plantstore data file: plantstore-ci reads the first two
// plants (by its user and by *), never the third.
const catalog = `[
  {"id": "p1", "name": "Monstera deliciosa", "tag": "aroid", "readers": ["user:plantstore-ci"]},
  {"id": "p2", "name": "Aloe vera", "tag": "succulent", "readers": ["*"]},
  {"id": "p3", "name": "Venus flytrap", "readers": ["user:plantstore-writer", "group:botanists"]}
]`

const wantCIPlants = `[{"name":"Aloe vera","tag":"succulent"},{"name":"Monstera deliciosa","tag":"aroid"}]`

// missing skips t for lack of what, or fails it under TEST_REQUIRE_TOOLS=1
// (as .ci/deploy.sh sets it).
func missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("TEST_REQUIRE_TOOLS") == "1" {
		t.Fatalf("%s is required (TEST_REQUIRE_TOOLS=1)", what)
	}
	t.Skipf("%s is missing", what)
}

// fromEnv returns the path the environment variable name gives, built by
// .ci/deploy.sh (what says what it is), or calls missing.
func fromEnv(t testing.TB, name, what string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		missing(t, name+" ("+what+")")
	}
	return v
}

// plantstoreBin returns the built plantstore binary of TEST_PLANTSTORE_BIN.
func plantstoreBin(t testing.TB) string {
	t.Helper()
	return fromEnv(t, "TEST_PLANTSTORE_BIN", "the built plantstore binary")
}

// tool returns the path of the command name, or calls missing with hint.
func tool(t testing.TB, name, hint string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missing(t, name+hint)
	}
	return p
}

// nginxBin returns the path of nginx, or calls missing.
func nginxBin(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	return tool(t, "/usr/sbin/nginx", "")
}

func requireTools(t testing.TB) (bin, nginx string) {
	t.Helper()
	bin = plantstoreBin(t)
	tool(t, "node", "")
	for _, pkg := range []string{"oidc-provider", "oauth4webapi"} {
		if _, err := os.Stat(filepath.Join(gatewayDir, "node_modules", pkg)); err != nil {
			missing(t, "deploy/gateway/node_modules/"+pkg+" (npm ci --prefix deploy/gateway)")
		}
	}
	return bin, nginxBin(t)
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
	return startEnv(t, dir, label, nil, name, args...)
}

// startEnv is start with the environment env (nil: this process's).
func startEnv(t testing.TB, dir, label string, env []string, name string, args ...string) *process {
	t.Helper()
	logPath := filepath.Join(dir, label+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = env
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

// startIdP runs the provider on port with keys, the first one signing,
// and returns once its discovery document answers.
func startIdP(t testing.TB, dir string, port int, label string, keys ...json.RawMessage) *idp {
	t.Helper()
	i := launchIdP(t, dir, port, label, keys...)
	i.wait(t)
	return i
}

// launchIdP starts the provider as startIdP does without waiting for it,
// so that several start at once; wait before using it.
func launchIdP(t testing.TB, dir string, port int, label string, keys ...json.RawMessage) *idp {
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
	return &idp{p, fmt.Sprintf("http://127.0.0.1:%d", port)}
}

// wait returns once the provider's discovery document answers.
func (i *idp) wait(t testing.TB) {
	t.Helper()
	waitFor(t, i.issuer+" discovery", func() bool { return status(i.issuer+"/.well-known/openid-configuration") == 200 })
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

// signIn signs user in for client by OpenID Connect CIBA (poll mode; the
// provider's user approves at once) and returns the access token and the
// ID token of the one token response.
func (i *idp) signIn(t testing.TB, client, user string) (access, id string) {
	t.Helper()
	post := func(path string, form url.Values, v any) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, i.issuer+path, strings.NewReader(form.Encode()))
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
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || json.Unmarshal(raw, v) != nil {
			t.Fatalf("POST %s for %s: %d %s", path, client, resp.StatusCode, raw)
		}
	}
	var started struct {
		AuthReqID string `json:"auth_req_id"`
	}
	post("/backchannel", url.Values{"login_hint": {user}, "scope": {"openid plants:read"}}, &started)
	var tokens struct {
		AccessToken string `json:"access_token"`
		IDToken     string `json:"id_token"`
	}
	post("/token", url.Values{"grant_type": {"urn:openid:params:grant-type:ciba"}, "auth_req_id": {started.AuthReqID}}, &tokens)
	if tokens.AccessToken == "" || tokens.IDToken == "" {
		t.Fatalf("CIBA token response for %s without an access token and an ID token", client)
	}
	return tokens.AccessToken, tokens.IDToken
}

// startPlantstore runs the service by OIDC discovery against issuer and
// returns it with its API address once /readyz answers 200.
func startPlantstore(t testing.TB, bin, dir, issuer string) (*process, string) {
	t.Helper()
	p, api, _ := runPlantstore(t, bin, dir, "plantstore", catalog,
		"-jwt-issuer", issuer, "-jwt-audience", "plantstore", "-jwt-required-scope", "plants:read",
		// The provider's JWT access tokens say at+jwt (RFC 9068).
		"-jwt-token-types", "at+jwt",
		// An unknown kid may trigger a refetch every second, so the
		// rotation below is seen at once.
		"-jwks-min-refresh", "1s")
	return p, api
}

// runPlantstore runs "plantstore serve" on free loopback ports with the
// catalog data, 127.0.0.1 as trusted proxy, no shutdown delay and args,
// its output in dir/label.log, and returns it with its API and admin
// addresses once /readyz answers 200.
func runPlantstore(t testing.TB, bin, dir, label, data string, args ...string) (p *process, api, admin string) {
	t.Helper()
	return runPlantstoreEnv(t, nil, bin, dir, label, data, args...)
}

// runPlantstoreEnv is runPlantstore with the environment env (nil: this
// process's).
func runPlantstoreEnv(t testing.TB, env []string, bin, dir, label, data string, args ...string) (p *process, api, admin string) {
	t.Helper()
	path := filepath.Join(dir, label+"-catalog.json")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	p = startEnv(t, dir, label, env, bin, append([]string{"serve",
		"-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0",
		"-trusted-proxies", "127.0.0.1/32", "-data", path, "-shutdown-delay", "0s"}, args...)...)
	api, admin = waitServing(t, p, label)
	return p, api, admin
}

// waitServing waits for the listening line of the plantstore p runs and
// for its /readyz to answer 200, and returns its API and admin addresses.
func waitServing(t testing.TB, p *process, label string) (api, admin string) {
	t.Helper()
	waitFor(t, label+" listening line", func() bool {
		for _, e := range logEntries(t, p.log) {
			if e["msg"] == "listening" {
				api, _ = e["api_addr"].(string)
				admin, _ = e["admin_addr"].(string)
				return true
			}
		}
		return false
	})
	waitFor(t, label+" /readyz", func() bool { return status("http://"+admin+"/readyz") == 200 })
	return api, admin
}

// plantstoreLine waits for plantstore's access line of the request requestID
// in log and returns it.
func plantstoreLine(t testing.TB, log, requestID string) map[string]any {
	t.Helper()
	var entry map[string]any
	waitFor(t, "access line of "+requestID, func() bool {
		for _, e := range logEntries(t, log) {
			if e["msg"] == "request" && e["request_id"] == requestID {
				entry = e
				return true
			}
		}
		return false
	})
	return entry
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

// startNginx runs nginx with the template conf (deploy/gateway/nginx.conf.in)
// in front of upstream and returns its address and its access log's path.
func startNginx(t testing.TB, nginx, dir, conf, upstream string) (addr, accessLog string) {
	t.Helper()
	return startNginxAt(t, nginx, dir, conf, upstream, fmt.Sprintf("127.0.0.1:%d", freePort(t)))
}

// startNginxAt is startNginx listening on listen, an address chosen
// before, e.g. for plantstore's -public-url.
func startNginxAt(t testing.TB, nginx, dir, conf, upstream, listen string) (addr, accessLog string) {
	t.Helper()
	prefix := filepath.Join(dir, "nginx-"+strings.ReplaceAll(filepath.Base(filepath.Dir(conf)), ".", "_"))
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer("@PREFIX@", prefix, "@UPSTREAM@", upstream, "@LISTEN@", listen).Replace(string(tmpl))
	if placeholder.MatchString(text) {
		t.Fatalf("%s: placeholder left in\n%s", conf, text)
	}
	path := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(t.Context(), nginx, "-t", "-q", "-p", prefix, "-c", path).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	start(t, dir, filepath.Base(prefix), nginx, "-p", prefix, "-c", path, "-g", "daemon off;")
	waitFor(t, "nginx", func() bool { return status("http://"+listen+"/") == 404 })
	return listen, filepath.Join(prefix, "access.log")
}

type result struct {
	status int
	auth   string
	body   string
	header http.Header
}

// get calls GET /plants on addr as a client behind 203.0.113.7.
func get(t testing.TB, addr, token, requestID string) result {
	t.Helper()
	return call(t, http.MethodGet, addr, "/plants", token, requestID)
}

// call sends method path to addr as a client behind 203.0.113.7, with
// X-Request-ID unless requestID is empty.
func call(t testing.TB, method, addr, path, token, requestID string) result {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return callWith(t, method, addr, path, h, requestID)
}

// callWith sends method path to addr with header (which it changes) as a
// client behind 203.0.113.7, with X-Request-ID unless requestID is empty.
func callWith(t testing.TB, method, addr, path string, header http.Header, requestID string) result {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	if requestID != "" {
		req.Header.Set("X-Request-ID", requestID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return result{resp.StatusCode, resp.Header.Get("WWW-Authenticate"), strings.TrimSpace(string(b)), resp.Header}
}

// gatewayProblems sends the requests the gateway's contract covers through
// the nginx at addr (logging to accessLog) in front of the plantstore
// logging to serviceLog, and returns what is wrong: a method other than GET
// must reach plantstore (405 with Allow and the Error body), the protected
// resource metadata must reach plantstore, and nginx must log the request
// id it forwards.
func gatewayProblems(t testing.TB, addr, accessLog, serviceLog, token, tag string) []string {
	t.Helper()
	var problems []string
	if r := call(t, http.MethodPost, addr, "/plants", token, tag+"-post"); r.status != 405 || r.header.Get("Allow") != "GET, HEAD" || !strings.Contains(r.body, `"error":405`) {
		problems = append(problems, fmt.Sprintf("POST /plants: %d, Allow %q, body %s; want 405 from plantstore", r.status, r.header.Get("Allow"), r.body))
	}
	const metadata = "/.well-known/oauth-protected-resource"
	call(t, http.MethodGet, addr, metadata, "", tag+"-metadata")
	call(t, http.MethodGet, addr, "/plants?limit=1", token, tag+"-caller-id")
	noID := call(t, http.MethodGet, addr, "/plants?limit=2", token, "")
	forwarded := noID.header.Get("X-Request-ID")

	// Both logs are written as the requests end; the service's last line
	// is for the request sent last.
	waitFor(t, "plantstore access line for the request sent last", func() bool {
		for _, e := range logEntries(t, serviceLog) {
			if e["msg"] == "request" && e["request_id"] == forwarded {
				return true
			}
		}
		return false
	})
	reached := func(id, path string) bool {
		for _, e := range logEntries(t, serviceLog) {
			if e["msg"] == "request" && e["request_id"] == id && e["path"] == path {
				return true
			}
		}
		return false
	}
	if !reached(tag+"-metadata", metadata) {
		problems = append(problems, "GET "+metadata+" did not reach plantstore")
	}
	// nginx logs a request after its last byte is sent, so possibly
	// after the client has read the response: wait for the last one.
	logged := map[string]string{} // query string -> request id nginx logged
	waitFor(t, "nginx access line for the request sent last", func() bool {
		raw, err := os.ReadFile(accessLog)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if m := accessID.FindStringSubmatch(line); m != nil {
				logged[m[1]] = m[2]
			}
		}
		_, ok := logged["limit=2"]
		return ok
	})
	if got := logged["limit=1"]; got != tag+"-caller-id" {
		problems = append(problems, fmt.Sprintf("nginx logged request_id %q for a caller's X-Request-ID %q", got, tag+"-caller-id"))
	}
	if got := logged["limit=2"]; got != forwarded || !reached(forwarded, "/plants") {
		problems = append(problems, fmt.Sprintf("nginx logged request_id %q, plantstore received %q", got, forwarded))
	}
	return problems
}

// accessID matches a GET /plants?<query> line of nginx's access log and
// the request id logged on it (request_id=ID, or the bare id before the fix).
var accessID = regexp.MustCompile(`"GET /plants\?(\S+) HTTP/1\.1" \d+ (?:request_id=)?(\S+)`)

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
	gateway, accessLog := startNginx(t, nginx, dir, filepath.Join(gatewayDir, "nginx.conf.in"), api)

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
		entry := plantstoreLine(t, service.log, "e2e-reader")
		for k, want := range map[string]any{"remote_ip": "203.0.113.7", "sub": "plantstore-ci", "status": 200.0, "plants": 2.0} {
			if entry[k] != want {
				t.Errorf("access log %s = %v, want %v (entry %v)", k, entry[k], want, entry)
			}
		}
	})

	t.Run("405, resource metadata and request id through the gateway", func(t *testing.T) {
		if got := gatewayProblems(t, gateway, accessLog, service.log, reader, "e2e"); len(got) > 0 {
			t.Errorf("deploy/gateway/nginx.conf.in:\n  %s", strings.Join(got, "\n  "))
		}
		// Before issue 17 the gateway answered 403 itself, kept the metadata
		// from the service and logged its own request id: each is caught.
		old, oldLog := startNginx(t, nginx, dir, filepath.Join("testdata", "before", "nginx.conf.in"), api)
		got := strings.Join(gatewayProblems(t, old, oldLog, service.log, reader, "before"), "\n")
		for _, want := range []string{"POST /plants: 403", "did not reach plantstore", `for a caller's X-Request-ID "before-caller-id"`} {
			if !strings.Contains(got, want) {
				t.Errorf("testdata/before/nginx.conf.in: problems\n  %s\nwant one containing %q", got, want)
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
		// -jwks-min-refresh (1 s) after its last fetch; inside that window
		// it refuses at once and fetches nothing, so asking again until
		// the key is known does not delay the refetch.
		var got result
		signed := time.Now()
		waitFor(t, "the key-2 token accepted", func() bool {
			got = get(t, gateway, tok, "e2e-rotated")
			return got.status == 200
		})
		// docs/deploy.md cites it: a key published as it first signs is
		// accepted at once, where a gateway's cached JWKS refuses it.
		t.Logf("a token of a key published at the moment it first signed: accepted %v after it was issued", time.Since(signed).Round(time.Millisecond))
		if got.body != wantCIPlants {
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

// issuersCatalog is the data of the plantstore with two named issuers.
// Their callers' principals name the issuer (SPEC section 3), so the same
// sub, plantstore-ci, reads Ficus as staff and Pilea as customers; "*" is
// every caller of every issuer, and user:plantstore-ci (the unnamed
// issuer's) is nobody's there.
const issuersCatalog = `[
  {"id": "s1", "name": "Ficus lyrata", "readers": ["user@staff:plantstore-ci"]},
  {"id": "c1", "name": "Pilea peperomioides", "readers": ["user@customers:plantstore-ci"]},
  {"id": "d1", "name": "Strelitzia nicolai", "readers": ["user@customers:plantstore-dpop"]},
  {"id": "a1", "name": "Aloe vera", "tag": "succulent", "readers": ["*"]},
  {"id": "u1", "name": "Monstera deliciosa", "readers": ["user:plantstore-ci"]}
]`

const (
	wantStaffPlants     = `[{"name":"Aloe vera","tag":"succulent"},{"name":"Ficus lyrata"}]`
	wantCustomersPlants = `[{"name":"Aloe vera","tag":"succulent"},{"name":"Pilea peperomioides"}]`
	wantDPoPPlants      = `[{"name":"Aloe vera","tag":"succulent"},{"name":"Strelitzia nicolai"}]`
)

// mint signs a token with the private key file key (JWK or PKCS#8 PEM)
// by "plantstore token" with the claim flags args.
func mint(t testing.TB, bin, key string, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), bin, append([]string{"token", "-key", key}, args...)...).Output()
	if err != nil {
		t.Fatalf("plantstore token %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// dpopClientRun is what deploy/gateway/dpop-client.mjs reports (the
// metadata it read and checked left out).
type dpopClientRun struct {
	TokenType       string `json:"token_type"`
	AccessToken     string `json:"access_token"`
	Authorization   string `json:"authorization"`
	DPoP            string `json:"dpop"`
	Status          int    `json:"status"`
	WWWAuthenticate string `json:"www_authenticate"`
	DPoPNonce       string `json:"dpop_nonce"`
	Body            string `json:"body"`
	// NonceAsked is the first answer when it asked for a server nonce.
	NonceAsked *struct {
		Status          int    `json:"status"`
		WWWAuthenticate string `json:"www_authenticate"`
	} `json:"nonce_asked"`
}

// dpopClient runs deploy/gateway/dpop-client.mjs as the customers'
// DPoP client with a key for alg, against the resource public.
func dpopClient(t testing.TB, public, issuer, requestID, alg string) dpopClientRun {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "node", filepath.Join(gatewayDir, "dpop-client.mjs"),
		public, issuer, "plantstore-dpop", requestID, alg).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("dpop-client.mjs (%s): %v\n%s", alg, err, stderr)
	}
	var run dpopClientRun
	if err := json.Unmarshal(out, &run); err != nil {
		t.Fatalf("dpop-client.mjs output: %v\n%s", err, out)
	}
	return run
}

// checkDPoPRun checks that run got a DPoP-bound token, sent it under the
// DPoP scheme with a proof for GET public/plants, and got the customers'
// plants, logged with requestID; and that, asked for a server nonce on its
// first request (use_dpop_nonce, refused as dpop_nonce), it sent the
// request again with the nonce, with no change to oauth4webapi.
func checkDPoPRun(t testing.TB, run dpopClientRun, log, public, requestID string) {
	t.Helper()
	var nonced struct {
		Nonce string `json:"nonce"`
	}
	jwtPart(t, run.DPoP, 1, &nonced)
	if run.NonceAsked == nil || run.NonceAsked.Status != 401 || !strings.Contains(run.NonceAsked.WWWAuthenticate, `error="use_dpop_nonce"`) ||
		nonced.Nonce == "" || run.DPoPNonce == "" {
		t.Errorf("dpop-client.mjs (%s): first answer %+v, the proof's nonce %q, DPoP-Nonce %q; want 401 use_dpop_nonce, then a proof with the nonce and a nonce on the answer",
			requestID, run.NonceAsked, nonced.Nonce, run.DPoPNonce)
	}
	if e := plantstoreLine(t, log, requestID); e["auth_failure"] != "dpop_nonce" || e["status"] != 401.0 {
		t.Errorf("the first access line of %s: auth_failure %v status %v; want dpop_nonce 401", requestID, e["auth_failure"], e["status"])
	}
	requestID += "-retried"
	var claims struct {
		Cnf struct {
			JKT string `json:"jkt"`
		} `json:"cnf"`
	}
	jwtPart(t, run.AccessToken, 1, &claims)
	var proof struct {
		HTM, HTU string
	}
	jwtPart(t, run.DPoP, 1, &proof)
	if !strings.EqualFold(run.TokenType, "DPoP") || claims.Cnf.JKT == "" || run.Authorization != "DPoP "+run.AccessToken ||
		proof.HTM != "GET" || proof.HTU != public+"/plants" {
		t.Errorf("dpop-client.mjs: token_type %q, cnf.jkt %q, Authorization %.10q, proof htm %q htu %q; want a DPoP-bound token sent as DPoP with a proof for GET %s/plants",
			run.TokenType, claims.Cnf.JKT, run.Authorization, proof.HTM, proof.HTU, public)
	}
	if run.Status != 200 || run.Body != wantDPoPPlants {
		t.Errorf("GET /plants via nginx with DPoP (%s): got %d %q %s, want 200 %s", requestID, run.Status, run.WWWAuthenticate, run.Body, wantDPoPPlants)
	}
	entry := plantstoreLine(t, log, requestID)
	if entry["iss"] != "customers" || entry["sub"] != "plantstore-dpop" {
		t.Errorf("access line of the DPoP request: iss %v sub %v, want customers plantstore-dpop", entry["iss"], entry["sub"])
	}
}

// jwtPart decodes part i (0 header, 1 claims) of the compact JWT tok.
func jwtPart(t testing.TB, tok string, i int, v any) {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWT: %.40q", tok)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[i])
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		t.Fatalf("JWT part %d: %v", i, err)
	}
}

// TestGatewayEndToEndIssuers runs two oidc-providers as the issuers staff
// and customers of one plantstore (-jwt-issuers-file, both by discovery,
// both signing with a key named key-1), behind nginx at the URL given as
// -public-url: tokens of each issuer through the gateway, a token that
// names one issuer and is signed by the other's key, an unconfigured
// issuer, staff's rules on tokens meant for this resource (at+jwt only,
// one client, a lifetime cap and a bound on its keys' age: staff's ID
// token and its access token for another client are refused), a DPoP
// client made with oauth4webapi (deploy/gateway/dpop-client.mjs) that
// follows the service's server nonce challenge, the protected resource
// metadata, and one provider stopped.
func TestGatewayEndToEndIssuers(t *testing.T) {
	bin, nginx := requireTools(t)
	dir := t.TempDir()
	staffKey, customersKey := genKey(t, "key-1"), genKey(t, "key-1")
	staff := launchIdP(t, dir, freePort(t), "idp-staff", staffKey)
	customers := launchIdP(t, dir, freePort(t), "idp-customers", customersKey)
	staff.wait(t)
	customers.wait(t)

	issuers := filepath.Join(dir, "issuers.yaml")
	if err := os.WriteFile(issuers, []byte(fmt.Sprintf(`issuers:
  - name: staff
    issuer: %s
    audiences: [plantstore]
    algorithms: [RS256]
    required_scope: plants:read
    token_types: [at+jwt]
    clients: [plantstore-ci]
    max_lifetime: 10m
    max_stale: 1h
  - name: customers
    issuer: %s
    audiences: [plantstore]
    algorithms: [RS256]
    required_scope: plants:read
`, staff.issuer, customers.issuer)), 0o600); err != nil {
		t.Fatal(err)
	}
	// Server nonces: DPoP proofs must carry one (the DPoP client follows
	// the challenge); bearer tokens are not concerned.
	nonceKey := filepath.Join(dir, "dpop-nonce.key")
	if err := os.WriteFile(nonceKey, []byte(strings.Repeat("n", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	public := "http://" + listen
	service, api, admin := runPlantstore(t, bin, dir, "plantstore-issuers", issuersCatalog,
		"-jwt-issuers-file", issuers, "-public-url", public, "-dpop-nonce-key-file", nonceKey,
		// Each issuer's keys are fetched again every second or so, so a
		// provider that stops is noticed at once.
		"-jwks-refresh", "1s", "-jwks-min-refresh", "1s")
	gateway, _ := startNginxAt(t, nginx, dir, filepath.Join(gatewayDir, "nginx.conf.in"), api, listen)

	staffTok, _ := staff.token(t, "plantstore-ci", "plants:read")
	staffSpare, _ := staff.token(t, "plantstore-ci", "plants:read") // first used after its provider stops
	customersTok, _ := customers.token(t, "plantstore-ci", "plants:read")
	// The customers' key-1 signing a token that names staff, whose key
	// has the same kid: only staff's own key-1 may verify it.
	customersJWK := filepath.Join(dir, "customers-key.json")
	if err := os.WriteFile(customersJWK, customersKey, 0o600); err != nil {
		t.Fatal(err)
	}
	crossed := mint(t, bin, customersJWK, "-kid", "key-1", "-iss", staff.issuer,
		"-sub", "plantstore-ci", "-aud", "plantstore", "-scope", "plants:read", "-ttl", "5m")
	// A user of staff's app signs in: an ID token (for the app, no typ)
	// beside an at+jwt access token for plantstore whose client_id is the
	// app's, not one staff lists.
	appAccess, appID := staff.signIn(t, "plantstore-app", "gardener")
	var idHeader map[string]any
	var idClaims struct {
		Aud string `json:"aud"`
	}
	jwtPart(t, appID, 0, &idHeader)
	jwtPart(t, appID, 1, &idClaims)
	if idClaims.Aud != "plantstore-app" || idHeader["typ"] != nil {
		t.Fatalf("staff's ID token: header %v, aud %q; want no typ and the app as audience", idHeader, idClaims.Aud)
	}

	tests := []struct {
		name, token, requestID string
		status                 int
		body                   string // exact for 200, a substring otherwise
		log                    map[string]any
	}{
		{"staff token", staffTok, "iss-staff", 200, wantStaffPlants,
			map[string]any{"iss": "staff", "sub": "plantstore-ci", "status": 200.0}},
		{"customers token, same sub", customersTok, "iss-customers", 200, wantCustomersPlants,
			map[string]any{"iss": "customers", "sub": "plantstore-ci", "status": 200.0}},
		{"names staff, signed by the customers' key-1", crossed, "iss-crossed", 401, `"error":401`,
			map[string]any{"iss": "staff", "auth_failure": "bad_signature", "status": 401.0}},
		{"unconfigured issuer", forge(t, bin, dir, "https://unconfigured.example", "key-1"), "iss-unknown", 401, `"error":401`,
			map[string]any{"iss": nil, "auth_failure": "unknown_issuer", "status": 401.0}},
		{"staff ID token where staff requires at+jwt", appID, "iss-id-token", 401, `"error":401`,
			map[string]any{"iss": "staff", "auth_failure": "token_type", "status": 401.0}},
		{"staff access token of a client staff does not list", appAccess, "iss-other-client", 401, `"error":401`,
			map[string]any{"iss": "staff", "auth_failure": "client", "status": 401.0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := get(t, gateway, tt.token, tt.requestID)
			if got.status != tt.status || tt.status == 200 && got.body != tt.body || !strings.Contains(got.body, tt.body) {
				t.Errorf("GET /plants via nginx: got %d %s, want %d %s", got.status, got.body, tt.status, tt.body)
			}
			if tt.status == 401 && !strings.Contains(got.auth, `error="invalid_token"`) {
				t.Errorf("WWW-Authenticate %q, want error=\"invalid_token\"", got.auth)
			}
			entry := plantstoreLine(t, service.log, tt.requestID)
			for k, want := range tt.log {
				if entry[k] != want {
					t.Errorf("access line %s = %v, want %v (line %v)", k, entry[k], want, entry)
				}
			}
		})
	}

	t.Run("protected resource metadata through the gateway", func(t *testing.T) {
		r := call(t, http.MethodGet, gateway, "/.well-known/oauth-protected-resource", "", "iss-metadata")
		var md struct {
			Resource             string           `json:"resource"`
			AuthorizationServers []string         `json:"authorization_servers"`
			DPoPAlgs             []string         `json:"dpop_signing_alg_values_supported"`
			DPoPRequired         *bool            `json:"dpop_bound_access_tokens_required"`
			TokenPolicies        []map[string]any `json:"plantstore_token_policies"`
		}
		if r.status != 200 || json.Unmarshal([]byte(r.body), &md) != nil {
			t.Fatalf("GET /.well-known/oauth-protected-resource via nginx: %d %s", r.status, r.body)
		}
		if md.Resource != public || fmt.Sprint(md.AuthorizationServers) != fmt.Sprint([]string{staff.issuer, customers.issuer}) ||
			!slices.Contains(md.DPoPAlgs, "ES256") || md.DPoPRequired == nil || *md.DPoPRequired {
			t.Errorf("metadata %s: want resource %s, authorization_servers [%s %s], DPoP with ES256, not required",
				r.body, public, staff.issuer, customers.issuer)
		}
		wantPolicy := fmt.Sprint([]map[string]any{{"authorization_server": staff.issuer, "token_types": []any{"at+jwt"},
			"client_restricted": true, "max_lifetime": 600.0, "max_stale": 3600.0,
			"enforced": []any{"token_types", "clients", "max_lifetime"}}})
		if got := fmt.Sprint(md.TokenPolicies); got != wantPolicy {
			t.Errorf("metadata plantstore_token_policies %s; want staff's alone, %s", got, wantPolicy)
		}
	})

	t.Run("DPoP client through the gateway", func(t *testing.T) {
		// Ed25519 proofs (oauth4webapi names the algorithm by RFC 9864's
		// fully-specified name) and ES256 ones; the refusals below replay
		// the ES256 run's.
		var run dpopClientRun
		for _, alg := range []string{"Ed25519", "ES256"} {
			run = dpopClient(t, public, customers.issuer, "dpop-client-"+alg, alg)
			checkDPoPRun(t, run, service.log, public, "dpop-client-"+alg)
		}

		metadataURL := public + "/.well-known/oauth-protected-resource"
		for _, tt := range []struct {
			name, scheme, proof, requestID string
			auth, code, reason             string // WWW-Authenticate's start and error; auth_failure
		}{
			{"the same proof again", "DPoP", run.DPoP, "dpop-replay", `DPoP realm="plantstore"`, "invalid_dpop_proof", "dpop_replay"},
			{"the bound token as a bearer token", "Bearer", "", "dpop-as-bearer", `Bearer realm="plantstore"`, "invalid_token", "dpop_bound"},
		} {
			h := http.Header{"Authorization": {tt.scheme + " " + run.AccessToken}}
			if tt.proof != "" {
				h.Set("DPoP", tt.proof)
			}
			got := callWith(t, http.MethodGet, gateway, "/plants", h, tt.requestID)
			if got.status != 401 || !strings.HasPrefix(got.auth, tt.auth) || !strings.Contains(got.auth, `error="`+tt.code+`"`) ||
				!strings.Contains(got.auth, `resource_metadata="`+metadataURL+`"`) {
				t.Errorf("%s: got %d %q, want 401 with WWW-Authenticate %s ... error=%q ... resource_metadata=%q",
					tt.name, got.status, got.auth, tt.auth, tt.code, metadataURL)
			}
			if e := plantstoreLine(t, service.log, tt.requestID); e["auth_failure"] != tt.reason {
				t.Errorf("%s: access line auth_failure %v, want %s", tt.name, e["auth_failure"], tt.reason)
			}
		}
	})

	t.Run("one provider stopped, both issuers keep working", func(t *testing.T) {
		// failures returns the failed fetches of staff's keys logged so far.
		failures := func() []map[string]any {
			var out []map[string]any
			for _, e := range logEntries(t, service.log) {
				if e["msg"] == "jwks fetch failed" && e["issuer"] == "staff" {
					out = append(out, e)
				}
			}
			return out
		}
		before := len(failures())
		staff.stop(t)
		var failed map[string]any
		waitFor(t, "a failed fetch of staff's keys", func() bool {
			if f := failures(); len(f) > before {
				failed = f[before]
				return true
			}
			return false
		})
		if failed["keeping_old_keys"] != true {
			t.Errorf("failed fetch logged as %v, want keeping_old_keys true", failed)
		}
		fresh, _ := customers.token(t, "plantstore-ci", "plants:read")
		for _, c := range []struct{ name, token, want string }{
			{"a staff token not seen before, by staff's last good keys", staffSpare, wantStaffPlants},
			{"a new customers token", fresh, wantCustomersPlants},
		} {
			if got := get(t, gateway, c.token, ""); got.status != 200 || got.body != c.want {
				t.Errorf("%s: got %d %q %s, want 200 %s", c.name, got.status, got.auth, got.body, c.want)
			}
		}
		if s := status("http://" + admin + "/readyz"); s != 200 {
			t.Errorf("/readyz with staff's provider down: %d, want 200 (last good keys)", s)
		}
	})
}

// TestGatewayCORSPassThrough runs plantstore with -cors-origins behind
// nginx with deploy/gateway/nginx.conf.in, which forwards every method of
// /plants and adds no CORS header itself: the preflights reach the service
// and are answered by it, and every answer carries each CORS header once,
// with the next page's Link through the gateway. It needs the built
// binary and nginx, not the identity provider.
func TestGatewayCORSPassThrough(t *testing.T) {
	bin := plantstoreBin(t)
	nginx := nginxBin(t)
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte(strings.Repeat("s", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	const origin = "https://app.example.com"
	_, api, _ := runPlantstore(t, bin, dir, "cors", catalog, "-jwt-hmac-secret-file", secret, "-cors-origins", origin)
	gateway, _ := startNginx(t, nginx, dir, filepath.Join(gatewayDir, "nginx.conf.in"), api)
	out, err := exec.CommandContext(t.Context(), bin, "token", "-hmac-secret-file", secret, "-sub", "plantstore-ci").Output()
	if err != nil {
		t.Fatalf("plantstore token: %v", err)
	}
	token := strings.TrimSpace(string(out))

	once := func(what string, h http.Header, name, want string) {
		t.Helper()
		if got := h.Values(name); len(got) != 1 || got[0] != want {
			t.Errorf("%s via nginx: %s %q; want it once, %q", what, name, got, want)
		}
	}
	preflight := func(from string) result {
		h := http.Header{}
		h.Set("Origin", from)
		h.Set("Access-Control-Request-Method", "GET")
		h.Set("Access-Control-Request-Headers", "authorization,x-request-id")
		return callWith(t, http.MethodOptions, gateway, "/plants?limit=1", h, "")
	}

	r := preflight(origin)
	if r.status != http.StatusNoContent {
		t.Fatalf("preflight via nginx from %s: %d %s; want 204 from plantstore", origin, r.status, r.body)
	}
	once("preflight", r.header, "Access-Control-Allow-Origin", origin)
	once("preflight", r.header, "Access-Control-Allow-Methods", "GET, HEAD")
	once("preflight", r.header, "Access-Control-Allow-Headers", "Authorization, X-Request-ID")
	once("preflight", r.header, "Access-Control-Max-Age", "600")

	if r := preflight("https://other.example"); r.status != http.StatusForbidden || r.header.Get("Access-Control-Allow-Origin") != "" || !strings.Contains(r.body, `"error":403`) {
		t.Errorf("preflight via nginx from another origin: %d %v %s; want plantstore's 403 without CORS headers", r.status, r.header, r.body)
	}

	for _, tt := range []struct {
		name, token string
		status      int
	}{{"a page", token, 200}, {"no token", "", 401}} {
		h := http.Header{}
		h.Set("Origin", origin)
		if tt.token != "" {
			h.Set("Authorization", "Bearer "+tt.token)
		}
		r := callWith(t, http.MethodGet, gateway, "/plants?limit=1", h, "cors-"+strings.ReplaceAll(tt.name, " ", "-"))
		if r.status != tt.status {
			t.Fatalf("GET via nginx (%s): %d %s; want %d", tt.name, r.status, r.body, tt.status)
		}
		once(tt.name, r.header, "Access-Control-Allow-Origin", origin)
		once(tt.name, r.header, "Access-Control-Expose-Headers", "Link, WWW-Authenticate, DPoP-Nonce, X-Request-ID, Retry-After")
		if r.header.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("GET via nginx (%s) allows credentials", tt.name)
		}
		if tt.status == 200 && !strings.Contains(r.header.Get("Link"), `rel="next"`) {
			t.Errorf("GET ?limit=1 via nginx: Link %q; want the next page's", r.header.Get("Link"))
		}
	}
}
