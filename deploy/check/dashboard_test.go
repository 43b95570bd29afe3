package check_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
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
		RefID  string `json:"refId"`
		Expr   string `json:"expr"`
		Legend string `json:"legendFormat"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
		Overrides []json.RawMessage `json:"overrides"`
	} `json:"fieldConfig"`
	Panels []panel `json:"panels"`
}

type dashboard struct {
	UID    string  `json:"uid"`
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
	Links  []struct {
		Title string `json:"title"`
		URL   string `json:"url"`
	} `json:"links"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// runbookLinkProblems returns what is wrong with the dashboard's link to
// the runbooks: it must open those of the version running, the variable
// version that plantstore_build_info gives, never a branch that moves on.
func runbookLinkProblems(d dashboard) []string {
	var out []string
	found := false
	for _, l := range d.Links {
		if !strings.Contains(l.URL, "docs/runbooks") {
			continue
		}
		found = true
		if !strings.Contains(l.URL, "/blob/${version}/docs/runbooks") {
			out = append(out, fmt.Sprintf("dashboard link %q: %s, want the runbooks of the version running (/blob/${version}/docs/runbooks)", l.Title, l.URL))
		}
	}
	if !found {
		out = append(out, "the dashboard has no link to the runbooks")
	}
	for _, v := range d.Templating.List {
		if v.Name == "version" && !strings.Contains(v.Definition, "label_values(plantstore_build_info{") {
			out = append(out, fmt.Sprintf("dashboard variable version: %s, want the versions of plantstore_build_info", v.Definition))
		}
	}
	return out
}

// TestDashboardRunbookLink shows the link check refusing the link as it
// was, on main.
func TestDashboardRunbookLink(t *testing.T) {
	d := readDashboard(t)
	if got := runbookLinkProblems(d); len(got) > 0 {
		t.Errorf("shipped dashboard: %q", got)
	}
	for i := range d.Links {
		d.Links[i].URL = "https://github.com/plantstore/plantstore/tree/main/docs/runbooks"
	}
	if got := runbookLinkProblems(d); len(got) != 1 || !strings.Contains(got[0], "want the runbooks of the version running") {
		t.Errorf("a link to main: %q, want it refused", got)
	}
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
	return parseDashboard(t, b)
}

func parseDashboard(t testing.TB, b []byte) dashboard {
	t.Helper()
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
	if vars["datasource"] != "datasource" || vars["namespace"] != "query" || vars["version"] != "query" {
		t.Errorf("templating %v, want a datasource variable and namespace and version queries", vars)
	}
	for _, p := range runbookLinkProblems(d) {
		t.Error(p)
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
			job := `job="plantstore"`
			if strings.Contains(tg.Expr, "probe_success") {
				job = `job="plantstore-probe"`
				if strings.Contains(tg.Expr, `job="plantstore-api-probe"`) {
					job = `job="plantstore-api-probe"`
				}
			}
			for _, sel := range []string{job, `namespace=~"$namespace"`} {
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

// queryKind names what a dashboard query measures, for its unit: a share
// (0 to 1), a rate of events, seconds, bytes, CPU cores, a burn rate or a
// count.
func queryKind(expr string) string {
	switch {
	case strings.HasPrefix(expr, "1 - "), strings.Contains(expr, "probe_success"):
		return "share"
	case strings.Contains(expr, "histogram_quantile(") && strings.Contains(expr, "_seconds_bucket"):
		return "seconds"
	case strings.Contains(expr, "histogram_quantile("):
		return "count"
	case strings.Contains(expr, "_seconds_total") && strings.Contains(expr, " / "):
		return "seconds" // time waited over the events that waited
	case regexp.MustCompile(`/ 0\.0*1\b`).MatchString(expr):
		return "burn rate"
	case strings.Contains(expr, " / "), strings.Contains(expr, ":ratio_"):
		return "share"
	case strings.Contains(expr, "process_cpu_seconds_total"), strings.Contains(expr, "gomaxprocs"):
		return "cores"
	case strings.Contains(expr, "rate("):
		return "rate"
	case strings.Contains(expr, "_bytes"):
		return "bytes"
	case strings.Contains(expr, "_seconds"):
		return "seconds"
	}
	return "count"
}

// kindUnits are the Grafana units that fit each kind of query.
var kindUnits = map[string][]string{
	"share":     {"percentunit"},
	"seconds":   {"s"},
	"rate":      {"reqps", "ops"},
	"bytes":     {"bytes"},
	"cores":     {"short"},
	"burn rate": {"short"},
	"count":     {"short"},
}

// dashboardProblems returns what makes a dashboard hard to read at 3 a.m.:
// a panel whose queries measure different things under one unit, a unit
// that does not fit what the queries measure, and instances where the
// runbooks and kubectl speak of pods.
func dashboardProblems(d dashboard) []string {
	var out []string
	for _, p := range d.panels() {
		kinds := map[string]bool{}
		for _, tg := range p.Targets {
			kinds[queryKind(tg.Expr)] = true
			// A probe's instance is the URL probed: the one place it is right.
			if (strings.Contains(tg.Legend, "instance") || strings.Contains(tg.Expr, "instance)")) && !strings.Contains(tg.Expr, "probe_success") {
				out = append(out, fmt.Sprintf("panel %q, query %s: by instance, want by pod", p.Title, tg.RefID))
			}
		}
		if len(kinds) > 1 {
			out = append(out, fmt.Sprintf("panel %q mixes units: %v", p.Title, slices.Sorted(maps.Keys(kinds))))
			continue
		}
		for k := range kinds {
			if p.Type != "table" && !slices.Contains(kindUnits[k], p.FieldConfig.Defaults.Unit) {
				out = append(out, fmt.Sprintf("panel %q: unit %q for a %s, want one of %v", p.Title, p.FieldConfig.Defaults.Unit, k, kindUnits[k]))
			}
		}
	}
	return out
}

// TestDashboardUnits requires one unit per panel, fitting its queries, and
// pods rather than instances; the dashboard as shipped before (with a
// reload count beside its duration and a waited share beside the time
// waited, by instance) is refused.
func TestDashboardUnits(t *testing.T) {
	if got := dashboardProblems(readDashboard(t)); len(got) > 0 {
		t.Errorf("dashboard:\n  %s", strings.Join(got, "\n  "))
	}
	var before []byte
	for _, o := range beforePaging("prod")(t) {
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == "plantstore-dashboard" {
			before = []byte(cm.Data["plantstore.json"])
		}
	}
	got := strings.Join(dashboardProblems(parseDashboard(t, before)), "\n")
	for _, want := range []string{
		`panel "Catalog reloads" mixes units: [rate seconds]`,
		`panel "Database pool waits" mixes units: [rate share]`,
		`panel "Requests in flight", query A: by instance, want by pod`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the dashboard before: problems\n%s\nwant one containing %q", got, want)
		}
	}
}

// TestRunbookPanels requires every dashboard panel or row a runbook names
// (in italics: *Panel title*) to exist.
func TestRunbookPanels(t *testing.T) {
	d := readDashboard(t)
	titles := map[string]bool{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			titles[p.Title] = true
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "runbooks", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	italic := regexp.MustCompile(`(?:^|[^*\w])\*([^*\s][^*]*[^*\s]|[^*\s])\*(?:[^*\w]|$)`)
	named := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Prose only: no code blocks or code spans, one line.
		text := regexp.MustCompile("(?s)```.*?```|`[^`]*`").ReplaceAllString(string(b), " ")
		text = regexp.MustCompile(`\s+`).ReplaceAllString(text, " ")
		for _, m := range italic.FindAllStringSubmatch(text, -1) {
			named++
			if !titles[m[1]] {
				t.Errorf("%s: names the dashboard panel or row *%s*, which the dashboard does not have", filepath.Base(f), m[1])
			}
		}
	}
	if named < 10 {
		t.Errorf("the runbooks name %d panels: the check reads them wrongly", named)
	}
}
