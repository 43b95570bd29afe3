package check_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/plantstore/plantstore/deploy/check"
)

const rulesDir = "../components/prometheus-rules"

// ruleTests are promtool's unit test files of the rules, in rulesDir.
var ruleTests = []string{"prometheusrule_test.yaml", "prometheusrule_slow_test.yaml"}

// runbookBase is where runbook_url points: the repository's docs/runbooks
// on GitHub.
const runbookBase = "https://github.com/plantstore/plantstore/blob/main/"

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
// rule.
func TestPromtoolUnitTests(t *testing.T) {
	bin := promtool(t)
	fires, quiet := unitTests(t)
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
		want   string // "" for success, else the alert whose test must fail
	}{
		{"shipped", func(*monitoringv1.PrometheusRule) {}, ""},
		{"fast burn at 144x", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreAvailabilityBudgetBurnFast")
			a.Expr = intstr.FromString(strings.ReplaceAll(a.Expr.String(), "14.4 *", "144 *"))
		}, "PlantstoreAvailabilityBudgetBurnFast"},
		{"fast burn over six hours at 60x", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreAvailabilityBudgetBurnFast")
			a.Expr = intstr.FromString(strings.ReplaceAll(a.Expr.String(), "(6 *", "(60 *"))
		}, "PlantstoreAvailabilityBudgetBurnFast"},
		{"fast burn on the short window alone", func(r *monitoringv1.PrometheusRule) {
			alertRule(r, "PlantstoreAvailabilityBudgetBurnFast").Expr = intstr.FromString("plantstore:availability_errors:ratio_rate5m > (14.4 * 0.001)")
		}, "PlantstoreAvailabilityBudgetBurnFast"},
		{"keys alert aggregated away from the issuer", func(r *monitoringv1.PrometheusRule) {
			alertRule(r, "PlantstoreNoVerificationKeys").Expr = intstr.FromString("sum by (namespace, job, instance) (plantstore_jwks_keys) == 0")
		}, "PlantstoreNoVerificationKeys"},
		{"spike alert without the rate floor", func(r *monitoringv1.PrometheusRule) {
			a := alertRule(r, "PlantstoreAuthFailureSpike")
			a.Expr = intstr.FromString(strings.Split(a.Expr.String(), "and\n")[0])
		}, "PlantstoreAuthFailureSpike"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			r := shippedRule(t)
			tt.mutate(r)
			writeRules(t, dir, r, "")
			files := ruleTests
			if tt.want != "" {
				// Only the tests of the changed alert, to keep this quick.
				files = []string{"only_test.yaml"}
				writeTestsOf(t, filepath.Join(rulesDir, ruleTests[0]), tt.want, filepath.Join(dir, files[0]))
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
			cmd := exec.CommandContext(t.Context(), bin, append([]string{"test", "rules"}, files...)...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("promtool test rules: %v\n%s", err, out)
			case tt.want != "" && (err == nil || !strings.Contains(string(out), "alertname: "+tt.want)):
				t.Errorf("promtool test rules after %s: %v, want a failure of %s\n%s", tt.name, err, tt.want, out)
			}
		})
	}
}

// writeTestsOf copies the promtool test file src to dst with only the
// tests that check alert.
func writeTestsOf(t testing.TB, src, alert, dst string) {
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

var runbookLink = regexp.MustCompile(`^` + regexp.QuoteMeta(runbookBase) + `(docs/runbooks/[a-z0-9-]+\.md)(#[a-z0-9-]+)?$`)

// TestAlertRunbooks requires every alert's runbook_url to name a runbook
// in docs/runbooks that exists, mentions the alert by name and, when the
// link has an anchor, has that heading.
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
				t.Errorf("alert %s: runbook_url %q, want %sdocs/runbooks/<name>.md", r.Alert, url, runbookBase)
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
	for _, f := range files {
		rel := "docs/runbooks/" + filepath.Base(f)
		if filepath.Base(f) != "README.md" && !slices.Contains(used, rel) {
			t.Errorf("%s: no alert links to it", rel)
		}
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
