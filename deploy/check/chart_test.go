package check_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/plantstore/plantstore/deploy/check"
)

// chartDir is the Helm chart, relative to this package.
var chartDir = filepath.Join("..", "chart", "plantstore")

// helmBin returns the helm command: $TEST_HELM, else helm from PATH, or
// calls missing (.ci/deploy.sh installs it).
func helmBin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("TEST_HELM"); p != "" {
		return p
	}
	return tool(t, "helm", " (go install helm.sh/helm/v3/cmd/helm@v3.22.0, as .ci/deploy.sh does)")
}

// helmTemplate renders the chart as release "plantstore" in namespace ns
// with the values files (relative to the chart) and --set pairs (typed as
// helm types them: true is a boolean, 3 a number), and returns helm's
// output, or its error with what it printed.
func helmTemplate(t testing.TB, ns string, values []string, set ...string) ([]byte, error) {
	t.Helper()
	args := []string{"template", "plantstore", chartDir, "--namespace", ns}
	for _, v := range values {
		if !filepath.IsAbs(v) {
			v = filepath.Join(chartDir, v)
		}
		args = append(args, "--values", v)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	var stderr bytes.Buffer
	c := exec.CommandContext(t.Context(), helmBin(t), args...)
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return nil, &helmError{err: err, stderr: stderr.String()}
	}
	return out, nil
}

type helmError struct {
	err    error
	stderr string
}

func (e *helmError) Error() string { return e.err.Error() + ": " + e.stderr }

// renderChart is helmTemplate decoded strictly, failing t on an error.
func renderChart(t testing.TB, ns string, values []string, set ...string) []runtime.Object {
	t.Helper()
	out, err := helmTemplate(t, ns, values, set...)
	if err != nil {
		t.Fatalf("helm template %v %v: %v", values, set, err)
	}
	objs, err := check.Decode(out)
	if err != nil {
		t.Fatalf("helm template %v %v: %v", values, set, err)
	}
	return objs
}

// imageValues returns the --set pairs that give the chart the image
// of want's Deployment: repository, tag and digest (a placeholder digest
// when want names a tag only; Compare then sets digests aside).
func imageValues(t testing.TB, want []runtime.Object) []string {
	t.Helper()
	var image string
	for _, o := range want {
		if d, ok := o.(*appsv1.Deployment); ok {
			image = d.Spec.Template.Spec.Containers[0].Image
		}
	}
	ref, digest, _ := strings.Cut(image, "@")
	if digest == "" {
		digest = "sha256:" + strings.Repeat("0", 64)
	}
	repo, tag := ref, ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		repo, tag = ref[:i], ref[i+1:]
	}
	return []string{"image.repository=" + repo, "image.tag=" + tag, "image.digest=" + digest}
}

// runbookBase returns the runbook base deploy/overlays/prod/release pins.
func runbookBase(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "overlays", "prod", "release", "runbooks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil || cm.Data["base"] == "" {
		t.Fatalf("runbooks.yaml: no data.base (%v)", err)
	}
	return cm.Data["base"]
}

// gatewayOnly are the objects of deploy/components/envoy-gateway, which
// the chart leaves to the gateway's installation: CORS at the gateway, and
// how Envoy talks to the service (idle timeout, retry, its own 503).
var gatewayOnly = map[string]bool{"SecurityPolicy plantstore": true, "BackendTrafficPolicy plantstore": true}

// chartCases are the kustomize renderings the chart must match, each an
// overlay with the components an overlay that takes them would add, and
// the values that select the same options. What only kustomize renders,
// by design, is named with the reason.
var chartCases = []struct {
	name       string
	overlay    string   // deploy/overlays/<overlay>
	components []string // deploy/components/<name> on top
	ns         string
	values     []string
	set        []string
	onlyWant   map[string]bool
}{
	{name: "dev", overlay: "dev", ns: "plantstore-dev", values: []string{"ci/dev-values.yaml"}},
	{name: "prod", overlay: "prod", ns: "plantstore", values: []string{"ci/prod-values.yaml"}, onlyWant: gatewayOnly},
	{
		name: "prod behind ingress-nginx", overlay: "prod-ingress", ns: "plantstore",
		values: []string{"ci/prod-values.yaml", "ci/prod-ingress-values.yaml"},
	},
	{name: "Redis", overlay: "dev", components: []string{"redis"}, ns: "plantstore-dev", values: []string{"ci/dev-values.yaml"}, set: []string{"redis.enabled=true"}},
	{
		name: "DPoP nonces", overlay: "prod", components: []string{"dpop-nonce"}, ns: "plantstore",
		values: []string{"ci/prod-values.yaml"}, set: []string{"dpopNonceKey.secretName=plantstore-dpop-nonce"}, onlyWant: gatewayOnly,
	},
	{
		// components/mtls/gateway, the ClientTrafficPolicy, goes to the
		// Gateway's namespace, applied by whoever owns the Gateway: it is
		// a kustomization of its own, not part of the component.
		name: "client certificates", overlay: "prod", components: []string{"mtls"}, ns: "plantstore",
		values: []string{"ci/prod-values.yaml"}, set: []string{"clientCertHeader=X-Forwarded-Client-Cert"}, onlyWant: gatewayOnly,
	},
}

// TestChartMatchesKustomize renders each case with kustomize and with the
// chart and fails on any difference in the objects (check.Compare), each
// named with its object and field: the kustomize base and components are
// the source of truth, and a change to either side alone fails here.
func TestChartMatchesKustomize(t *testing.T) {
	for _, tt := range chartCases {
		t.Run(tt.name, func(t *testing.T) {
			want := withComponents(t, tt.overlay, tt.components...)
			set := append(imageValues(t, want), tt.set...)
			if tt.ns == "plantstore" {
				set = append(set, "prometheusRule.runbookBase="+runbookBase(t))
			}
			got := renderChart(t, tt.ns, tt.values, set...)
			diffs, err := check.Compare(want, got, tt.onlyWant)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range diffs {
				t.Errorf("%s (helm template --values %s --set %s)", d, strings.Join(tt.values, ","), strings.Join(tt.set, ","))
			}
		})
	}
}

// TestChartCompareCatches shows Compare failing on what drift looks like,
// each difference named by object and field: a changed value, a field one
// side lacks, a renamed env variable, an object one side lacks; and
// setting aside what differs by design only.
func TestChartCompareCatches(t *testing.T) {
	want := build(t, "../overlays/prod")
	set := append(imageValues(t, want), "prometheusRule.runbookBase="+runbookBase(t))
	only := gatewayOnly
	tests := []struct {
		name string
		set  []string
		want []string // substrings of the differences, one each
	}{
		{"the same options", nil, nil},
		{"the memory request", []string{"resources.requests.memory=200Mi"}, []string{`Deployment plantstore: spec.template.spec.containers[plantstore].resources.requests.memory: kustomize "230Mi", chart "200Mi"`}},
		{"the HPA's minimum", []string{"autoscaling.minReplicas=2"}, []string{"HorizontalPodAutoscaler plantstore: spec.minReplicas: kustomize 3, chart 2"}},
		{"a setting", []string{"settings.PLANTSTORE_LOG_LEVEL=debug"}, []string{`ConfigMap plantstore: data.PLANTSTORE_LOG_LEVEL: kustomize "info", chart "debug"`}},
		{"tracing off", []string{"tracing.enabled=false"}, []string{
			"NetworkPolicy plantstore-tracing: kustomize renders it, chart does not",
			"ConfigMap plantstore: data.OTEL_EXPORTER_OTLP_ENDPOINT: kustomize",
			"env[OTEL_RESOURCE_ATTRIBUTES]: kustomize",
		}},
		{"a label", []string{"env=staging"}, []string{`Deployment plantstore: spec.template.metadata.labels.env: kustomize "production", chart "staging"`}},
		{"an extra egress rule", []string{"networkPolicy.extraEgress[0].ports[0].port=8443"}, []string{"NetworkPolicy plantstore: spec.egress[4]: kustomize (absent)"}},
		{"no NodeLocal DNSCache", []string{"networkPolicy.dns.nodeLocal.enabled=false"}, []string{
			`NetworkPolicy plantstore: spec.egress[0].to[1]: kustomize {"namespaceSelector"`,
			`NetworkPolicy plantstore-migrate: spec.egress[0].to[2]: kustomize {"ipBlock":{"cidr":"169.254.20.10/32"}}, chart (absent)`,
		}},
		{"another database", []string{"postgres.to[0].ipBlock.cidr=10.1.0.0/16"}, []string{
			`NetworkPolicy plantstore: spec.egress[2].to[0].ipBlock: kustomize (absent), chart {"cidr":"10.1.0.0/16"}`,
			`NetworkPolicy plantstore-migrate: spec.egress[1].to[0].ipBlock: kustomize (absent), chart {"cidr":"10.1.0.0/16"}`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := renderChart(t, "plantstore", []string{"ci/prod-values.yaml"}, append(slices.Clone(set), tt.set...)...)
			diffs, err := check.Compare(want, got, only)
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, d := range diffs {
				lines = append(lines, d.String())
			}
			all := strings.Join(lines, "\n")
			if tt.want == nil && len(diffs) > 0 {
				t.Errorf("differences with the same options:\n%s", all)
			}
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("differences:\n%s\nwant one containing %q", all, w)
				}
			}
		})
	}
	// An object on one side only, whatever its kind.
	got := renderChart(t, "plantstore", []string{"ci/prod-values.yaml"}, append(slices.Clone(set), "probe.api.enabled=false")...)
	diffs, err := check.Compare(want, got, map[string]bool{"SecurityPolicy plantstore": true})
	if err != nil {
		t.Fatal(err)
	}
	if all := fmt.Sprint(diffs); len(diffs) != 2 || !strings.Contains(all, "Probe plantstore-api: kustomize renders it, chart does not") ||
		!strings.Contains(all, "BackendTrafficPolicy plantstore: kustomize renders it, chart does not") {
		t.Errorf("with the API Probe off and the BackendTrafficPolicy not set aside: %v; want both named", diffs)
	}
}

// TestChartFilesAreCopies: the rules and the dashboard the chart ships are
// those of deploy/components, byte for byte (helm reads files inside the
// chart only).
func TestChartFilesAreCopies(t *testing.T) {
	for copy, src := range map[string]string{
		"files/prometheusrule.yaml": "../../components/prometheus-rules/prometheusrule.yaml",
		"files/plantstore.json":     "../../components/grafana-dashboard/plantstore.json",
	} {
		a, err := os.ReadFile(filepath.Join(chartDir, copy))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(chartDir, src))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("deploy/chart/plantstore/%s differs from deploy/chart/plantstore/%s: cp %s %s", copy, src,
				filepath.Join("deploy/chart/plantstore", src), filepath.Join("deploy/chart/plantstore", copy))
		}
	}
}

// gatewayPolicies returns Envoy Gateway's objects of the prod overlay,
// which the chart leaves to the gateway's installation.
func gatewayPolicies(t testing.TB) []runtime.Object {
	t.Helper()
	var out []runtime.Object
	for _, o := range build(t, "../overlays/prod") {
		switch o.(type) {
		case *egv1a1.SecurityPolicy, *egv1a1.BackendTrafficPolicy:
			out = append(out, o)
		}
	}
	if len(out) != 2 {
		t.Fatalf("deploy/overlays/prod has %d Envoy Gateway policies; want the SecurityPolicy and the BackendTrafficPolicy", len(out))
	}
	return out
}

// chartManaged are the settings the chart sets from values of their own,
// which values.schema.json refuses among settings.
var chartManaged = []string{"addr", "admin-addr", "database-url", "redis-url", "jwt-issuers-file", "dpop-nonce-key-file", "client-cert-header", "db-max-conns", "db-query-timeout"}

// TestChartSettingsSchema: the settings values.schema.json accepts are
// the binary's serve flags' variables (settings.go, which
// TestSettingsMatchBinary holds to serve -h) less those the chart sets.
func TestChartSettingsSchema(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Settings struct {
				PropertyNames struct {
					Enum []string `json:"enum"`
				} `json:"propertyNames"`
			} `json:"settings"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range check.ServedSettings() {
		if !slices.Contains(chartManaged, f) {
			want = append(want, check.SettingVariable(f))
		}
	}
	slices.Sort(want)
	got := slices.Sorted(slices.Values(schema.Properties.Settings.PropertyNames.Enum))
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("values.schema.json: settings does not accept %s, a serve flag's variable", w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("values.schema.json: settings accepts %s, which names no serve flag or one the chart sets", g)
		}
	}
}

// TestChartValues renders the chart with good and bad values: the schema
// refuses unknown keys (additionalProperties: false, at every level) and
// values of the wrong type, the templates refuse a missing digest and two
// monitors, and the deploy policy refuses what it refuses in the overlays;
// the options no overlay takes (the issuers file, which no kustomize
// component renders, the nonce key, the client certificate header and
// Redis) render together and pass the policy.
func TestChartValues(t *testing.T) {
	tests := []struct {
		name    string
		values  []string
		set     []string
		wantErr string // a substring of helm's error
		wantBad string // a substring of a policy violation
	}{
		{name: "dev", values: []string{"ci/dev-values.yaml"}},
		{name: "prod", values: []string{"ci/prod-values.yaml"}},
		{name: "issuers file, nonce key, client certificate header, Redis", values: []string{"ci/prod-values.yaml", "ci/features-values.yaml"}},
		{name: "an unknown key", values: []string{"ci/dev-values.yaml"}, set: []string{"replicaCount=3"}, wantErr: "additional properties 'replicaCount' not allowed"},
		{name: "an unknown nested key", values: []string{"ci/dev-values.yaml"}, set: []string{"postgres.enable=true"}, wantErr: "additional properties 'enable' not allowed"},
		{name: "a misspelt setting", values: []string{"ci/dev-values.yaml"}, set: []string{"settings.PLANTSTORE_LOGLEVEL=debug"}, wantErr: "PLANTSTORE_LOGLEVEL"},
		{name: "a setting the chart sets", values: []string{"ci/dev-values.yaml"}, set: []string{"settings.PLANTSTORE_DATABASE_URL=postgres://x"}, wantErr: "PLANTSTORE_DATABASE_URL"},
		{name: "a string for a number", values: []string{"ci/dev-values.yaml"}, set: []string{"autoscaling.minReplicas=three"}, wantErr: "minReplicas"},
		{name: "a string for a boolean", values: []string{"ci/dev-values.yaml"}, set: []string{"postgres.enabled=yes"}, wantErr: "enabled"},
		{name: "a number for a setting", values: []string{"ci/dev-values.yaml"}, set: []string{"settings.PLANTSTORE_RATE_LIMIT=20"}, wantErr: "PLANTSTORE_RATE_LIMIT"},
		{name: "no digest", wantErr: "image.digest must be set"},
		{name: "a tag for a digest", values: []string{"ci/dev-values.yaml"}, set: []string{"image.digest=v0.1.0"}, wantErr: "digest"},
		{name: "both monitors", values: []string{"ci/dev-values.yaml"}, set: []string{"serviceMonitor.enabled=true"}, wantErr: "enable one, not both"},
		{name: "GOMEMLIMIT at the memory limit", values: []string{"ci/dev-values.yaml"}, set: []string{"resources.requests.memory=256Mi"}, wantBad: "GOMEMLIMIT is 100 % of the memory limit"},
		{name: "prod without the Probes", values: []string{"ci/prod-values.yaml"}, set: []string{"probe.enabled=false"}, wantBad: "without a Probe of the public URL"},
		{name: "prod without the API Probe", values: []string{"ci/prod-values.yaml"}, set: []string{"probe.api.enabled=false"}, wantBad: "without a Probe that calls GET /plants?limit=1 with a token"},
		{name: "the API Probe elsewhere", values: []string{"ci/prod-values.yaml"}, set: []string{"probe.api.url=https://plants.example.org/plants?limit=1"}, wantBad: "Probe plantstore-api: target https://plants.example.org/plants?limit=1"},
		{name: "a grace period too short for the drain", values: []string{"ci/dev-values.yaml"}, set: []string{"settings.PLANTSTORE_SHUTDOWN_TIMEOUT=60s"}, wantBad: "terminationGracePeriodSeconds"},
		{name: "a key file under no mount", values: []string{"ci/dev-values.yaml", "ci/features-values.yaml"}, set: []string{"settings.PLANTSTORE_JWT_KEY_FILE=/etc/keys/jwks.json"}, wantBad: "PLANTSTORE_JWT_KEY_FILE=/etc/keys/jwks.json is under no volumeMount"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := helmTemplate(t, "plantstore", tt.values, tt.set...)
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("helm template %v %v: %v; want an error naming %q", tt.values, tt.set, err, tt.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			objs, err := check.Decode(out)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(tt.values, "ci/prod-values.yaml") {
				// The policy judges a whole deployment: in production,
				// with the gateway's policies (CORS, Envoy's idle
				// timeout), which are installed with the gateway
				// (docs/deploy.md).
				objs = append(objs, gatewayPolicies(t)...)
			}
			v := check.Violations(objs)
			switch {
			case tt.wantBad == "" && len(v) > 0:
				t.Errorf("Violations:\n  %s", strings.Join(v, "\n  "))
			case tt.wantBad != "" && !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, tt.wantBad) }):
				t.Errorf("Violations:\n  %s\nwant one containing %q", strings.Join(v, "\n  "), tt.wantBad)
			}
		})
	}
}

// docsYAML returns the yaml blocks of docs/deploy.md, those inside a list
// item too, each without its fence's indentation (as Markdown reads it, so
// that a "---" between documents is found).
func docsYAML(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur *strings.Builder
	var indent string
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```yaml":
			cur = &strings.Builder{}
			indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(strings.TrimPrefix(line, indent) + "\n")
		}
	}
	return blocks
}

// TestDocsChartValues: docs/deploy.md's values-prod.yaml, and the values
// its Argo CD Application and Flux HelmRelease give the chart (the same),
// render what deploy/overlays/prod renders (but the gateway's policies),
// and pass the deploy policy.
func TestDocsChartValues(t *testing.T) {
	var valuesProd map[string]any
	found := map[string]map[string]any{}
	for _, blk := range docsYAML(t) {
		for _, doc := range strings.Split(blk, "\n---\n") {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				t.Fatalf("docs/deploy.md: %v\n%s", err, doc)
			}
			if strings.HasPrefix(doc, "# values-prod.yaml\n") {
				valuesProd = m
				continue
			}
			spec, _ := m["spec"].(map[string]any)
			switch m["kind"] {
			case "Application":
				src, _ := spec["source"].(map[string]any)
				if src["chart"] == "plantstore" {
					h, _ := src["helm"].(map[string]any)
					found["the Argo CD Application's valuesObject"], _ = h["valuesObject"].(map[string]any)
				}
			case "HelmRelease":
				found["the Flux HelmRelease's values"], _ = spec["values"].(map[string]any)
			}
		}
	}
	if valuesProd == nil || len(found) != 2 {
		t.Fatalf("docs/deploy.md: values-prod.yaml found: %v; chart values found in %d of the Argo CD Application and the Flux HelmRelease", valuesProd != nil, len(found))
	}
	for where, v := range found {
		if !reflect.DeepEqual(v, valuesProd) {
			a, _ := json.Marshal(v)
			b, _ := json.Marshal(valuesProd)
			t.Errorf("docs/deploy.md: %s differ from values-prod.yaml:\n%s\n%s", where, a, b)
		}
	}
	b, err := yaml.Marshal(valuesProd)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "values-prod.yaml")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if v := check.Violations(append(renderChart(t, "plantstore", []string{file}), gatewayPolicies(t)...)); len(v) > 0 {
		t.Errorf("docs/deploy.md's values-prod.yaml: Violations:\n  %s", strings.Join(v, "\n  "))
	}
	// The release pins the image and the runbooks (set-image.sh): the
	// docs' example digest may be an older release's.
	want := build(t, "../overlays/prod")
	got := renderChart(t, "plantstore", []string{file}, append(imageValues(t, want), "prometheusRule.runbookBase="+runbookBase(t))...)
	diffs, err := check.Compare(want, got, gatewayOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Errorf("docs/deploy.md's values-prod.yaml against deploy/overlays/prod: %s", d)
	}
}

// TestChartSchemaDocumentsValues: every value of values.schema.json has a
// description and a default in values.yaml (whose keys the schema holds
// all of, or helm would refuse the chart's own defaults).
func TestChartSchemaDocumentsValues(t *testing.T) {
	var schema, values map[string]any
	for file, dst := range map[string]*map[string]any{"values.schema.json": &schema, "values.yaml": &values} {
		b, err := os.ReadFile(filepath.Join(chartDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, dst); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	var walk func(path string, s, v map[string]any)
	walk = func(path string, s, v map[string]any) {
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			ps, _ := p.(map[string]any)
			where := strings.TrimPrefix(path+"."+name, ".")
			if d, _ := ps["description"].(string); d == "" {
				t.Errorf("values.schema.json: %s has no description", where)
			}
			if where == "issuersFile.issuers" {
				continue // empty by default: no issuers file
			}
			val, ok := v[name]
			if !ok {
				t.Errorf("values.yaml: no default for %s", where)
				continue
			}
			if vm, ok := val.(map[string]any); ok && ps["additionalProperties"] == false {
				walk(where, ps, vm)
			}
		}
	}
	walk("", schema, values)
	if schema["additionalProperties"] != false {
		t.Error("values.schema.json: the top level allows unknown keys")
	}
}
