package check_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/plantstore/plantstore/deploy/check"
)

const rulesDir = "../components/prometheus-rules"

// ruleTests are promtool's unit test files of the rules, in rulesDir.
var ruleTests = []string{"prometheusrule_test.yaml", "prometheusrule_slow_test.yaml"}

// promtool returns promtool's path; without it the test skips, or fails
// under TEST_REQUIRE_TOOLS=1.
func promtool(t testing.TB) string {
	t.Helper()
	return tool(t, "promtool", " (Debian: apt-get install prometheus)")
}

// shippedRule returns the PrometheusRule of deploy/components/prometheus-rules.
func shippedRule(t testing.TB) *monitoringv1.PrometheusRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rulesDir, "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := check.PrometheusRule(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// writeRules writes r as dir/plantstore.rules.yml, the name the unit test
// files load.
func writeRules(t testing.TB, dir string, r *monitoringv1.PrometheusRule, interval string) string {
	t.Helper()
	b, err := check.RulesFile(r, interval)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "plantstore.rules.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// recordingRule returns the recording rule of r named name.
func recordingRule(r *monitoringv1.PrometheusRule, name string) *monitoringv1.Rule {
	for g := range r.Spec.Groups {
		for i := range r.Spec.Groups[g].Rules {
			if r.Spec.Groups[g].Rules[i].Record == name {
				return &r.Spec.Groups[g].Rules[i]
			}
		}
	}
	panic("no recording rule " + name)
}

func alertRule(r *monitoringv1.PrometheusRule, name string) *monitoringv1.Rule {
	for g := range r.Spec.Groups {
		for i := range r.Spec.Groups[g].Rules {
			if r.Spec.Groups[g].Rules[i].Alert == name {
				return &r.Spec.Groups[g].Rules[i]
			}
		}
	}
	panic("no alert " + name)
}

func TestPromtoolChecksRules(t *testing.T) {
	bin := promtool(t)
	tests := []struct {
		name   string
		mutate func(r *monitoringv1.PrometheusRule)
		want   string // "" for success, else a substring of promtool's output
	}{
		{"shipped", func(*monitoringv1.PrometheusRule) {}, ""},
		{"expression cut short", func(r *monitoringv1.PrometheusRule) {
			alertRule(r, "PlantstoreStoreErrors").Expr = intstr.FromString("sum by (store) (rate(plantstore_store_request_duration_seconds_count[5m])")
		}, "parse error"},
		{"broken template", func(r *monitoringv1.PrometheusRule) {
			alertRule(r, "PlantstoreStoreErrors").Annotations["summary"] = "{{ $labels.store"
		}, "template"},
		{"unknown function", func(r *monitoringv1.PrometheusRule) {
			alertRule(r, "PlantstoreNoVerificationKeys").Expr = intstr.FromString("sum_by(plantstore_jwks_keys) == 0")
		}, "unknown function"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := shippedRule(t)
			tt.mutate(r)
			path := writeRules(t, t.TempDir(), r, "")
			out, err := exec.CommandContext(t.Context(), bin, "check", "rules", path).CombinedOutput()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("promtool check rules (%s): %v\n%s", tt.name, err, out)
			case tt.want != "" && (err == nil || !strings.Contains(string(out), tt.want)):
				t.Errorf("promtool check rules (%s): %v, want a failure naming %q\n%s", tt.name, err, tt.want, out)
			}
		})
	}
}

// unitTests reads promtool's test files: for each alert, whether some test
// expects it to fire and some expects it not to.
func unitTests(t testing.TB) (fires, quiet map[string]bool) {
	t.Helper()
	fires, quiet = map[string]bool{}, map[string]bool{}
	for _, f := range ruleTests {
		b, err := os.ReadFile(filepath.Join(rulesDir, f))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string           `json:"alertname"`
					ExpAlerts []map[string]any `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range doc.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
		}
	}
	return fires, quiet
}

// TestPromtoolUnitTests runs the rules' unit tests, requires each alert to
// be shown firing and not firing, and shows that the tests catch a changed
// rule. Each test file orders every group (group_eval_order): promtool
// evaluates groups in a random order otherwise, and an alert evaluated
// before the recording rules it reads may see their last results go stale.
func TestPromtoolUnitTests(t *testing.T) {
	bin := promtool(t)
	fires, quiet := unitTests(t)
	var groups []string
	for _, g := range shippedRule(t).Spec.Groups {
		groups = append(groups, g.Name)
	}
	for _, f := range ruleTests {
		b, err := os.ReadFile(filepath.Join(rulesDir, f))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Order []string `json:"group_eval_order"`
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(slices.Sorted(slices.Values(doc.Order)), slices.Sorted(slices.Values(groups))) || !slices.Equal(doc.Order[:2], groups[:2]) {
			t.Errorf("%s: group_eval_order %q, want every group %q, the recording rules first", f, doc.Order, groups)
		}
	}
	for _, g := range shippedRule(t).Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if !fires[r.Alert] {
				t.Errorf("alert %s: no unit test expects it to fire", r.Alert)
			}
			if !quiet[r.Alert] {
				t.Errorf("alert %s: no unit test expects it to stay quiet", r.Alert)
			}
		}
	}

	tests := []struct {
		name   string
		mutate func(r *monitoringv1.PrometheusRule)
		want   string // "" for success, else the alert (or expression) whose test must fail
		test   string // the test that must fail; "" for every test of want
	}{
		{"shipped", func(*monitoringv1.PrometheusRule) {}, "", ""},
		{"fast burn at 144x", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreAvailabilityBudgetBurnFast")
			a.Expr = intstr.FromString(strings.ReplaceAll(a.Expr.String(), "14.4 *", "144 *"))
		}, "PlantstoreAvailabilityBudgetBurnFast", "availability, one bad hour"},
		{"fast burn over six hours at 60x", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreAvailabilityBudgetBurnFast")
			a.Expr = intstr.FromString(strings.ReplaceAll(a.Expr.String(), "(6 *", "(60 *"))
		}, "PlantstoreAvailabilityBudgetBurnFast", "availability, six hours at 1 %"},
		{"fast burn on the short window alone", func(r *monitoringv1.PrometheusRule) {
			alertRule(r, "PlantstoreAvailabilityBudgetBurnFast").Expr = intstr.FromString("plantstore:availability_errors:ratio_rate5m > (14.4 * 0.001)")
		}, "PlantstoreAvailabilityBudgetBurnFast", "availability, short burst"},
		{"keys alert aggregated away from the issuer", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreNoVerificationKeys")
			a.Expr = intstr.FromString(strings.Replace(a.Expr.String(), "env, issuer) (", "env) (", 1))
		}, "PlantstoreNoVerificationKeys", "verification keys"},
		{"keys alert per pod", func(r *monitoringv1.PrometheusRule) {
			alertRule(r, "PlantstoreNoVerificationKeys").Expr = intstr.FromString(`sum by (cluster, namespace, job, env, pod, issuer) (plantstore_jwks_keys{env="production"}) == 0`)
		}, "PlantstoreNoVerificationKeys", "verification keys, identity provider outage"},
		{"availability as one minus good over total", func(r *monitoringv1.PrometheusRule) {
			for _, w := range []string{"5m", "30m", "1h", "2h", "6h"} {
				rec := recordingRule(r, "plantstore:availability_errors:ratio_rate"+w)
				rec.Expr = intstr.FromString(`1 - (sum by (cluster, namespace, job, env) (rate(plantstore_http_requests_total{job="plantstore", route="/plants", code!~"5.."}[` + w + `])) / sum by (cluster, namespace, job, env) (rate(plantstore_http_requests_total{job="plantstore", route="/plants"}[` + w + `])))`)
			}
		}, "PlantstoreAvailabilityBudgetBurnFast", "availability, fresh install answering 5xx only"},
		{"availability as one minus good over total, after a rollout", func(r *monitoringv1.PrometheusRule) {
			for _, w := range []string{"5m", "30m", "1h", "2h", "6h"} {
				rec := recordingRule(r, "plantstore:availability_errors:ratio_rate"+w)
				rec.Expr = intstr.FromString(`1 - (sum by (cluster, namespace, job, env) (rate(plantstore_http_requests_total{job="plantstore", route="/plants", code!~"5.."}[` + w + `])) / sum by (cluster, namespace, job, env) (rate(plantstore_http_requests_total{job="plantstore", route="/plants"}[` + w + `])))`)
			}
		}, "PlantstoreAvailabilityBudgetBurnFast", "availability, rollout to a release answering 5xx only"},
		{"availability errors without the fallback to 0", func(r *monitoringv1.PrometheusRule) {
			for _, name := range []string{"plantstore:plants_requests_errors:rate5m", "plantstore:availability_errors:ratio_rate5m"} {
				rec := recordingRule(r, name)
				rec.Expr = intstr.FromString(regexp.MustCompile(`(?s)\s*or\s*0 \* sum by \([^)]*\) \(rate\([^\]]*\]\)\)`).ReplaceAllString(rec.Expr.String(), ""))
			}
		}, "round(plantstore:availability_errors:ratio_rate5m", "healthy"},
		{"clusters merged", func(r *monitoringv1.PrometheusRule) {
			for g := range r.Spec.Groups {
				for i := range r.Spec.Groups[g].Rules {
					rule := &r.Spec.Groups[g].Rules[i]
					rule.Expr = intstr.FromString(strings.ReplaceAll(rule.Expr.String(), "cluster, ", ""))
				}
			}
		}, "PlantstoreAvailabilityBudgetBurnFast", "availability, two clusters are not merged"},
		{"gateway SLI without Envoy's own 503s", func(r *monitoringv1.PrometheusRule) {
			for _, w := range []string{"5m", "30m", "1h", "6h"} {
				for _, name := range []string{"requests", "errors"} {
					rec := recordingRule(r, "plantstore:gateway_"+name+":rate"+w)
					rec.Expr = intstr.FromString(regexp.MustCompile(`(?s)\s*or\s*rate\(envoy_cluster_upstream_cx_none_healthy\{[^}]*\}\[\w+\]\)`).ReplaceAllString(rec.Expr.String(), ""))
				}
			}
		}, "PlantstoreGatewayBudgetBurnFast", ""},
		{"gateway alert for every environment", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreGatewayBudgetBurnFast")
			a.Expr = intstr.FromString(strings.ReplaceAll(a.Expr.String(), `{env="production"}`, ""))
		}, "PlantstoreGatewayBudgetBurnFast", ""},
		{"API probe alert on the metadata probe", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreAPIProbeFailing")
			a.Expr = intstr.FromString(strings.ReplaceAll(a.Expr.String(), "plantstore-api-probe", "plantstore-probe"))
		}, "PlantstoreAPIProbeFailing", ""},
		{"keys alert for every environment", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreNoVerificationKeys")
			a.Expr = intstr.FromString(strings.ReplaceAll(a.Expr.String(), `, env="production"`, ""))
		}, "PlantstoreNoVerificationKeys", ""},
		{"spike alert without the rate floor", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreAuthFailureSpike")
			a.Expr = intstr.FromString(strings.Split(a.Expr.String(), "and\n")[0])
		}, "PlantstoreAuthFailureSpike", ""},
		{"fast burn without the minimum of requests", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreAvailabilityBudgetBurnFast")
			a.Expr = intstr.FromString(regexp.MustCompile(`(?s)\s*and on \(cluster, namespace, job, env\)\s*plantstore:plants_requests:\S+ \* \d+ >= \d+`).ReplaceAllString(a.Expr.String(), ""))
		}, "PlantstoreAvailabilityBudgetBurnFast", "availability, one 503 in 12 requests an hour"},
		{"latency burn without the minimum of requests", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreLatencyBudgetBurnFast")
			a.Expr = intstr.FromString(regexp.MustCompile(`(?s)\s*and on \(cluster, namespace, job, env\)\s*plantstore:plants_requests:\S+ \* \d+ >= \d+`).ReplaceAllString(a.Expr.String(), ""))
		}, "PlantstoreLatencyBudgetBurnFast", "latency, two slow requests of 12 an hour"},
		{"key refresh summed over the replicas", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreKeyRefreshFailing")
			a.Expr = intstr.FromString(strings.ReplaceAll(a.Expr.String(), "pod, ", ""))
		}, "PlantstoreKeyRefreshFailing", ""},
		{"reload alert without for", func(r *monitoringv1.PrometheusRule) { alertRule(r, "PlantstoreCatalogReloadFailing").For = nil }, "PlantstoreCatalogReloadFailing", ""},
		{"down only when a target says so", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreDown")
			a.Expr = intstr.FromString(strings.Split(a.Expr.String(), "or\n")[0])
		}, "PlantstoreDown", ""},
		{"traffic stopped without the replicas' up", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreTrafficStopped")
			a.Expr = intstr.FromString(strings.Replace(a.Expr.String(), "or\n  sum by (cluster, namespace, job, env) (up{", "or\n  sum by (cluster, namespace, job, env) (up_never{", 1))
		}, "PlantstoreTrafficStopped", ""},
		{"traffic stopped while the replicas are down", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreTrafficStopped")
			a.Expr = intstr.FromString(strings.Replace(a.Expr.String(), ") > 0\n", ") >= 0\n", 1))
		}, "PlantstoreTrafficStopped", ""},
		{"probe alert on any failure", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreProbeFailing")
			a.Expr = intstr.FromString(strings.Replace(a.Expr.String(), "< 0.9", "< 1", 1))
		}, "PlantstoreProbeFailing", ""},
		{"DPoP cache alert at half full", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreDPoPReplayCacheFilling")
			a.Expr = intstr.FromString(strings.Replace(a.Expr.String(), "> 0.75", "> 0.4", 1))
		}, "PlantstoreDPoPReplayCacheFilling", ""},
		{"shared state alert for every environment", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreSharedStateFailing")
			a.Expr = intstr.FromString(strings.ReplaceAll(a.Expr.String(), `, env="production"`, ""))
		}, "PlantstoreSharedStateFailing", ""},
		{"shared state alert without for", func(r *monitoringv1.PrometheusRule) { alertRule(r, "PlantstoreSharedStateFailing").For = nil }, "PlantstoreSharedStateFailing", ""},
		{"memory alert at 99 %", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreMemoryNearLimit")
			a.Expr = intstr.FromString(strings.Replace(a.Expr.String(), "> 0.9", "> 0.99", 1))
		}, "PlantstoreMemoryNearLimit", ""},
		{"revocations alert after an hour", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreRevocationsStale")
			a.Expr = intstr.FromString(strings.Replace(a.Expr.String(), "> 180", "> 3600", 1))
		}, "PlantstoreRevocationsStale", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			r := shippedRule(t)
			tt.mutate(r)
			writeRules(t, dir, r, "")
			files := ruleTests
			if tt.want != "" {
				// Only the tests of the changed alert (or the one named), to
				// keep this quick.
				files = []string{"only_test.yaml"}
				writeTestsOf(t, filepath.Join(rulesDir, ruleTests[0]), tt.want, tt.test, filepath.Join(dir, files[0]))
			} else {
				for _, f := range ruleTests {
					b, err := os.ReadFile(filepath.Join(rulesDir, f))
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			// One promtool per file, side by side: the files take seconds each.
			type result struct {
				out []byte
				err error
			}
			results := make([]result, len(files))
			var wg sync.WaitGroup
			for i, f := range files {
				wg.Go(func() {
					cmd := exec.CommandContext(t.Context(), bin, "test", "rules", f)
					cmd.Dir = dir
					results[i].out, results[i].err = cmd.CombinedOutput()
				})
			}
			wg.Wait()
			for i, r := range results {
				switch {
				case tt.want == "" && r.err != nil:
					t.Errorf("promtool test rules %s: %v\n%s", files[i], r.err, r.out)
				case tt.want != "" && (r.err == nil || !strings.Contains(string(r.out), "alertname: "+tt.want) && !strings.Contains(string(r.out), `expr: "`+tt.want)):
					t.Errorf("promtool test rules after %s: %v, want a failure of %s\n%s", tt.name, r.err, tt.want, r.out)
				}
			}
		})
	}
}

// writeTestsOf copies the promtool test file src to dst with only the
// tests that check alert, or only the test named name when it is not "".
func writeTestsOf(t testing.TB, src, alert, name, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var kept []any
	for _, tc := range doc["tests"].([]any) {
		if name != "" {
			if tc.(map[string]any)["name"] == name {
				kept = append(kept, tc)
			}
			continue
		}
		for _, a := range tc.(map[string]any)["alert_rule_test"].([]any) {
			if a.(map[string]any)["alertname"] == alert {
				kept = append(kept, tc)
				break
			}
		}
	}
	if len(kept) == 0 {
		t.Fatalf("%s: no test checks %s", src, alert)
	}
	doc["tests"] = kept
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runbookLink is a runbook_url as the rules file writes it: relative to
// the repository, which the overlay's base (the ConfigMap
// plantstore-runbooks) prefixes.
var runbookLink = regexp.MustCompile(`^(docs/runbooks/[a-z0-9-]+\.md)(#[a-z0-9-]+)?$`)

// TestAlertRunbooks requires every alert's runbook_url to name a runbook
// in docs/runbooks that exists, mentions the alert by name and, when the
// link has an anchor, has that heading; and every runbook to be linked.
func TestAlertRunbooks(t *testing.T) {
	var used []string
	for _, g := range shippedRule(t).Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			url := r.Annotations["runbook_url"]
			m := runbookLink.FindStringSubmatch(url)
			if m == nil {
				t.Errorf("alert %s: runbook_url %q, want docs/runbooks/<name>.md, which the overlay's base prefixes", r.Alert, url)
				continue
			}
			used = append(used, m[1])
			b, err := os.ReadFile(filepath.Join("..", "..", m[1]))
			if err != nil {
				t.Errorf("alert %s: runbook %s: %v", r.Alert, m[1], err)
				continue
			}
			if !strings.Contains(string(b), r.Alert) {
				t.Errorf("alert %s: runbook %s does not name it", r.Alert, m[1])
			}
			if m[2] != "" && !slices.Contains(anchors(string(b)), m[2][1:]) {
				t.Errorf("alert %s: runbook %s has no heading for %s", r.Alert, m[1], m[2])
			}
		}
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "runbooks", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	// A page no alert links to is a procedure another page sends you to.
	var pages string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pages += string(b)
		if strings.Contains(string(b), "https://github.com/plantstore/plantstore") {
			t.Errorf("%s: a link to the upstream repository, which a fork does not follow: link relative to the page", f)
		}
	}
	for _, f := range files {
		rel := "docs/runbooks/" + filepath.Base(f)
		if filepath.Base(f) != "README.md" && !slices.Contains(used, rel) && !strings.Contains(pages, "]("+filepath.Base(f)+")") {
			t.Errorf("%s: no alert and no runbook links to it", rel)
		}
	}
}

// TestRunbookBase renders the prod overlay: every alert's runbook_url is
// the overlay's base (the ConfigMap plantstore-runbooks of its release
// component) followed by the rules file's relative link, and the base names
// the version of the image deployed. A fork that changes the base gets
// links into its own repository, with nothing else changed.
func TestRunbookBase(t *testing.T) {
	raw := map[string]string{}
	for _, g := range shippedRule(t).Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				raw[r.Alert] = r.Annotations["runbook_url"]
			}
		}
	}
	const fork = "https://git.example.org/someone/plantstore/src/tag/v0.1.0/"
	tmp := t.TempDir()
	for _, d := range []string{"base", "components", "overlays"} {
		if err := os.CopyFS(filepath.Join(tmp, d), os.DirFS(filepath.Join("..", d))); err != nil {
			t.Fatal(err)
		}
	}
	forked := filepath.Join(tmp, "overlays", "prod", "release", "runbooks.yaml")
	b, err := os.ReadFile(forked)
	if err != nil {
		t.Fatal(err)
	}
	base := regexp.MustCompile(`(?m)^  base: (\S+)$`).FindSubmatch(b)
	if base == nil {
		t.Fatalf("%s: no data.base", forked)
	}
	if err := os.WriteFile(forked, bytes.Replace(b, base[1], []byte(fork), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, dir, base string }{
		{"prod", filepath.Join("..", "overlays", "prod"), string(base[1])},
		{"prod in a fork", filepath.Join(tmp, "overlays", "prod"), fork},
	} {
		t.Run(tt.name, func(t *testing.T) {
			objs := build(t, tt.dir)
			tag := imageTagOf(ctr(objs).Image)
			if !strings.HasSuffix(string(base[1]), "/"+tag+"/") {
				t.Errorf("runbook base %s does not name the image's version %s", base[1], tag)
			}
			n := 0
			for _, g := range promRule(objs).Spec.Groups {
				for _, r := range g.Rules {
					if r.Alert == "" {
						continue
					}
					n++
					if got, want := r.Annotations["runbook_url"], tt.base+raw[r.Alert]; got != want {
						t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, got, want)
					}
				}
			}
			if n != len(raw) {
				t.Errorf("%d alerts rendered, want %d", n, len(raw))
			}
		})
	}
}

// imageTagOf returns the tag of an image reference.
func imageTagOf(image string) string {
	ref, _, _ := strings.Cut(image, "@")
	return ref[strings.LastIndex(ref, ":")+1:]
}

// TestRunbookProcedures checks the procedures an on-call follows where
// tools fight back: a rollback stops Argo CD's and Flux's sync before it
// undoes anything and resumes it after the revert in git (a bare rollout
// undo is reverted by the next sync, so no other page suggests one); a
// catalog file is reloaded by a restart, since the distroless image has no
// shell to send SIGHUP from and the service does not watch the file.
func TestRunbookProcedures(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", "runbooks", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	rollback := read("rollback.md")
	steps := []string{
		`kubectl -n argocd patch application plantstore-prod --type merge -p '{"spec":{"syncPolicy":{"automated":null}}}'`,
		`kubectl -n flux-system patch kustomization plantstore-prod --type merge -p '{"spec":{"suspend":true}}'`,
		`kubectl -n "$NS" rollout undo deployment/plantstore`,
		`git revert`,
		`kubectl -n argocd patch application plantstore-prod --type merge -p '{"spec":{"syncPolicy":{"automated":{"prune":true,"selfHeal":true}}}}'`,
		`kubectl -n flux-system patch kustomization plantstore-prod --type merge -p '{"spec":{"suspend":false}}'`,
	}
	last := -1
	for _, s := range steps {
		i := strings.Index(rollback, s)
		if i < 0 || i < last {
			t.Errorf("rollback.md: %q missing or out of order (at %d, the step before at %d)", s, i, last)
		}
		last = i
	}
	// The patches are JSON the API server takes as merge patches.
	for _, p := range regexp.MustCompile(`--type merge -p '([^']*)'`).FindAllStringSubmatch(rollback, -1) {
		if !json.Valid([]byte(p[1])) {
			t.Errorf("rollback.md: patch %s is not JSON", p[1])
		}
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "runbooks", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if b := read(filepath.Base(f)); filepath.Base(f) != "rollback.md" && strings.Contains(b, "rollout undo") {
			t.Errorf("%s: suggests rollout undo outside rollback.md, which Argo CD and Flux revert", f)
		}
	}
	catalog := read("catalog-snapshot-stale.md")
	for _, want := range []string{`kubectl -n "$NS" rollout restart deployment/plantstore`, "distroless", "only on SIGHUP"} {
		if !strings.Contains(catalog, want) {
			t.Errorf("catalog-snapshot-stale.md: no %q", want)
		}
	}
	if strings.Contains(catalog, "change of the mounted file") {
		t.Errorf("catalog-snapshot-stale.md: promises a reload on a file change, which the service does not do")
	}
}

// anchors returns GitHub's anchors for the Markdown headings of doc.
func anchors(doc string) []string {
	var out []string
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		out = append(out, b.String())
	}
	return out
}
