package check_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestPrometheusScrapesAsDeployed runs a real Prometheus on the shipped scrape
// job (deploy/prometheus/scrape.yml) against a running plantstore. Debian's
// Prometheus is built without Kubernetes discovery, so the job's
// kubernetes_sd_configs are replaced by a file_sd_configs file holding the
// labels endpointslice discovery gives: the plantstore-metrics "metrics"
// port, and a decoy (another Service) that the job's relabeling must drop.
// Everything else (path, scheme, relabeling) is the shipped job.
func TestPrometheusScrapesAsDeployed(t *testing.T) {
	bin := os.Getenv("PLANTSTORE_BIN")
	prom, err := exec.LookPath("prometheus")
	if bin == "" || err != nil {
		if os.Getenv("PLANTSTORE_REQUIRE_TOOLS") == "1" {
			t.Fatal("PLANTSTORE_BIN and prometheus are required (PLANTSTORE_REQUIRE_TOOLS=1)")
		}
		t.Skip("PLANTSTORE_BIN or prometheus is missing")
	}
	dir := t.TempDir()

	raw, err := os.ReadFile(filepath.Join("..", "prometheus", "scrape.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var shipped struct {
		ScrapeConfigs []map[string]any `json:"scrape_configs"`
	}
	if err := yaml.UnmarshalStrict(raw, &shipped); err != nil {
		t.Fatal(err)
	}
	if len(shipped.ScrapeConfigs) != 1 || shipped.ScrapeConfigs[0]["job_name"] != "plantstore" {
		t.Fatalf("scrape.yml: want one job named plantstore, got %v", shipped.ScrapeConfigs)
	}
	job := shipped.ScrapeConfigs[0]
	checkKubernetesSD(t, job["kubernetes_sd_configs"])

	// A plantstore with a static key: its admin port is the target.
	keys := filepath.Join(dir, "keys")
	if out, err := exec.CommandContext(t.Context(), bin, "keygen", "-alg", "ES256", "-out", keys).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	service := start(t, dir, "plantstore", bin, "serve", "-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0",
		"-jwt-key-file", keys+".jwks.json", "-shutdown-delay", "0s")
	var api, admin string
	waitFor(t, "plantstore listening line", func() bool {
		for _, e := range logEntries(t, service.log) {
			if e["msg"] == "listening" {
				api, _ = e["api_addr"].(string)
				admin, _ = e["admin_addr"].(string)
				return true
			}
		}
		return false
	})

	targets := []map[string]any{
		{"targets": []string{admin}, "labels": map[string]string{
			"__meta_kubernetes_namespace":               "plantstore",
			"__meta_kubernetes_service_name":            "plantstore-metrics",
			"__meta_kubernetes_endpointslice_port_name": "metrics",
			"__meta_kubernetes_pod_name":                "plantstore-7d9f8-abcde",
		}},
		{"targets": []string{api}, "labels": map[string]string{
			"__meta_kubernetes_namespace":               "plantstore",
			"__meta_kubernetes_service_name":            "plantstore",
			"__meta_kubernetes_endpointslice_port_name": "http",
			"__meta_kubernetes_pod_name":                "plantstore-7d9f8-abcde",
		}},
	}
	writeJSON(t, filepath.Join(dir, "targets.json"), targets)
	delete(job, "kubernetes_sd_configs")
	job["file_sd_configs"] = []any{map[string]any{"files": []string{filepath.Join(dir, "targets.json")}, "refresh_interval": "1s"}}
	job["scrape_interval"], job["scrape_timeout"] = "1s", "1s"
	config := filepath.Join(dir, "prometheus.yml")
	writeJSON(t, config, map[string]any{"scrape_configs": []any{job}})
	if out, err := exec.CommandContext(t.Context(), "promtool", "check", "config", config).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}

	web := "127.0.0.1:" + strconv.Itoa(freePort(t))
	start(t, dir, "prometheus", prom, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+web)
	type series struct {
		Metric map[string]string `json:"metric"`
		Value  []any             `json:"value"`
	}
	query := func(q string) []series {
		resp, err := http.Get("http://" + web + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var body struct {
			Data struct {
				Result []series `json:"result"`
			} `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&body) != nil {
			return nil
		}
		return body.Data.Result
	}
	// The first scrape comes about 6 s after start (discovery is throttled to 5 s).
	var up []series
	waitFor(t, `up{job="plantstore"} == 1`, func() bool {
		up = query(`up{job="plantstore"}`)
		return len(up) > 0 && up[0].Value[1] == "1"
	})
	if len(up) != 1 {
		t.Fatalf(`up{job="plantstore"}: got %v, want one series (the decoy on the API port dropped)`, up)
	}
	// Discovery hands over both targets at once, so by now relabeling has
	// kept or dropped each.
	resp, err := http.Get("http://" + web + "/api/v1/targets")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tg struct {
		Data struct {
			Active []struct {
				ScrapeURL string `json:"scrapeUrl"`
			} `json:"activeTargets"`
			Dropped []struct {
				DiscoveredLabels map[string]string `json:"discoveredLabels"`
			} `json:"droppedTargets"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tg); err != nil {
		t.Fatal(err)
	}
	if len(tg.Data.Active) != 1 || tg.Data.Active[0].ScrapeURL != "http://"+admin+"/metrics" {
		t.Errorf("active targets %v, want only http://%s/metrics", tg.Data.Active, admin)
	}
	if len(tg.Data.Dropped) != 1 || tg.Data.Dropped[0].DiscoveredLabels["__address__"] != api {
		t.Errorf("dropped targets %v, want the decoy %s", tg.Data.Dropped, api)
	}
	for k, want := range map[string]string{"instance": admin, "namespace": "plantstore", "pod": "plantstore-7d9f8-abcde"} {
		if got := up[0].Metric[k]; got != want {
			t.Errorf("up label %s = %q, want %q (series %v)", k, got, want, up[0].Metric)
		}
	}
	if got := query(`plantstore_build_info{job="plantstore"}`); len(got) != 1 {
		t.Errorf("plantstore_build_info: got %v, want one series", got)
	}
}

// checkKubernetesSD checks the discovery block Debian's Prometheus cannot
// parse: endpointslice discovery limited to the overlays' namespaces.
func checkKubernetesSD(t testing.TB, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var sd []struct {
		Role       string `json:"role"`
		Namespaces struct {
			Names []string `json:"names"`
		} `json:"namespaces"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sd); err != nil || len(sd) != 1 {
		t.Fatalf("kubernetes_sd_configs %s: %v, want one endpointslice entry with namespaces.names", b, err)
	}
	if sd[0].Role != "endpointslice" || fmt.Sprint(sd[0].Namespaces.Names) != "[plantstore plantstore-dev]" {
		t.Errorf("kubernetes_sd_configs %s: want role endpointslice in namespaces [plantstore plantstore-dev]", b)
	}
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
