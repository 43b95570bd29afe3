package check_test

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/plantstore/plantstore/deploy/check"
)

// blackboxFile is the blackbox exporter's modules the Probes name.
const blackboxFile = "../prometheus/blackbox.yml"

// blackboxModules reads deploy/prometheus/blackbox.yml.
func blackboxModules(t testing.TB) map[string]any {
	t.Helper()
	b, err := os.ReadFile(blackboxFile)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Modules map[string]any `json:"modules"`
	}
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		t.Fatalf("%s: %v", blackboxFile, err)
	}
	return cfg.Modules
}

// apiModule returns a copy of the shipped plantstore_api module whose
// token request goes to tokenURL as client, with the secret in
// secretFile.
func apiModule(t testing.TB, tokenURL, client, secretFile string) map[string]any {
	t.Helper()
	b, err := yaml.Marshal(blackboxModules(t)["plantstore_api"])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	o := m["http"].(map[string]any)["oauth2"].(map[string]any)
	o["token_url"], o["client_id"], o["client_secret_file"] = tokenURL, client, secretFile
	return m
}

// probeResult is what one probe of the blackbox exporter reported.
type probeResult struct {
	success bool
	status  int
	body    string
}

var (
	probeSuccessRe = regexp.MustCompile(`(?m)^probe_success (\d+)$`)
	probeStatusRe  = regexp.MustCompile(`(?m)^probe_http_status_code (\d+)$`)
)

// probeOnce asks the blackbox exporter at bb to probe target with module.
func probeOnce(t testing.TB, bb, module, target string) probeResult {
	t.Helper()
	resp, err := http.Get("http://" + bb + "/probe?" + url.Values{"module": {module}, "target": {target}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := probeSuccessRe.FindSubmatch(b)
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("probe %s of %s: %d\n%s", module, target, resp.StatusCode, b)
	}
	r := probeResult{success: string(m[1]) == "1", body: string(b)}
	if s := probeStatusRe.FindSubmatch(b); s != nil {
		r.status, _ = strconv.Atoi(string(s[1]))
	}
	return r
}

// TestProbeWithToken runs the synthetic check of the prod overlay for
// real: a blackbox exporter with the modules of deploy/prometheus/blackbox.yml
// (the token URL pointed at a real oidc-provider, the client secret in a
// file), nginx with deploy/gateway/nginx.conf.in, and plantstore trusting
// the provider by discovery. The plantstore_api module gets a token by
// client credentials and GET /plants?limit=1 through the gateway succeeds;
// it fails when the service refuses the token (another audience, a scope
// it does not require), when the provider refuses the client (a wrong
// secret), and, as shipped, against a target in the clear. Then a real Prometheus scrapes the Probes of
// deploy/overlays/prod/probe.yaml as the Prometheus Operator would, the
// API Probe against the good gateway and the one whose service refuses the
// token: probe_success says 1 and 0.
func TestProbeWithToken(t *testing.T) {
	bin, nginx := requireTools(t)
	blackbox := tool(t, "prometheus-blackbox-exporter", " (Debian: apt-get install prometheus-blackbox-exporter)")
	prom := tool(t, "prometheus", " (Debian: apt-get install prometheus)")
	dir := t.TempDir()

	provider := startIdP(t, dir, freePort(t), "idp", genKey(t, "probe-key-1"))
	_, api := startPlantstore(t, bin, dir, provider.issuer)
	gateway, _ := startNginx(t, nginx, dir, filepath.Join(gatewayDir, "nginx.conf.in"), api)
	// A second service whose audience is not the one the provider puts in
	// its tokens: every token is refused (401).
	_, refusing, _ := runPlantstore(t, bin, dir, "plantstore-refusing", catalog,
		"-jwt-issuer", provider.issuer, "-jwt-audience", "billing", "-jwt-required-scope", "plants:read")
	refusingGateway, _ := startNginx(t, nginx, filepath.Join(dir, "refusing"), filepath.Join(gatewayDir, "nginx.conf.in"), refusing)

	secret, wrong := filepath.Join(dir, "client-secret"), filepath.Join(dir, "wrong-secret")
	writeFile(t, secret, []byte("ci-secret\n"))
	writeFile(t, wrong, []byte("not-the-secret\n"))
	token := provider.issuer + "/token"
	// The test's gateway speaks plain HTTP: the module it probes through
	// does not require TLS; the module as shipped does (below).
	clear := func(m map[string]any) map[string]any {
		m["http"].(map[string]any)["fail_if_not_ssl"] = false
		return m
	}
	modules := blackboxModules(t)
	modules["plantstore_api"] = clear(apiModule(t, token, "plantstore-probe", secret))
	modules["plantstore_api_as_shipped"] = apiModule(t, token, "plantstore-probe", secret)
	modules["plantstore_api_wrong_secret"] = clear(apiModule(t, token, "plantstore-probe", wrong))
	// plantstore-writer gets tokens of scope plants:write only.
	writer := clear(apiModule(t, token, "plantstore-writer", secret))
	writer["http"].(map[string]any)["oauth2"].(map[string]any)["scopes"] = []string{"plants:write"}
	modules["plantstore_api_writer"] = writer
	cfg, err := yaml.Marshal(map[string]any{"modules": modules})
	if err != nil {
		t.Fatal(err)
	}
	bbConfig := filepath.Join(dir, "blackbox.yml")
	writeFile(t, bbConfig, cfg)
	if out, err := exec.CommandContext(t.Context(), blackbox, "--config.check", "--config.file="+bbConfig).CombinedOutput(); err != nil {
		t.Fatalf("blackbox --config.check: %v\n%s", err, out)
	}
	bb := "127.0.0.1:" + strconv.Itoa(freePort(t))
	start(t, dir, "blackbox", blackbox, "--config.file="+bbConfig, "--web.listen-address="+bb)
	waitFor(t, "the blackbox exporter", func() bool { return status("http://"+bb+"/metrics") == 200 })

	target := "http://" + gateway + check.APIProbePath
	tests := []struct {
		name, module, target string
		success              bool
		status               int // the service's answer; 0 when no request was sent
	}{
		{"a token of the provider, through the gateway", "plantstore_api", target, true, 200},
		{"the metadata, no token", "http_2xx", "http://" + gateway + check.ProbePath, true, 200},
		{"a service that refuses the token (audience)", "plantstore_api", "http://" + refusingGateway + check.APIProbePath, false, 401},
		{"a token without the required scope", "plantstore_api_writer", target, false, 403},
		{"a client the provider refuses", "plantstore_api_wrong_secret", target, false, 0},
		// The answer came (the token went out in the clear), and fails.
		{"as shipped, a target in the clear", "plantstore_api_as_shipped", target, false, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := probeOnce(t, bb, tt.module, tt.target)
			if r.success != tt.success || r.status != tt.status {
				t.Errorf("probe %s of %s: success %v, status %d; want %v, %d\n%s", tt.module, tt.target, r.success, r.status, tt.success, tt.status, r.body)
			}
		})
	}

	// The Probes as the Prometheus Operator makes scrape jobs of them.
	config := filepath.Join(dir, "prometheus.yml")
	writeJSON(t, config, map[string]any{
		"global": map[string]any{"evaluation_interval": "1s"},
		"scrape_configs": []any{
			probeJob(t, "plantstore", bb, "http://"+gateway),
			probeJob(t, "plantstore-api", bb, "http://"+gateway, "http://"+refusingGateway),
		},
	})
	if out, err := exec.CommandContext(t.Context(), "promtool", "check", "config", config).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	web := "127.0.0.1:" + strconv.Itoa(freePort(t))
	start(t, dir, "prometheus", prom, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+web)
	p := &promServer{t: t, url: "http://" + web}
	waitFor(t, "three probe results", func() bool { return p.first(`count(probe_success)`) == 3 })
	for _, tt := range []struct {
		job, instance string
		want          float64
	}{
		{check.ProbeJob, "http://" + gateway + check.ProbePath, 1},
		{check.APIProbeJob, target, 1},
		{check.APIProbeJob, "http://" + refusingGateway + check.APIProbePath, 0},
	} {
		q := `probe_success{job="` + tt.job + `", instance="` + tt.instance + `", env="production", namespace="plantstore"}`
		if got := p.first(q); got != tt.want {
			t.Errorf("%s = %v, want %v", q, got, tt.want)
		}
	}
	if s, err := p.query(`probe_success{job="` + check.APIProbeJob + `"}`); err != nil || len(s) != 2 || !strings.Contains(s[0].Metric["instance"], check.APIProbePath) {
		t.Errorf("API probe series %v (%v), want two, of %s", s, err, check.APIProbePath)
	}
}
