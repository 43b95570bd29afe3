package check_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const dashboardFile = "../components/grafana-dashboard/plantstore.json"

// grafanaVars stands in for the dashboard's variables outside Grafana:
// every namespace, and a rate window that spans several 1 s scrapes.
var grafanaVars = strings.NewReplacer(`$namespace`, `.*`, `$__rate_interval`, `1m`)

type gridPos struct{ H, W, X, Y int }

type panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	GridPos    gridPos         `json:"gridPos"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"list"`
	} `json:"templating"`
}

// panels returns the dashboard's panels, rows' nested panels included, but
// not the rows.
func (d dashboard) panels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Panels)
	return out
}

func readDashboard(t testing.TB) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

var recordingName = regexp.MustCompile(`\bplantstore:[a-z0-9_:]+`)

// TestDashboardShape checks the dashboard without a Prometheus: its layout,
// its variables, that every query selects the service by job and by the
// namespace variable, parses (promtool), reads only recording rules the
// PrometheusRule has, and that every metric an alert reads has a panel.
func TestDashboardShape(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q, title %q: want both", d.UID, d.Title)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["namespace"] != "query" {
		t.Errorf("templating %v, want a datasource variable and a namespace query", vars)
	}

	ids := map[int]bool{}
	var boxes []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
			}
			ids[p.ID] = true
			g := p.GridPos
			if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 || g.Y < 0 {
				t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
			}
			for _, o := range boxes {
				og := o.GridPos
				if g.X < og.X+og.W && og.X < g.X+g.W && g.Y < og.Y+og.H && og.Y < g.Y+g.H {
					t.Errorf("panels %q and %q overlap", p.Title, o.Title)
				}
			}
			boxes = append(boxes, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)

	var exprs []string
	rule := shippedRule(t)
	records := map[string]bool{}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			records[r.Record] = true
		}
	}
	for _, p := range d.panels() {
		var ds bytes.Buffer
		if err := json.Compact(&ds, p.Datasource); err != nil || ds.String() != `{"type":"prometheus","uid":"${datasource}"}` {
			t.Errorf("panel %q: datasource %s, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no queries", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if refs[tg.RefID] {
				t.Errorf("panel %q: refId %s twice", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			for _, sel := range []string{`job="plantstore"`, `namespace=~"$namespace"`} {
				if !strings.Contains(tg.Expr, sel) {
					t.Errorf("panel %q, query %s: does not select %s", p.Title, tg.RefID, sel)
				}
			}
			for _, rec := range recordingName.FindAllString(tg.Expr, -1) {
				if !records[rec] {
					t.Errorf("panel %q, query %s: %s is no recording rule of the PrometheusRule", p.Title, tg.RefID, rec)
				}
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	all := strings.Join(exprs, "\n")
	for _, m := range ruleMetrics(rule) {
		if !slices.Contains(futureMetrics, m) && !strings.Contains(all, family(m)) {
			t.Errorf("the rules read %s, but no dashboard panel shows it", m)
		}
	}

	bin := promtool(t)
	tests := []struct {
		name    string
		exprs   []string
		wantErr bool
	}{
		{"dashboard", exprs, false},
		{"a query cut short", []string{`sum by (code) (rate(plantstore_http_requests_total{job="plantstore"}[$__rate_interval])`}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if out, err := checkExprs(t, bin, tt.exprs); (err != nil) != tt.wantErr {
				t.Errorf("promtool check rules on the %s queries: %v, want an error %v\n%s", tt.name, err, tt.wantErr, out)
			}
		})
	}
}

// family returns the metric family of a histogram's series name.
func family(name string) string {
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if f, ok := strings.CutSuffix(name, suffix); ok {
			return f
		}
	}
	return name
}

// checkExprs parses each expression with promtool, as recording rules.
func checkExprs(t testing.TB, bin string, exprs []string) ([]byte, error) {
	t.Helper()
	var rules []map[string]string
	for i, e := range exprs {
		rules = append(rules, map[string]string{"record": fmt.Sprintf("dashboard:query%d", i), "expr": grafanaVars.Replace(e)})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return exec.CommandContext(t.Context(), bin, "check", "rules", path).CombinedOutput()
}

// TestDashboardConfigMap checks what the Grafana sidecar finds in the prod
// overlay: one ConfigMap with its label, holding the dashboard file as is.
func TestDashboardConfigMap(t *testing.T) {
	want, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, o := range build(t, filepath.Join("..", "overlays", "prod")) {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok || cm.Labels["grafana_dashboard"] != "1" {
			continue
		}
		found = append(found, cm.Name)
		if got := cm.Data["plantstore.json"]; got != string(want) {
			t.Errorf("ConfigMap %s: plantstore.json differs from %s", cm.Name, dashboardFile)
		}
	}
	if !slices.Equal(found, []string{"plantstore-dashboard"}) {
		t.Errorf("ConfigMaps labelled grafana_dashboard=1: %v, want [plantstore-dashboard]", found)
	}
}
