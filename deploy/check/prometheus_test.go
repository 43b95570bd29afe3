package check_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"

	"github.com/plantstore/plantstore/deploy/check"
)

// futureMetrics are the metrics the rules may read before the binary
// exports them: their alerts are unit-tested with promtool, and their
// dashboard panels come with them. None today.
var futureMetrics []string

// kubernetesSD checks the discovery block of the shipped scrape job, which
// Debian's Prometheus cannot parse: endpointslice discovery in any
// namespace (the relabeling picks the Service by its labels), so that an
// overlay's namespace needs no change here.
func kubernetesSD(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var sd []map[string]any
	if err := json.Unmarshal(b, &sd); err != nil || len(sd) != 1 {
		return fmt.Errorf("kubernetes_sd_configs %s: want one entry", b)
	}
	if sd[0]["role"] != "endpointslice" {
		return fmt.Errorf("kubernetes_sd_configs %s: want role endpointslice", b)
	}
	if ns, ok := sd[0]["namespaces"]; ok {
		return fmt.Errorf("kubernetes_sd_configs names namespaces %v: the job must find the Service wherever an overlay puts it", ns)
	}
	if len(sd[0]) != 1 {
		return fmt.Errorf("kubernetes_sd_configs %s: want role only", b)
	}
	return nil
}

// scrapeJob reads the one job of a scrape configuration file.
func scrapeJob(t testing.TB, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []map[string]any `json:"scrape_configs"`
	}
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.ScrapeConfigs) != 1 || cfg.ScrapeConfigs[0]["job_name"] != check.Job {
		t.Fatalf("%s: want one job named %s, got %v", path, check.Job, cfg.ScrapeConfigs)
	}
	return cfg.ScrapeConfigs[0]
}

func TestScrapeJobDiscovery(t *testing.T) {
	tests := []struct {
		path, want string // want: "" for no error
	}{
		{filepath.Join("..", "prometheus", "scrape.yml"), ""},
		// Before issue 17 the job listed the overlays' namespaces.
		{filepath.Join("testdata", "before", "scrape.yml"), "names namespaces"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			err := kubernetesSD(scrapeJob(t, tt.path)["kubernetes_sd_configs"])
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("%s: %v, want %q", tt.path, err, tt.want)
			}
		})
	}
}

// promServer is a running Prometheus.
type promServer struct {
	t   testing.TB
	url string
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
}

func (s promSample) float() float64 {
	if len(s.Value) != 2 {
		return math.NaN()
	}
	str, _ := s.Value[1].(string)
	f, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return math.NaN()
	}
	return f
}

// api GETs a Prometheus API path and decodes its data into v.
func (p *promServer) api(path string, v any) error {
	resp, err := http.Get(p.url + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return err
	}
	if body.Status != "success" {
		return errors.New(body.Error)
	}
	return json.Unmarshal(body.Data, v)
}

// query evaluates an instant query; an error is the query's fault.
func (p *promServer) query(q string) ([]promSample, error) {
	var data struct {
		Result []promSample `json:"result"`
	}
	err := p.api("/api/v1/query?query="+url.QueryEscape(q), &data)
	return data.Result, err
}

// first returns the value of the first sample of q, or NaN.
func (p *promServer) first(q string) float64 {
	s, err := p.query(q)
	if err != nil || len(s) == 0 {
		return math.NaN()
	}
	return s[0].float()
}

// waitAfter waits until the newest sample of the selector q is stamped
// after since: a scrape (up) or a rule evaluation (a recorded series) that
// began after since.
func (p *promServer) waitAfter(q string, since time.Time) {
	p.t.Helper()
	waitFor(p.t, q+" after "+since.Format(time.RFC3339Nano), func() bool {
		return p.first("timestamp("+q+")") > float64(since.UnixMilli())/1000
	})
}

// send makes one API request and returns its status.
func send(t testing.TB, method, target, token string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestPrometheusAsDeployed runs a real Prometheus as the manifests set it
// up, against running plantstores: one with a key file and a catalog file,
// one on PostgreSQL, one with an issuers file of two issuers, and one with
// an issuers file of which one issuer never gets keys. It runs the shipped
// scrape job (its Kubernetes discovery swapped for a file holding the
// labels endpointslice discovery gives, since Debian's Prometheus is built
// without it), the prod overlay's Probe of the public URL (the job the
// Prometheus Operator makes of it, through a real blackbox exporter, the
// public URL swapped for the first plantstore's) and the shipped
// PrometheusRule, evaluated every second. After traffic of every kind it
// checks that the job keeps only the metrics port, that every rule
// evaluates without error, that no alert is pending or firing but the two
// that the issuer without keys must raise, that the rules read metrics
// that exist (or are known to be coming), that a scrape fits the monitors'
// sampleLimit, that every dashboard query finds data, and that the store
// runbook names every store.
func TestPrometheusAsDeployed(t *testing.T) {
	bin := plantstoreBin(t)
	prom := tool(t, "prometheus", " (Debian: apt-get install prometheus)")
	blackbox := tool(t, "prometheus-blackbox-exporter", " (Debian: apt-get install prometheus-blackbox-exporter)")
	promtool(t)
	dir := t.TempDir()

	job := scrapeJob(t, filepath.Join("..", "prometheus", "scrape.yml"))
	if err := kubernetesSD(job["kubernetes_sd_configs"]); err != nil {
		t.Fatal(err)
	}

	// A plantstore with a static key and a catalog: its admin port is the target.
	keys := filepath.Join(dir, "keys")
	if out, err := exec.CommandContext(t.Context(), bin, "keygen", "-alg", "ES256", "-out", keys).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	token, err := exec.CommandContext(t.Context(), bin, "token", "-key", keys+".key", "-sub", "plantstore-ci", "-ttl", "10m").Output()
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	data := filepath.Join(dir, "catalog.json")
	if err := os.WriteFile(data, []byte(catalog), 0o600); err != nil {
		t.Fatal(err)
	}
	// A second one on PostgreSQL (a snapshot), for the store's metrics:
	// the pool, the snapshot's age, the reloads.
	dsn := newSchema(t)
	for _, args := range [][]string{{"migrate", "-database-url", dsn}, {"import", "-database-url", dsn, data}} {
		if out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("plantstore %s: %v\n%s", args[0], err, out)
		}
	}
	_, dbAPI, dbAdmin := startDatabaseService(t, bin, dir, "plantstore-db", dsn, keys+".jwks.json")
	// It shares its state in a Redis, as a deployment of several replicas
	// does, for the shared-state rule and panels.
	redis := startRedis(t, dir, tool(t, "redis-server", " (Debian: apt-get install redis-server)"))
	service := start(t, dir, "plantstore", bin, "serve", "-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0",
		"-jwt-key-file", keys+".jwks.json", "-data", data, "-shutdown-delay", "0s",
		"-redis-url", "redis://"+redis.addr)
	api, admin := waitServing(t, service, "plantstore")

	// Two with an issuers file. The first has two issuers with keys, one
	// of them the real identity provider the API Probe gets its tokens
	// from (oidc-provider, by discovery): no alert may fire for it (with
	// the "default" issuer's keys gauge of a service that has none, one
	// did, forever). In the second, the issuer broken never gets a key
	// (its JWKS URL answers nothing): that one must be found.
	requireTools(t)
	provider := startIdP(t, dir, freePort(t), "idp", genKey(t, "prometheus-key-1"))
	var issuerKeys []string
	for _, name := range []string{"staff"} {
		prefix := filepath.Join(dir, name)
		if out, err := exec.CommandContext(t.Context(), bin, "keygen", "-alg", "ES256", "-out", prefix).CombinedOutput(); err != nil {
			t.Fatalf("keygen: %v\n%s", err, out)
		}
		issuerKeys = append(issuerKeys, prefix)
	}
	issuersFile := func(name, last string) string {
		path := filepath.Join(dir, name+".yaml")
		doc := fmt.Sprintf("issuers:\n  - name: staff\n    issuer: https://staff.example.com\n    key_file: %s.jwks.json\n%s", issuerKeys[0], last)
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := issuersFile("issuers", fmt.Sprintf("  - name: customers\n    issuer: %s\n", provider.issuer))
	bad := issuersFile("issuers-nokeys", "  - name: broken\n    issuer: https://broken.example.com\n    jwks_url: http://127.0.0.1:1/jwks\n")
	issuersService := start(t, dir, "plantstore-issuers", bin, "serve", "-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0",
		"-jwt-issuers-file", good, "-data", data, "-shutdown-delay", "0s")
	issuersAPI, issuersAdmin := waitServing(t, issuersService, "plantstore-issuers")
	noKeysService := start(t, dir, "plantstore-nokeys", bin, "serve", "-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0",
		"-jwt-issuers-file", bad, "-data", data, "-shutdown-delay", "0s")
	_, noKeysAdmin := waitListening(t, noKeysService, "plantstore-nokeys")
	staffToken, err := exec.CommandContext(t.Context(), bin, "token", "-key", issuerKeys[0]+".key", "-iss", "https://staff.example.com", "-sub", "plantstore-ci", "-ttl", "10m").Output()
	if err != nil {
		t.Fatalf("token: %v", err)
	}

	// The blackbox exporter, with the modules the Probes name
	// (deploy/prometheus/blackbox.yml), the API's token URL pointed at the
	// identity provider and TLS not required (the test speaks plain HTTP).
	modules := blackboxModules(t)
	secret := filepath.Join(dir, "client-secret")
	writeFile(t, secret, []byte("ci-secret\n"))
	modules["plantstore_api"] = apiModule(t, provider.issuer+"/token", "plantstore-probe", secret)
	modules["plantstore_api"].(map[string]any)["http"].(map[string]any)["fail_if_not_ssl"] = false
	bbConfig := filepath.Join(dir, "blackbox.yml")
	bb, err := yaml.Marshal(map[string]any{"modules": modules})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, bbConfig, bb)
	bbAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	start(t, dir, "blackbox", blackbox, "--config.file="+bbConfig, "--web.listen-address="+bbAddr)

	meta := func(name, component, port string) map[string]string {
		return map[string]string{
			"__meta_kubernetes_namespace":                                 "plantstore",
			"__meta_kubernetes_service_name":                              name,
			"__meta_kubernetes_service_label_app_kubernetes_io_name":      "plantstore",
			"__meta_kubernetes_service_label_app_kubernetes_io_component": component,
			"__meta_kubernetes_endpointslice_port_name":                   port,
			"__meta_kubernetes_pod_name":                                  "plantstore-7d9f8-abcde",
			"__meta_kubernetes_pod_label_env":                             check.PagingEnv,
		}
	}
	other := meta("billing-metrics", "metrics", "metrics")
	other["__meta_kubernetes_service_label_app_kubernetes_io_name"] = "billing"
	podMeta := func(pod string) map[string]string {
		m := meta("plantstore-metrics", "metrics", "metrics")
		m["__meta_kubernetes_pod_name"] = pod
		return m
	}
	const noKeysPod = "plantstore-7d9f8-pqrst"
	targets := []map[string]any{
		{"targets": []string{admin}, "labels": meta("plantstore-metrics", "metrics", "metrics")},
		{"targets": []string{dbAdmin}, "labels": podMeta("plantstore-7d9f8-fghij")},
		{"targets": []string{issuersAdmin}, "labels": podMeta("plantstore-7d9f8-klmno")},
		{"targets": []string{noKeysAdmin}, "labels": podMeta(noKeysPod)},
		// Decoys the relabeling must drop: the API port, another app's metrics.
		{"targets": []string{api}, "labels": meta("plantstore", "", "http")},
		{"targets": []string{"127.0.0.1:1"}, "labels": other},
	}
	writeJSON(t, filepath.Join(dir, "targets.json"), targets)
	delete(job, "kubernetes_sd_configs")
	job["file_sd_configs"] = []any{map[string]any{"files": []string{filepath.Join(dir, "targets.json")}, "refresh_interval": "1s"}}
	job["scrape_interval"], job["scrape_timeout"] = "1s", "1s"
	rule := shippedRule(t)
	rules := writeRules(t, dir, rule, "1s")
	config := filepath.Join(dir, "prometheus.yml")
	writeJSON(t, config, map[string]any{
		"global":         map[string]any{"evaluation_interval": "1s"},
		"rule_files":     []string{rules},
		"scrape_configs": []any{job, probeJob(t, "plantstore", bbAddr, "http://"+api), probeJob(t, "plantstore-api", bbAddr, "http://"+issuersAPI)},
	})
	if out, err := exec.CommandContext(t.Context(), "promtool", "check", "config", config).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}

	web := "127.0.0.1:" + strconv.Itoa(freePort(t))
	start(t, dir, "prometheus", prom, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+web)
	p := &promServer{t: t, url: "http://" + web}
	// The first scrape comes about 6 s after start (discovery is throttled to 5 s).
	waitFor(t, `up{job="plantstore"} == 1 on all four`, func() bool { return p.first(`sum(up{job="plantstore"})`) == 4 })

	// Two rounds of traffic of every kind, each followed by a scrape, so
	// that every rate has an increase to show.
	tokens := map[string]string{api: strings.TrimSpace(string(token)), dbAPI: strings.TrimSpace(string(token)), issuersAPI: strings.TrimSpace(string(staffToken))}
	for range 2 {
		for _, r := range []struct {
			method, path string
			token        bool // the service's good token, or "not-a-jwt" for bad
			bad          bool
			status       int
		}{
			{"GET", "/plants", true, false, 200},
			{"GET", "/plants", true, false, 200},
			{"HEAD", "/plants", true, false, 200},
			{"GET", "/plants?limit=1", true, false, 200},
			{"GET", "/plants", false, false, 401},
			{"GET", "/plants", false, true, 401},
			{"GET", "/plants?limit=x", true, false, 400},
			{"POST", "/plants", true, false, 405},
			{"GET", "/elsewhere", true, false, 404},
		} {
			for a, tok := range tokens {
				switch {
				case r.bad:
					tok = "not-a-jwt"
				case !r.token:
					tok = ""
				}
				if got := send(t, r.method, "http://"+a+r.path, tok); got != r.status {
					t.Fatalf("%s %s: %d, want %d", r.method, a+r.path, got, r.status)
				}
			}
		}
		// An import the snapshot reloads, for the reload metrics.
		reloads := successfulReloads(t, dbAdmin)
		if out, err := exec.CommandContext(t.Context(), bin, "import", "-replace", "-database-url", dsn, data).CombinedOutput(); err != nil {
			t.Fatalf("plantstore import: %v\n%s", err, out)
		}
		waitFor(t, "the snapshot's reload", func() bool { return successfulReloads(t, dbAdmin) > reloads })
		p.waitAfter(`up{job="plantstore"}`, time.Now())
	}
	p.waitAfter(`plantstore:availability_errors:ratio_rate5m`, time.Now())

	t.Run("scrape job keeps the metrics port only", func(t *testing.T) {
		var tg struct {
			Active []struct {
				ScrapeURL string            `json:"scrapeUrl"`
				Labels    map[string]string `json:"labels"`
			} `json:"activeTargets"`
			Dropped []struct {
				DiscoveredLabels map[string]string `json:"discoveredLabels"`
			} `json:"droppedTargets"`
		}
		if err := p.api("/api/v1/targets", &tg); err != nil {
			t.Fatal(err)
		}
		var scraped []string
		for _, a := range tg.Active {
			scraped = append(scraped, a.ScrapeURL)
		}
		slices.Sort(scraped)
		probeURL := "http://" + bbAddr + "/probe?module=http_2xx&target=http%3A%2F%2F" + strings.ReplaceAll(api, ":", "%3A") + "%2F.well-known%2Foauth-protected-resource"
		apiProbeURL := "http://" + bbAddr + "/probe?module=plantstore_api&target=" + url.QueryEscape("http://"+issuersAPI+check.APIProbePath)
		if want := slices.Sorted(slices.Values([]string{"http://" + admin + "/metrics", "http://" + dbAdmin + "/metrics", "http://" + issuersAdmin + "/metrics", "http://" + noKeysAdmin + "/metrics", probeURL, apiProbeURL})); !slices.Equal(scraped, want) {
			t.Fatalf("active targets %v, want only the metrics ports %v", scraped, want)
		}
		var dropped []string
		for _, d := range tg.Dropped {
			dropped = append(dropped, d.DiscoveredLabels["__address__"])
		}
		slices.Sort(dropped)
		if want := []string{"127.0.0.1:1", api}; !slices.Equal(dropped, slices.Sorted(slices.Values(want))) {
			t.Errorf("dropped targets %v, want the decoys %v", dropped, want)
		}
		for _, a := range tg.Active {
			if a.ScrapeURL != "http://"+admin+"/metrics" {
				continue
			}
			for k, want := range map[string]string{"job": check.Job, "instance": admin, "namespace": "plantstore", "pod": "plantstore-7d9f8-abcde", "env": check.PagingEnv} {
				if got := a.Labels[k]; got != want {
					t.Errorf("target label %s = %q, want %q", k, got, want)
				}
			}
		}
	})

	t.Run("every rule evaluates", func(t *testing.T) {
		var rg struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		}
		if err := p.api("/api/v1/rules", &rg); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, g := range rg.Groups {
			for _, r := range g.Rules {
				n++
				if r.Health != "ok" || r.LastError != "" {
					t.Errorf("rule %s (group %s): health %q, error %q", r.Name, g.Name, r.Health, r.LastError)
				}
			}
		}
		want := 0
		for _, g := range rule.Spec.Groups {
			want += len(g.Rules)
		}
		if n != want {
			t.Errorf("Prometheus loaded %d rules, want %d", n, want)
		}
		// The services are healthy: the SLIs read 0, and no alert is
		// pending or firing but those of the issuer without keys.
		for _, q := range []string{`plantstore:availability_errors:ratio_rate5m`, `plantstore:latency_slow:ratio_rate5m`} {
			if v := p.first(q); math.IsNaN(v) || math.Abs(v) > 1e-9 {
				t.Errorf("%s = %v, want 0", q, v)
			}
		}
		wantAlerts := []string{
			"PlantstoreKeyRefreshFailing pod=" + noKeysPod + " issuer=broken",
			// One for every replica without keys: no pod named.
			"PlantstoreNoVerificationKeys pod= issuer=broken",
		}
		alerts := func() []string {
			s, err := p.query(`ALERTS`)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, a := range s {
				out = append(out, a.Metric["alertname"]+" pod="+a.Metric["pod"]+" issuer="+a.Metric["issuer"])
			}
			slices.Sort(out)
			return slices.Compact(out)
		}
		waitFor(t, "the alerts of the issuer without keys", func() bool { return len(alerts()) >= len(wantAlerts) })
		// One more evaluation of every group, for any other alert to show.
		p.waitAfter(`plantstore:availability_errors:ratio_rate5m`, time.Now())
		if got := alerts(); !slices.Equal(got, wantAlerts) {
			t.Errorf("alerts pending or firing: %q, want only %q", got, wantAlerts)
		}
	})

	t.Run("the probes reach the public URL", func(t *testing.T) {
		for _, job := range []string{check.ProbeJob, check.APIProbeJob} {
			s, err := p.query(`probe_success{job="` + job + `"}`)
			if err != nil || len(s) != 1 || s[0].float() != 1 || s[0].Metric["env"] != check.PagingEnv || s[0].Metric["namespace"] != "plantstore" {
				t.Errorf("probe_success of %s %v (%v), want one series of 1 with env %s and namespace plantstore", job, s, err, check.PagingEnv)
			}
		}
	})

	t.Run("the store runbook names every store", func(t *testing.T) {
		s, err := p.query(`group by (store) (plantstore_store_request_duration_seconds_count{job="plantstore"})`)
		if err != nil || len(s) < 3 {
			t.Fatalf("stores %v (%v), want memory, postgres and snapshot", s, err)
		}
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", "runbooks", "store-errors.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range s {
			if store := x.Metric["store"]; !strings.Contains(string(b), "`"+store+"`") {
				t.Errorf("store-errors.md does not name the store %s", store)
			}
		}
	})

	var exported []string
	if err := p.api(`/api/v1/label/__name__/values`, &exported); err != nil {
		t.Fatal(err)
	}

	t.Run("the rules read metrics that exist", func(t *testing.T) {
		for _, m := range ruleMetrics(rule) {
			switch {
			case slices.Contains(exported, m) && slices.Contains(futureMetrics, m):
				t.Logf("%s is exported now: add its dashboard panel and drop it from futureMetrics", m)
			case !slices.Contains(exported, m) && !slices.Contains(futureMetrics, m):
				t.Errorf("the rules read %s, which the service does not export", m)
			}
		}
	})

	t.Run("a scrape fits the monitors' sampleLimit", func(t *testing.T) {
		// The largest of the targets: the one on PostgreSQL exports more.
		samples := p.first(`max(scrape_samples_scraped{job="plantstore"})`)
		for _, limit := range monitorSampleLimits(t) {
			if !(samples < float64(limit)/2) {
				t.Errorf("a scrape after traffic holds %v samples; the monitors' sampleLimit %d should keep twice that", samples, limit)
			}
		}
		t.Logf("%v samples per scrape", samples)
	})

	t.Run("every dashboard query finds data", func(t *testing.T) {
		// hasData reports whether q gives at least one finite value.
		hasData := func(q string) (bool, error) {
			s, err := p.query(grafanaVars.Replace(q))
			finite := slices.ContainsFunc(s, func(x promSample) bool { v := x.float(); return !math.IsNaN(v) && !math.IsInf(v, 0) })
			return finite, err
		}
		for _, panel := range readDashboard(t).panels() {
			for _, tg := range panel.Targets {
				if ok, err := hasData(tg.Expr); !ok || err != nil {
					t.Errorf("panel %q, query %s: no data (%v)\n%s", panel.Title, tg.RefID, err, tg.Expr)
				}
			}
		}
		// The version variable, which the runbook link names: a version
		// for every replica.
		if ok, err := hasData(`group by (version) (plantstore_build_info{namespace=~"$namespace", job="plantstore"})`); !ok || err != nil {
			t.Errorf("the dashboard's version variable finds no version (%v)", err)
		}
		// A panel for a metric the service does not export finds nothing.
		decoy := `max by (instance) (plantstore_no_such_metric{namespace=~"$namespace", job="plantstore"})`
		if ok, err := hasData(decoy); ok || err != nil {
			t.Errorf("%s: data %v (%v), want none: the check could not fail", decoy, ok, err)
		}
	})
}

// successfulReloads returns plantstore_catalog_reloads_total{result="success"}
// of the service whose admin listener is at admin.
func successfulReloads(t testing.TB, admin string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^plantstore_catalog_reloads_total\{result="success"\} (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s/metrics has no plantstore_catalog_reloads_total{result=\"success\"}", admin)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// metricName matches the metric names of the service in an expression.
var metricName = regexp.MustCompile(`\bplantstore_[a-z_]+[a-z]\b`)

// ruleMetrics returns the service metrics the rules read, without the
// histogram suffixes.
func ruleMetrics(r *monitoringv1.PrometheusRule) []string {
	var out []string
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			for _, m := range metricName.FindAllString(rule.Expr.String(), -1) {
				if !slices.Contains(out, m) {
					out = append(out, m)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// monitorSampleLimits returns the sampleLimit of the shipped ServiceMonitor
// and PodMonitor.
func monitorSampleLimits(t testing.TB) []int64 {
	t.Helper()
	var out []int64
	for _, f := range []string{"../components/servicemonitor/servicemonitor.yaml", "../components/podmonitor/podmonitor.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := check.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			switch m := o.(type) {
			case *monitoringv1.ServiceMonitor:
				if m.Spec.SampleLimit == nil {
					t.Fatalf("%s: no sampleLimit", f)
				}
				out = append(out, int64(*m.Spec.SampleLimit))
			case *monitoringv1.PodMonitor:
				if m.Spec.SampleLimit == nil {
					t.Fatalf("%s: no sampleLimit", f)
				}
				out = append(out, int64(*m.Spec.SampleLimit))
			}
		}
	}
	return out
}

func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitListening waits for the listening line of the plantstore p runs, not
// for it to be ready, and returns its API and admin addresses.
func waitListening(t testing.TB, p *process, label string) (api, admin string) {
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
	return api, admin
}

// probeJob returns the scrape job the Prometheus Operator makes of the
// Probe name of the prod overlay (its generateProbeConfig: the job, the
// module, the static labels and the namespace, the target as a parameter
// and the instance, the prober as the address), with the prober at
// proberAddr and the public URL's origin swapped for each of origins.
func probeJob(t testing.TB, name, proberAddr string, origins ...string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "overlays", "prod", "probe.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := check.Decode(b)
	if err != nil {
		t.Fatalf("probe.yaml: %v", err)
	}
	var pr *monitoringv1.Probe
	for _, o := range objs {
		if p, ok := o.(*monitoringv1.Probe); ok && p.Name == name {
			pr = p
		}
	}
	if pr == nil {
		t.Fatalf("probe.yaml holds no Probe %s", name)
	}
	sc := pr.Spec.Targets.StaticConfig
	var targets []string
	for _, tg := range sc.Targets {
		u, err := url.Parse(string(tg))
		if err != nil {
			t.Fatal(err)
		}
		for _, origin := range origins {
			targets = append(targets, origin+u.RequestURI())
		}
	}
	labels := map[string]string{"namespace": "plantstore"}
	for k, v := range sc.Labels {
		labels[k] = v
	}
	path := pr.Spec.ProberSpec.Path
	if path == "" {
		path = "/probe"
	}
	return map[string]any{
		"job_name":        "probe/plantstore/" + pr.Name,
		"metrics_path":    path,
		"scrape_interval": "1s",
		"scrape_timeout":  "1s",
		"params":          map[string][]string{"module": {pr.Spec.Module}},
		"static_configs":  []any{map[string]any{"targets": targets, "labels": labels}},
		"relabel_configs": []any{
			map[string]any{"target_label": "job", "replacement": pr.Spec.JobName},
			map[string]any{"source_labels": []string{"__address__"}, "target_label": "__param_target"},
			map[string]any{"source_labels": []string{"__param_target"}, "target_label": "instance"},
			map[string]any{"target_label": "__address__", "replacement": proberAddr},
		},
	}
}
