package check_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/plantstore/plantstore/deploy/check"
)

// kustomize returns the command that builds an overlay: $TEST_KUSTOMIZE
// (e.g. "kustomize build"), else kustomize or kubectl kustomize from PATH.
func kustomize(t testing.TB) []string {
	t.Helper()
	if s := os.Getenv("TEST_KUSTOMIZE"); s != "" {
		return strings.Fields(s)
	}
	if _, err := exec.LookPath("kustomize"); err == nil {
		return []string{"kustomize", "build"}
	}
	if _, err := exec.LookPath("kubectl"); err == nil {
		return []string{"kubectl", "kustomize"}
	}
	t.Fatal("neither kustomize nor kubectl is on PATH (set TEST_KUSTOMIZE)")
	return nil
}

// overlays returns the overlay directories under deploy/overlays.
func overlays(t testing.TB) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("..", "overlays", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 2 {
		t.Fatalf("overlays: got %v, want at least dev and prod", dirs)
	}
	return dirs
}

// build runs kustomize on dir and strictly decodes the result.
func build(t testing.TB, dir string) []runtime.Object {
	t.Helper()
	cmd := kustomize(t)
	var stderr bytes.Buffer
	c := exec.CommandContext(t.Context(), cmd[0], append(cmd[1:], dir)...)
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", strings.Join(cmd, " "), dir, err, stderr.String())
	}
	objs, err := check.Decode(out)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	return objs
}

func TestOverlaysPassPolicy(t *testing.T) {
	for _, dir := range overlays(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			objs := build(t, dir)
			if got := check.Violations(objs); len(got) > 0 {
				t.Errorf("Violations(%s):\n  %s", dir, strings.Join(got, "\n  "))
			}
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[reflect.TypeOf(o).Elem().Name()]++
			}
			for _, want := range []string{"ConfigMap", "Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget", "NetworkPolicy"} {
				if kinds[want] == 0 {
					t.Errorf("%s: no %s; got %v", dir, want, kinds)
				}
			}
			if kinds["ServiceMonitor"]+kinds["PodMonitor"] != 1 {
				t.Errorf("%s: want one ServiceMonitor or PodMonitor; got %v", dir, kinds)
			}
		})
	}
}

// podSecurityProblems returns what a Namespace's Pod Security labels miss:
// "restricted" enforced at a pinned version (so a cluster upgrade does not
// change what is refused), and warned and audited too.
func podSecurityProblems(ns *corev1.Namespace) []string {
	const p = "pod-security.kubernetes.io/"
	var out []string
	for _, mode := range []string{"enforce", "warn", "audit"} {
		if l := ns.Labels[p+mode]; l != "restricted" {
			out = append(out, fmt.Sprintf("%s%s = %q, want restricted", p, mode, l))
		}
	}
	if v := ns.Labels[p+"enforce-version"]; !regexp.MustCompile(`^v1\.[0-9]+$`).MatchString(v) {
		out = append(out, fmt.Sprintf("%senforce-version = %q, want a pinned version such as v1.36", p, v))
	}
	return out
}

// TestNamespaces checks deploy/namespaces, which holds the overlays'
// namespaces outside the overlays: one Namespace per overlay namespace,
// each enforcing the Pod Security "restricted" profile at a pinned version,
// warning and auditing it; as rendered before, enforce alone, unpinned,
// is refused.
func TestNamespaces(t *testing.T) {
	want := map[string]bool{}
	for _, dir := range overlays(t) {
		want[deployment(t, build(t, dir)).Namespace] = true
	}
	got := map[string]bool{}
	for _, o := range build(t, filepath.Join("..", "namespaces")) {
		ns, ok := o.(*corev1.Namespace)
		if !ok {
			t.Errorf("deploy/namespaces: %T, want Namespaces only", o)
			continue
		}
		got[ns.Name] = true
		for _, p := range podSecurityProblems(ns) {
			t.Errorf("Namespace %s: %s", ns.Name, p)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("deploy/namespaces holds %v, want the overlays' %v", got, want)
	}
	for _, o := range beforePaging("namespaces")(t) {
		if ns := o.(*corev1.Namespace); len(podSecurityProblems(ns)) != 3 {
			t.Errorf("testdata/before-paging: Namespace %s: %q, want the missing warn, audit and pinned version", ns.Name, podSecurityProblems(ns))
		}
	}
}

// TestOverlayStores checks what tells the overlays apart: dev serves the
// embedded catalog, prod reads PostgreSQL with the serving DSN from a
// Secret and migrates in a Job with the schema owner's.
func TestOverlayStores(t *testing.T) {
	tests := []struct {
		overlay  string
		database bool
	}{
		{"dev", false},
		{"prod", true},
		{"prod-ingress", true},
	}
	for _, tt := range tests {
		t.Run(tt.overlay, func(t *testing.T) {
			objs := build(t, filepath.Join("..", "overlays", tt.overlay))
			spec := deployment(t, objs).Spec.Template.Spec
			if got := secretOf(spec.Containers[0]); (got == "plantstore-database") != tt.database {
				t.Errorf("%s: DSN from Secret %q, want plantstore-database: %v", tt.overlay, got, tt.database)
			}
			if len(spec.InitContainers) > 0 {
				t.Errorf("%s: init containers %v, want none", tt.overlay, spec.InitContainers)
			}
			var jobs []string
			for _, o := range objs {
				if j, ok := o.(*batchv1.Job); ok {
					jobs = append(jobs, j.Name+" "+secretOf(j.Spec.Template.Spec.Containers[0]))
				}
			}
			want := []string(nil)
			if tt.database {
				want = []string{"plantstore-migrate plantstore-database-owner"}
			}
			if !reflect.DeepEqual(jobs, want) {
				t.Errorf("%s: Jobs (name, DSN Secret) %q, want %q", tt.overlay, jobs, want)
			}
		})
	}
}

func secretOf(c corev1.Container) string {
	for _, e := range c.Env {
		if e.Name == "PLANTSTORE_DATABASE_URL" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return e.ValueFrom.SecretKeyRef.Name
		}
	}
	return ""
}

// apiPeers lists who may reach the API port, as "namespace/pod labels".
func apiPeers(objs []runtime.Object) []string {
	var out []string
	for _, o := range objs {
		np, ok := o.(*networkingv1.NetworkPolicy)
		if !ok {
			continue
		}
		for _, r := range np.Spec.Ingress {
			api := false
			for _, p := range r.Ports {
				api = api || p.Port != nil && p.Port.String() == check.APIPortName
			}
			for _, f := range r.From {
				if !api {
					continue
				}
				peer := ""
				if f.NamespaceSelector != nil {
					peer = f.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
				}
				if f.PodSelector != nil {
					peer += "/" + labels.Set(f.PodSelector.MatchLabels).String()
				}
				out = append(out, peer)
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestGatewayPeers checks that each overlay opens the API port to the
// gateway its route needs, and only to it: the pods of the Gateway "public"
// (Envoy Gateway's in prod, by GEP-1762's label in dev), the ingress-nginx
// controller for its Ingress. Before the fix, the base opened it to gateway-system whatever
// the overlay, so prod-ingress dropped every request ingress-nginx sent.
func TestGatewayPeers(t *testing.T) {
	tests := []struct {
		name    string
		objs    func(t *testing.T) []runtime.Object
		want    []string
		wantErr bool
	}{
		{"dev", overlay("dev"), []string{"gateway-system/gateway.networking.k8s.io/gateway-name=public"}, false},
		{"prod", overlay("prod"), []string{"envoy-gateway-system/gateway.envoyproxy.io/owning-gateway-name=public,gateway.envoyproxy.io/owning-gateway-namespace=gateway-system"}, false},
		// Before the fix: every pod of gateway-system, and so no Envoy
		// Gateway pod in its default namespace.
		{"testdata/before-paging/prod.yaml", beforePaging("prod"), []string{"envoy-gateway-system/gateway.envoyproxy.io/owning-gateway-name=public,gateway.envoyproxy.io/owning-gateway-namespace=gateway-system"}, true},
		{"prod-ingress", overlay("prod-ingress"), []string{"ingress-nginx/app.kubernetes.io/name=ingress-nginx"}, false},
		{"testdata/before/prod-ingress.yaml", before("prod-ingress"), []string{"ingress-nginx/app.kubernetes.io/name=ingress-nginx"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := apiPeers(tt.objs(t))
			if ok := reflect.DeepEqual(got, tt.want); ok == tt.wantErr {
				t.Errorf("%s: the API port is open to %q; want %q: %v", tt.name, got, tt.want, !tt.wantErr)
			}
		})
	}
}

func overlay(name string) func(t *testing.T) []runtime.Object {
	return func(t *testing.T) []runtime.Object { return build(t, filepath.Join("..", "overlays", name)) }
}

func before(name string) func(t *testing.T) []runtime.Object {
	return rendered(filepath.Join("testdata", "before", name+".yaml"))
}

// beforePaging returns the objects of an overlay (or deploy/namespaces) as
// rendered before the alerting, scaling and gateway fixes of
// testdata/before-paging.
func beforePaging(name string) func(t *testing.T) []runtime.Object {
	return rendered(filepath.Join("testdata", "before-paging", name+".yaml"))
}

func rendered(path string) func(t *testing.T) []runtime.Object {
	return func(t *testing.T) []runtime.Object {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := check.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}
}

// TestBeforeFixRejected runs the policy on the overlays as rendered before
// issue 17 (testdata/before, kustomize output of that commit): each defect
// the issue names must be reported.
func TestBeforeFixRejected(t *testing.T) {
	tests := []struct {
		defect, overlay, want string
	}{
		{"Ingress without namespace", "prod-ingress", `Ingress plantstore: namespace "", want the Deployment's "plantstore"`},
		{"Ingress without labels", "prod-ingress", `Ingress plantstore: label app.kubernetes.io/name = ""`},
		{"gateway hard-coded in the base NetworkPolicy", "prod", "NetworkPolicy plantstore opens both the API and the admin port"},
		{"replicas fights the HPA (base)", "dev", "replicas is 2 while HorizontalPodAutoscaler plantstore scales it"},
		{"replicas fights the HPA (prod)", "prod", "replicas is 3 while HorizontalPodAutoscaler plantstore scales it"},
		{"GOMEMLIMIT 100 % of the limit", "prod", "GOMEMLIMIT is 100 % of the memory limit"},
		{"readiness timeout within the check budget", "prod", "readinessProbe timeoutSeconds 2s is not above the 5s"},
		{"service links on", "prod", "enableServiceLinks must be false"},
		{"trusted proxies IPv4 only", "prod", "covers no IPv6 range"},
		{"namespace in the app overlay", "dev", "Namespace plantstore-dev is in the app's manifests"},
		{"namespace in the app overlay (prod)", "prod", "Namespace plantstore is in the app's manifests"},
		{"both topology spreads soft", "prod", "every topology spread is ScheduleAnyway"},
		{"egress open", "prod", "no NetworkPolicy limits the pods' egress"},
		{"migrations in an init container", "prod", "init container migrate runs migrate on every pod start"},
		{"no migration Job", "prod", "no Job runs plantstore migrate"},
		{"10 pods x 10 connections", "prod", "= 123 PostgreSQL connections, over the budget of 97"},
		{"resource metadata not routed", "prod", "no Exact match of /.well-known/oauth-protected-resource"},
		{"resource metadata not routed (Ingress)", "prod-ingress", "no Exact path /.well-known/oauth-protected-resource"},
	}
	for _, tt := range tests {
		t.Run(tt.defect, func(t *testing.T) {
			got := check.Violations(before(tt.overlay)(t))
			if !slices.ContainsFunc(got, func(v string) bool { return strings.Contains(v, tt.want) }) {
				t.Errorf("Violations(testdata/before/%s.yaml): got\n  %s\nwant one containing %q", tt.overlay, strings.Join(got, "\n  "), tt.want)
			}
		})
	}
}

// TestBeforePagingRejected runs the policy on the overlays as rendered
// before the fixes that make the pager tell the truth and the replicas
// scale (testdata/before-paging, kustomize output of that commit): each
// defect must be reported.
func TestBeforePagingRejected(t *testing.T) {
	tests := []struct {
		defect, overlay, want string
	}{
		{"spread counts tainted nodes", "prod", "topology spread on kubernetes.io/hostname is DoNotSchedule without nodeTaintsPolicy: Honor"},
		{"memory request under GOMEMLIMIT", "prod", "container plantstore: memory request 128Mi below GOMEMLIMIT (230Mi)"},
		{"pods without env", "prod", "the pods have no env label"},
		{"pods without env (dev)", "dev", "the pods have no env label"},
		{"ServiceMonitor drops env", "prod", "ServiceMonitor plantstore: podTargetLabels must hold env"},
		{"PodMonitor drops env", "dev", "PodMonitor plantstore: podTargetLabels must hold env"},
		{"reload alert without for", "prod", "alert PlantstoreCatalogReloadFailing has no for"},
		{"alerts page for every environment", "prod", `alert PlantstoreAvailabilityBudgetBurnFast reads plantstore:availability_errors:ratio_rate1h without env="production"`},
		{"keys alert for every environment", "prod", `alert PlantstoreNoVerificationKeys reads plantstore_jwks_keys without env="production"`},
		{"alerts by instance", "prod", "alert PlantstoreNoVerificationKeys speaks of instance"},
		{"day windows every 30 s", "prod", "rule plantstore:availability_errors:ratio_rate3d reads a range of a day or more in group plantstore.sli, evaluated every 30s"},
		{"runbooks on a fixed branch", "prod", "runbook_url https://github.com/plantstore/plantstore/blob/main/docs/runbooks/availability-slo.md is not the runbook of the version deployed (v0.1.0)"},
		{"no probe from outside", "prod", "the alerts are deployed without a Probe of the public URL"},
		{"gateway namespace admitted whole", "prod", "admits every pod of the namespaces kubernetes.io/metadata.name=gateway-system to the API port"},
		{"listener left out of the budget", "prod", "(10 pods + 1 surging) x (PLANTSTORE_DB_MAX_CONNS 4 + 1 listening) + 2 for a migration = 57 PostgreSQL connections, over the budget of 50"},
		{"production by tag", "prod", `image "ghcr.io/plantstore/plantstore:v0.1.0": production deploys by digest`},
		{"no rate limit for the whole deployment", "prod", "no rate limit per subject for the whole deployment"},
		{"no rate limit in the pods", "prod", "PLANTSTORE_RATE_LIMIT is off"},
	}
	for _, tt := range tests {
		t.Run(tt.defect, func(t *testing.T) {
			objs := beforePaging(tt.overlay)(t)
			// The policy reads the pods' env label to know production; the
			// overlays had none then, so give prod its own.
			if tt.overlay == "prod" && !strings.HasPrefix(tt.defect, "pods without env") {
				dep(objs).Spec.Template.Labels[check.EnvLabel] = check.PagingEnv
			}
			got := check.Violations(objs)
			if !slices.ContainsFunc(got, func(v string) bool { return strings.Contains(v, tt.want) }) {
				t.Errorf("Violations(testdata/before-paging/%s.yaml): got\n  %s\nwant one containing %q", tt.overlay, strings.Join(got, "\n  "), tt.want)
			}
		})
	}
}

func deployment(t testing.TB, objs []runtime.Object) *appsv1.Deployment {
	t.Helper()
	return find[*appsv1.Deployment](objs, "")
}

func TestDecodeRejects(t *testing.T) {
	broken, err := os.ReadFile(filepath.Join("testdata", "broken.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		doc  string
		want string // "" when the document must decode
	}{
		{"valid", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: ok}\n", ""},
		{"testdata/broken.yaml", string(broken), `unknown field "containerPortt"`},
		{"wrong type", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  ports: [{name: http, port: eighty}]\n", "cannot unmarshal string"},
		{"duplicate field", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\nmetadata: {name: b}\n", "already set"},
		{"unexpected kind", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", "unexpected kind"},
		{"no name", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {}\n", "metadata.name are required"},
		{"unknown HTTPRoute field", "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r}\nspec:\n  rulez: []\n", `unknown field "rulez"`},
		{"unknown ServiceMonitor field", "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: s}\nspec:\n  selector: {}\n  endpoints: [{port: metrics, intervall: 30s}]\n", `unknown field "intervall"`},
		{"unknown PrometheusRule field", "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: r}\nspec:\n  groups: [{name: g, rules: [{alert: A, exprr: up}]}]\n", `unknown field "exprr"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := check.Decode([]byte(tt.doc))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Decode(%q): %v, want no error", tt.doc, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Decode(%q): got error %v, want one containing %q", tt.doc, err, tt.want)
			}
		})
	}
}

// TestViolationsCatch breaks the prod overlay one point at a time and
// expects the policy to name each break.
func TestViolationsCatch(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(objs []runtime.Object)
		want   string // "" when no violation is expected
	}{
		{"unchanged", func([]runtime.Object) {}, ""},
		{"replicas beside the HPA", func(o []runtime.Object) { dep(o).Spec.Replicas = ptr(int32(4)) }, "replicas is 4 while HorizontalPodAutoscaler plantstore scales it"},
		{"latest tag", func(o []runtime.Object) { ctr(o).Image = "ghcr.io/plantstore/plantstore:latest" }, `tag "latest"`},
		{"untagged image", func(o []runtime.Object) { ctr(o).Image = "registry:5000/plantstore" }, "no tag or digest"},
		{"untagged migration image", func(o []runtime.Object) { job(o).Spec.Template.Spec.Containers[0].Image = "plantstore" }, "container migrate: image"},
		{"readiness on API port", func(o []runtime.Object) { ctr(o).ReadinessProbe.HTTPGet.Port = intstr.FromString("http") }, "readinessProbe port http"},
		{"liveness on /readyz", func(o []runtime.Object) { ctr(o).LivenessProbe.HTTPGet.Path = "/readyz" }, `livenessProbe path "/readyz"`},
		{"liveness on /healthz, the old name", func(o []runtime.Object) { ctr(o).LivenessProbe.HTTPGet.Path = "/healthz" }, `livenessProbe path "/healthz", want "/livez"`},
		{"no readiness", func(o []runtime.Object) { ctr(o).ReadinessProbe = nil }, "readinessProbe must be an httpGet"},
		{"readiness timeout at the check budget", func(o []runtime.Object) { ctr(o).ReadinessProbe.TimeoutSeconds = 5 }, "readinessProbe timeoutSeconds 5s is not above the 5s"},
		{"readiness timeout defaulted", func(o []runtime.Object) { ctr(o).ReadinessProbe.TimeoutSeconds = 0 }, "readinessProbe timeoutSeconds 1s"},
		{"readiness period below its timeout", func(o []runtime.Object) { ctr(o).ReadinessProbe.PeriodSeconds = 5 }, "readinessProbe periodSeconds 5s below its timeout 6s"},
		{"root filesystem writable", func(o []runtime.Object) { *ctr(o).SecurityContext.ReadOnlyRootFilesystem = false }, "readOnlyRootFilesystem"},
		{"privilege escalation", func(o []runtime.Object) { ctr(o).SecurityContext.AllowPrivilegeEscalation = nil }, "allowPrivilegeEscalation"},
		{"capabilities kept", func(o []runtime.Object) { ctr(o).SecurityContext.Capabilities.Drop = nil }, "drop ALL"},
		{"migration runs as root", func(o []runtime.Object) {
			job(o).Spec.Template.Spec.SecurityContext.RunAsNonRoot = nil
			job(o).Spec.Template.Spec.Containers[0].SecurityContext.RunAsNonRoot = nil
		}, "container migrate: runAsNonRoot"},
		{"runs as root", func(o []runtime.Object) {
			ctr(o).SecurityContext.RunAsNonRoot = nil
			dep(o).Spec.Template.Spec.SecurityContext.RunAsNonRoot = nil
		}, "runAsNonRoot"},
		{"no seccomp", func(o []runtime.Object) {
			ctr(o).SecurityContext.SeccompProfile = nil
			dep(o).Spec.Template.Spec.SecurityContext.SeccompProfile = nil
		}, "seccompProfile"},
		{"short grace", func(o []runtime.Object) { *dep(o).Spec.Template.Spec.TerminationGracePeriodSeconds = 25 }, "terminationGracePeriodSeconds"},
		{"default grace, longer delay", func(o []runtime.Object) {
			dep(o).Spec.Template.Spec.TerminationGracePeriodSeconds = nil
			settings(o).Data["PLANTSTORE_SHUTDOWN_DELAY"] = "10s"
		}, "terminationGracePeriodSeconds 30s"},
		{"longer drain", func(o []runtime.Object) { settings(o).Data["PLANTSTORE_SHUTDOWN_TIMEOUT"] = "60s" }, "shutdown delay + timeout (5s + 1m0s)"},
		{"no memory limit", func(o []runtime.Object) { delete(ctr(o).Resources.Limits, corev1.ResourceMemory) }, "memory request and limit"},
		{"GOMEMLIMIT the whole limit", func(o []runtime.Object) {
			setEnv(ctr(o), corev1.EnvVar{Name: "GOMEMLIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1")}}})
		}, "GOMEMLIMIT is 100 % of the memory limit"},
		{"GOMEMLIMIT in MiB", func(o []runtime.Object) {
			setEnv(ctr(o), corev1.EnvVar{Name: "GOMEMLIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}})
		}, "GOMEMLIMIT divisor"},
		{"GOMEMLIMIT 95 %", func(o []runtime.Object) { setEnv(ctr(o), corev1.EnvVar{Name: "GOMEMLIMIT", Value: "243MiB"}) }, "GOMEMLIMIT is 95 % of the memory limit"},
		{"GOMEMLIMIT a quarter", func(o []runtime.Object) { setEnv(ctr(o), corev1.EnvVar{Name: "GOMEMLIMIT", Value: "64MiB"}) }, "GOMEMLIMIT is 25 % of the memory limit"},
		{"GOMEMLIMIT in Kubernetes units", func(o []runtime.Object) { setEnv(ctr(o), corev1.EnvVar{Name: "GOMEMLIMIT", Value: "230Mi"}) }, `GOMEMLIMIT="230Mi"`},
		{"limit raised, GOMEMLIMIT kept", func(o []runtime.Object) { ctr(o).Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1Gi") }, "GOMEMLIMIT is 22 % of the memory limit 1Gi"},
		{"no GOMEMLIMIT", func(o []runtime.Object) { dropEnv(ctr(o), "GOMEMLIMIT") }, "GOMEMLIMIT is not set"},
		{"no GOMAXPROCS", func(o []runtime.Object) { dropEnv(ctr(o), "GOMAXPROCS") }, "GOMAXPROCS must come from limits.cpu"},
		{"service links on", func(o []runtime.Object) { dep(o).Spec.Template.Spec.EnableServiceLinks = nil }, "Deployment plantstore: enableServiceLinks must be false: Kubernetes would set PLANTSTORE_METRICS_SERVICE_HOST"},
		{"service links on in the migration", func(o []runtime.Object) { job(o).Spec.Template.Spec.EnableServiceLinks = ptr(true) }, "Job plantstore-migrate: enableServiceLinks must be false"},
		{"unknown setting", func(o []runtime.Object) { settings(o).Data["PLANTSTORE_JWT_ISSUER_URL"] = "https://x" }, "PLANTSTORE_JWT_ISSUER_URL names no serve flag"},
		{"PLANTSTORE_DEV", func(o []runtime.Object) {
			ctr(o).Env = append(ctr(o).Env, corev1.EnvVar{Name: "PLANTSTORE_DEV", Value: "1"})
		}, "PLANTSTORE_DEV names no serve flag"},
		{"a setting of this round", func(o []runtime.Object) { settings(o).Data["PLANTSTORE_TRACE_SUBJECT"] = "true" }, ""},
		{"dev flag", func(o []runtime.Object) { ctr(o).Args = append(ctr(o).Args, "-dev") }, "-dev is for development only"},
		{"trusting everyone", func(o []runtime.Object) { settings(o).Data["PLANTSTORE_TRUSTED_PROXIES"] = "0.0.0.0/0,::/0" }, "0.0.0.0/0 trusts every address"},
		{"trusted proxies IPv6 only", func(o []runtime.Object) { settings(o).Data["PLANTSTORE_TRUSTED_PROXIES"] = "fc00::/7" }, "covers no IPv4 range"},
		{"trusted proxies not a CIDR", func(o []runtime.Object) {
			settings(o).Data["PLANTSTORE_TRUSTED_PROXIES"] = "10.0.0.0/8,fc00::/7,gateway"
		}, `"gateway" is not a CIDR`},
		{"unnamed port", func(o []runtime.Object) { ctr(o).Ports[0].Name = "" }, "has no name"},
		{"admin port on API Service", func(o []runtime.Object) {
			s := service(o, "plantstore")
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "admin", Port: 9090, TargetPort: intstr.FromString("admin")})
		}, "exposes more than the API port"},
		{"no topology spread", func(o []runtime.Object) { dep(o).Spec.Template.Spec.TopologySpreadConstraints = nil }, "topologySpreadConstraints"},
		{"soft spreads only", func(o []runtime.Object) {
			for i := range dep(o).Spec.Template.Spec.TopologySpreadConstraints {
				dep(o).Spec.Template.Spec.TopologySpreadConstraints[i].WhenUnsatisfiable = corev1.ScheduleAnyway
			}
		}, "every topology spread is ScheduleAnyway"},
		{"spread selecting other pods", func(o []runtime.Object) {
			dep(o).Spec.Template.Spec.TopologySpreadConstraints[1].LabelSelector.MatchLabels = map[string]string{"app": "other"}
		}, "topology spread on kubernetes.io/hostname does not select the pods"},
		{"Namespace in the overlay", func(o []runtime.Object) {}, ""},
		{"object elsewhere", func(o []runtime.Object) { service(o, "plantstore-metrics").Namespace = "default" }, `Service plantstore-metrics: namespace "default"`},
		{"object unlabelled", func(o []runtime.Object) {
			delete(netpolNamed(o, "plantstore-gateway").Labels, "app.kubernetes.io/part-of")
		}, "NetworkPolicy plantstore-gateway: label app.kubernetes.io/part-of"},
		{"API open to all", func(o []runtime.Object) { netpolNamed(o, "plantstore-gateway").Spec.Ingress[0].From = nil }, "allows every source"},
		{"API open to every namespace", func(o []runtime.Object) {
			netpolNamed(o, "plantstore-gateway").Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels = nil
		}, "which is everyone"},
		{"no gateway component", func(o []runtime.Object) { netpolNamed(o, "plantstore-gateway").Spec.Ingress = nil }, "nothing opens the API port"},
		{"gateway policy opens the admin port", func(o []runtime.Object) {
			r := &netpolNamed(o, "plantstore-gateway").Spec.Ingress[0]
			p := intstr.FromString("admin")
			r.Ports = append(r.Ports, networkingv1.NetworkPolicyPort{Port: &p})
		}, "NetworkPolicy plantstore-gateway opens both the API and the admin port"},
		{"metrics from the gateway", func(o []runtime.Object) {
			netpolNamed(o, "plantstore").Spec.Ingress[0].From[0] = *netpolNamed(o, "plantstore-gateway").Spec.Ingress[0].From[0].DeepCopy()
		}, "may reach the admin port as well as the API"},
		{"egress open", func(o []runtime.Object) {
			netpolNamed(o, "plantstore").Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
			netpolNamed(o, "plantstore-tracing").Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		}, "Deployment plantstore: no NetworkPolicy limits the pods' egress"},
		{"no DNS", func(o []runtime.Object) { np := netpolNamed(o, "plantstore"); np.Spec.Egress = np.Spec.Egress[1:] }, "no egress rule reaches DNS (UDP port 53)"},
		{"no IdP", func(o []runtime.Object) {
			np := netpolNamed(o, "plantstore")
			np.Spec.Egress = append(np.Spec.Egress[:1], np.Spec.Egress[2:]...)
		}, "no egress rule reaches the identity provider (PLANTSTORE_JWT_ISSUER) (TCP port 443)"},
		{"IdP on another port", func(o []runtime.Object) {
			settings(o).Data["PLANTSTORE_JWT_ISSUER"] = "https://sso.example.com:8443/realms/plants"
		}, "(TCP port 8443)"},
		{"no PostgreSQL", func(o []runtime.Object) { np := netpolNamed(o, "plantstore"); np.Spec.Egress = np.Spec.Egress[:2] }, "Deployment plantstore: no egress rule reaches PostgreSQL"},
		{"no trace collector", func(o []runtime.Object) { netpolNamed(o, "plantstore-tracing").Spec.Egress = nil }, "no egress rule reaches the trace collector (OTEL_EXPORTER_OTLP_ENDPOINT) (TCP port 4318)"},
		{"trace collector over gRPC", func(o []runtime.Object) {
			settings(o).Data["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://tempo.tempo.svc:14317"
			settings(o).Data["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
		}, "the trace collector (OTEL_EXPORTER_OTLP_ENDPOINT) (TCP port 14317)"},
		{"Redis without its egress", func(o []runtime.Object) {
			np := netpolNamed(o, "plantstore")
			np.Spec.Egress = slices.DeleteFunc(np.Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool { return r.Ports[0].Port.IntVal == 6379 })
		}, "Deployment plantstore: no egress rule reaches Redis (PLANTSTORE_REDIS_URL) (TCP port 6379)"},
		{"Redis on another port", func(o []runtime.Object) {
			settings(o).Data["PLANTSTORE_REDIS_URL"] = "rediss://redis.example.com:6380"
		}, "no egress rule reaches Redis (PLANTSTORE_REDIS_URL) (TCP port 6380)"},
		{"egress to every port", func(o []runtime.Object) {
			np := netpolNamed(o, "plantstore")
			np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{})
		}, "egress rule 4 allows every port"},
		{"migration cannot reach PostgreSQL", func(o []runtime.Object) {
			np := netpolNamed(o, "plantstore-migrate")
			np.Spec.Egress = np.Spec.Egress[:1]
		}, "Job plantstore-migrate: no egress rule reaches PostgreSQL"},
		{"migrate init container", func(o []runtime.Object) {
			m := job(o).Spec.Template.Spec.Containers[0]
			dep(o).Spec.Template.Spec.InitContainers = []corev1.Container{m}
		}, "init container migrate runs migrate on every pod start"},
		{"no migration Job", func(o []runtime.Object) { job(o).Spec.Template.Spec.Containers[0].Args = []string{"version"} }, "no Job runs plantstore migrate"},
		{"migration with the serving Secret", func(o []runtime.Object) {
			job(o).Spec.Template.Spec.Containers[0].Env[0].ValueFrom.SecretKeyRef.Name = "plantstore-database"
		}, "migrates with the serving Secret plantstore-database"},
		{"migration not a PreSync hook", func(o []runtime.Object) { delete(job(o).Annotations, "argocd.argoproj.io/hook") }, "argocd.argoproj.io/hook must name PreSync"},
		{"migration not a Helm-style hook", func(o []runtime.Object) { job(o).Annotations["helm.sh/hook"] = "post-install" }, "helm.sh/hook must name pre-install and pre-upgrade"},
		{"migration reads the release's ConfigMap", func(o []runtime.Object) {
			c := &job(o).Spec.Template.Spec.Containers[0]
			c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: settings(o).Name}}})
		}, "which a pre-sync hook runs before"},
		{"migration as the release's ServiceAccount", func(o []runtime.Object) { job(o).Spec.Template.Spec.ServiceAccountName = "plantstore" }, "serviceAccountName plantstore"},
		{"migration without a deadline", func(o []runtime.Object) { job(o).Spec.ActiveDeadlineSeconds = nil }, "no activeDeadlineSeconds"},
		{"DSN in the ConfigMap", func(o []runtime.Object) { settings(o).Data["PLANTSTORE_DATABASE_URL"] = "postgres://u:p@db/plants" }, "PLANTSTORE_DATABASE_URL is a literal value"},
		{"pool over the budget", func(o []runtime.Object) { settings(o).Data["PLANTSTORE_DB_MAX_CONNS"] = "5" }, "(10 pods + 1 surging) x (PLANTSTORE_DB_MAX_CONNS 5 + 1 listening) + 2 for a migration = 68 PostgreSQL connections, over the budget of 50"},
		{"the listener counted", func(o []runtime.Object) { settings(o).Data["PLANTSTORE_DB_MAX_CONNS"] = "4" }, "(PLANTSTORE_DB_MAX_CONNS 4 + 1 listening) + 2 for a migration = 57"},
		{"no listener per request", func(o []runtime.Object) {
			settings(o).Data["PLANTSTORE_DB_MAX_CONNS"] = "4"
			settings(o).Data["PLANTSTORE_DATABASE_SNAPSHOT"] = "false"
		}, ""},
		{"HPA grown past the budget", func(o []runtime.Object) { hpa(o).Spec.MaxReplicas = 12 }, "(12 pods + 1 surging)"},
		{"pool size unset", func(o []runtime.Object) { delete(settings(o).Data, "PLANTSTORE_DB_MAX_CONNS") }, "PLANTSTORE_DB_MAX_CONNS is not set"},
		{"no budget annotation", func(o []runtime.Object) {
			delete(dep(o).Annotations, check.ConnectionBudgetAnnotation)
			settings(o).Data["PLANTSTORE_DB_MAX_CONNS"] = "9"
		}, "= 112 PostgreSQL connections, over the budget of 97 (PostgreSQL's default"},
		{"route to wrong port", func(o []runtime.Object) {
			p := gatewayv1.PortNumber(8080)
			route(o).Spec.Rules[0].BackendRefs[0].Port = &p
		}, "no Exact match of /plants to Service plantstore port 80"},
		{"resource metadata not routed", func(o []runtime.Object) { route(o).Spec.Rules[0].Matches = route(o).Spec.Rules[0].Matches[:1] }, "no Exact match of /.well-known/oauth-protected-resource"},
		{"HPA min 1", func(o []runtime.Object) { *hpa(o).Spec.MinReplicas = 1 }, "minReplicas must be at least 2"},
		{"key file through a subPath", func(o []runtime.Object) { mountKeys(o, "jwks.json") }, "PLANTSTORE_JWT_KEY_FILE=/etc/plantstore/jwt/jwks.json comes through the subPath mount"},
		{"key file in a mounted directory", func(o []runtime.Object) { mountKeys(o, "") }, ""},
		{"both monitors", func(o []runtime.Object) {}, ""},
		{"ServiceMonitor on the API port", func(o []runtime.Object) { serviceMonitor(o).Spec.Endpoints[0].Port = "http" }, `endpoint port "http" is not Service plantstore-metrics's port to the admin port`},
		{"ServiceMonitor job from another label", func(o []runtime.Object) { serviceMonitor(o).Spec.JobLabel = "app.kubernetes.io/component" }, `gives job="metrics", want "plantstore"`},
		{"ServiceMonitor without classic buckets", func(o []runtime.Object) { serviceMonitor(o).Spec.ScrapeClassicHistograms = nil }, "scrapeClassicHistograms must be true"},
		{"ServiceMonitor in every namespace", func(o []runtime.Object) { serviceMonitor(o).Spec.NamespaceSelector.Any = true }, "namespaceSelector reaches beyond"},
		{"alert without runbook", func(o []runtime.Object) {
			delete(alertRule(promRule(o), "PlantstoreAvailabilityBudgetBurnFast").Annotations, "runbook_url")
		}, "alert PlantstoreAvailabilityBudgetBurnFast has no runbook_url"},
		{"alert severity page", func(o []runtime.Object) {
			alertRule(promRule(o), "PlantstoreAvailabilityBudgetBurnFast").Labels["severity"] = "page"
		}, `severity "page"`},
		{"alert without for", func(o []runtime.Object) { alertRule(promRule(o), "PlantstoreCatalogReloadFailing").For = nil }, "alert PlantstoreCatalogReloadFailing has no for"},
		{"alert for every environment", func(o []runtime.Object) {
			alertRule(promRule(o), "PlantstoreNoVerificationKeys").Expr = intstr.FromString(`sum by (namespace, job, pod, issuer) (plantstore_jwks_keys{job="plantstore"}) == 0`)
		}, `alert PlantstoreNoVerificationKeys reads plantstore_jwks_keys{job="plantstore"} without env="production"`},
		{"alert by instance", func(o []runtime.Object) {
			alertRule(promRule(o), "PlantstoreNoVerificationKeys").Expr = intstr.FromString(`sum by (namespace, job, env, instance, issuer) (plantstore_jwks_keys{job="plantstore", env="production"}) == 0`)
		}, "alert PlantstoreNoVerificationKeys speaks of instance"},
		{"day windows every 30 s", func(o []runtime.Object) {
			d := monitoringv1.Duration("30s")
			promRule(o).Spec.Groups[1].Interval = &d
		}, "reads a range of a day or more in group plantstore.sli.slow, evaluated every 30s"},
		{"day windows every 5 m", func(o []runtime.Object) {
			d := monitoringv1.Duration("5m")
			promRule(o).Spec.Groups[1].Interval = &d
		}, "reads a range of a day or more in group plantstore.sli.slow, evaluated every 5m0s"},
		{"runbook without base", func(o []runtime.Object) {
			alertRule(promRule(o), "PlantstoreDown").Annotations["runbook_url"] = "docs/runbooks/outage.md"
		}, `alert PlantstoreDown: runbook_url "docs/runbooks/outage.md" is not <base>/docs/runbooks/<page>.md`},
		{"runbook of another version", func(o []runtime.Object) {
			alertRule(promRule(o), "PlantstoreDown").Annotations["runbook_url"] = "https://github.com/plantstore/plantstore/blob/main/docs/runbooks/outage.md"
		}, "alert PlantstoreDown: runbook_url https://github.com/plantstore/plantstore/blob/main/docs/runbooks/outage.md is not the runbook of the version deployed (v0.1.0)"},
		{"production by tag", func(o []runtime.Object) { ctr(o).Image = "ghcr.io/plantstore/plantstore:v0.1.0" }, "production deploys by digest"},
		{"memory request under a written GOMEMLIMIT", func(o []runtime.Object) {
			ctr(o).Resources.Requests[corev1.ResourceMemory] = resource.MustParse("128Mi")
			setEnv(ctr(o), corev1.EnvVar{Name: "GOMEMLIMIT", Value: "230MiB"})
		}, "container plantstore: memory request 128Mi below GOMEMLIMIT (230Mi)"},
		{"memory request at a third of the limit", func(o []runtime.Object) {
			ctr(o).Resources.Requests[corev1.ResourceMemory] = resource.MustParse("80Mi")
		}, "GOMEMLIMIT is 31 % of the memory limit 256Mi"},
		{"GOMEMLIMIT written out", func(o []runtime.Object) { setEnv(ctr(o), corev1.EnvVar{Name: "GOMEMLIMIT", Value: "230MiB"}) }, "GOMEMLIMIT=230MiB is written out: take it from requests.memory"},
		{"migration Job memory request under its limit", func(o []runtime.Object) {
			job(o).Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("64Mi")
		}, "container migrate: memory request 64Mi below its limit 128Mi"},
		{"HPA target at the CPU limit", func(o []runtime.Object) {
			ctr(o).Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
		}, "HorizontalPodAutoscaler plantstore: its target, 1000m (averageUtilization 100 of requests.cpu 1), is within 10 % of the CPU limit 1"},
		{"spread counting tainted nodes", func(o []runtime.Object) {
			dep(o).Spec.Template.Spec.TopologySpreadConstraints[1].NodeTaintsPolicy = nil
		}, "topology spread on kubernetes.io/hostname is DoNotSchedule without nodeTaintsPolicy: Honor"},
		{"pods without env", func(o []runtime.Object) { delete(dep(o).Spec.Template.Labels, check.EnvLabel) }, "the pods have no env label"},
		{"ServiceMonitor drops env", func(o []runtime.Object) { serviceMonitor(o).Spec.PodTargetLabels = nil }, "ServiceMonitor plantstore: podTargetLabels must hold env"},
		{"no Probe", func(o []runtime.Object) {
			// In its place, a copy of an object the policy has no rule about.
			i := slices.IndexFunc(o, func(x runtime.Object) bool { _, ok := x.(*monitoringv1.Probe); return ok })
			o[i] = find[*corev1.ServiceAccount](o, "").DeepCopyObject()
		}, "without a Probe of the public URL"},
		{"no API Probe", func(o []runtime.Object) {
			i := slices.IndexFunc(o, func(x runtime.Object) bool { p, ok := x.(*monitoringv1.Probe); return ok && p.Name == "plantstore-api" })
			o[i] = find[*corev1.ServiceAccount](o, "").DeepCopyObject()
		}, "without a Probe that calls GET /plants?limit=1 with a token (job plantstore-api-probe)"},
		{"API Probe of the metadata", func(o []runtime.Object) {
			p := find[*monitoringv1.Probe](o, "plantstore-api")
			p.Spec.Targets.StaticConfig.Targets[0] = "https://plants.example.com/.well-known/oauth-protected-resource"
		}, "Probe plantstore-api: target https://plants.example.com/.well-known/oauth-protected-resource, want the public URL's https://plants.example.com/plants?limit=1"},
		{"alert without team", func(o []runtime.Object) {
			delete(alertRule(promRule(o), "PlantstoreDown").Labels, "team")
		}, "alert PlantstoreDown has no team label"},
		{"rule merging clusters", func(o []runtime.Object) {
			a := alertRule(promRule(o), "PlantstoreStoreErrors")
			a.Expr = intstr.FromString(strings.ReplaceAll(a.Expr.String(), "cluster, ", ""))
		}, "rule PlantstoreStoreErrors aggregates by (namespace, job, env, store) without cluster"},
		{"recording rule merging clusters", func(o []runtime.Object) {
			for g := range promRule(o).Spec.Groups {
				for i := range promRule(o).Spec.Groups[g].Rules {
					if r := &promRule(o).Spec.Groups[g].Rules[i]; r.Record == "plantstore:plants_requests:rate1h" {
						r.Expr = intstr.FromString(`sum by (namespace, job, env) (rate(plantstore_http_requests_total{job="plantstore", route="/plants"}[1h]))`)
					}
				}
			}
		}, "rule plantstore:plants_requests:rate1h aggregates by (namespace, job, env) without cluster"},
		{"Probe of another host", func(o []runtime.Object) {
			probe(o).Spec.Targets.StaticConfig.Targets[0] = "https://plants.other.example/.well-known/oauth-protected-resource"
		}, "Probe plantstore: target https://plants.other.example/.well-known/oauth-protected-resource, want the public URL's https://plants.example.com/.well-known/oauth-protected-resource"},
		{"Probe under another job", func(o []runtime.Object) { probe(o).Spec.JobName = "" }, `Probe plantstore: jobName "", want "plantstore-probe"`},
		{"Probe of another environment", func(o []runtime.Object) { probe(o).Spec.Targets.StaticConfig.Labels["env"] = "dev" }, `Probe plantstore: label env="dev", want the pods' "production"`},
		{"gateway namespace admitted whole", func(o []runtime.Object) {
			netpolNamed(o, "plantstore-gateway").Spec.Ingress[0].From[0].PodSelector = nil
		}, "admits every pod of the namespaces kubernetes.io/metadata.name=envoy-gateway-system to the API port"},
		{"no shared limit", func(o []runtime.Object) { dropEnv(ctr(o), "PLANTSTORE_REDIS_URL") }, "no rate limit per subject for the whole deployment"},
		{"Envoy's idle timeout past the service's", func(o []runtime.Object) {
			d := gatewayv1.Duration("5m")
			trafficPolicy(o).Spec.Timeout.HTTP.ConnectionIdleTimeout = &d
		}, "Envoy keeps idle connections to the service for 5m0s, the service closes them after 2m0s"},
		{"Envoy's idle timeout by default", func(o []runtime.Object) { trafficPolicy(o).Spec.Timeout = nil }, "Envoy keeps idle connections to the service for 1h0m0s"},
		{"DNS without NodeLocal DNSCache", func(o []runtime.Object) {
			np := netpolNamed(o, "plantstore")
			np.Spec.Egress[0].To = np.Spec.Egress[0].To[:1]
		}, "Deployment plantstore: DNS egress misses NodeLocal DNSCache"},
		{"DNS to another namespace's pods", func(o []runtime.Object) {
			netpolNamed(o, "plantstore").Spec.Egress[0].To[0].PodSelector.MatchLabels["k8s-app"] = "coredns"
		}, "DNS egress does not reach the cluster's DNS pods"},
		{"Redis by every address", func(o []runtime.Object) {
			np := netpolNamed(o, "plantstore")
			for i, r := range np.Spec.Egress {
				if r.Ports[0].Port.IntVal == 6379 {
					np.Spec.Egress[i].To = []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}}}
				}
			}
		}, "egress to Redis (PLANTSTORE_REDIS_URL) (TCP port 6379) names no pods, only every address"},
		{"Redis by its range", func(o []runtime.Object) {
			np := netpolNamed(o, "plantstore")
			for i, r := range np.Spec.Egress {
				if r.Ports[0].Port.IntVal == 6379 {
					np.Spec.Egress[i].To = []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.20.0.0/24"}}}
				}
			}
		}, ""},
		{"PostgreSQL by every address", func(o []runtime.Object) {
			np := netpolNamed(o, "plantstore-migrate")
			np.Spec.Egress[1].To = np.Spec.Egress[1].To[1:]
		}, "Job plantstore-migrate: egress to PostgreSQL (TCP port 5432) names no pods"},
		{"egress to a whole namespace", func(o []runtime.Object) {
			netpolNamed(o, "plantstore-tracing").Spec.Egress[0].To[0].PodSelector = nil
		}, "NetworkPolicy plantstore-tracing: egress rule 0 reaches every pod of the namespaces kubernetes.io/metadata.name=observability"},
		{"migration policy synced after its hook", func(o []runtime.Object) {
			delete(netpolNamed(o, "plantstore-migrate").Annotations, "argocd.argoproj.io/hook")
		}, "NetworkPolicy plantstore-migrate: Job plantstore-migrate is an Argo CD PreSync hook and the policy it needs is not"},
		{"migration policy in the Job's wave", func(o []runtime.Object) {
			delete(netpolNamed(o, "plantstore-migrate").Annotations, "argocd.argoproj.io/sync-wave")
		}, "NetworkPolicy plantstore-migrate: sync wave 0, not before Job plantstore-migrate's 0"},
		{"migration policy after the Helm hook", func(o []runtime.Object) {
			netpolNamed(o, "plantstore-migrate").Annotations["helm.sh/hook-weight"] = "0"
		}, "NetworkPolicy plantstore-migrate: Helm hook weight 0, not below Job plantstore-migrate's -5"},
		{"migration policy not applied with the Job", func(o []runtime.Object) {
			delete(netpolNamed(o, "plantstore-migrate").Labels, "app.kubernetes.io/component")
		}, `NetworkPolicy plantstore-migrate: label app.kubernetes.io/component="", want the Job's "migrate"`},
		{"CORS at the gateway and in the service", func(o []runtime.Object) {
			settings(o).Data["PLANTSTORE_CORS_ORIGINS"] = "https://app.example.com"
		}, "responses would carry Access-Control-Allow-Origin twice"},
		{"CORS with credentials", func(o []runtime.Object) { securityPolicy(o).Spec.CORS.AllowCredentials = ptr(true) }, "cors.allowCredentials lets pages send cookies"},
		{"CORS hiding the Link header", func(o []runtime.Object) {
			securityPolicy(o).Spec.CORS.ExposeHeaders = []string{"WWW-Authenticate", "DPoP-Nonce", "X-Request-ID", "Retry-After"}
		}, "cors.exposeHeaders lacks Link"},
		{"CORS without the DPoP header", func(o []runtime.Object) { securityPolicy(o).Spec.CORS.AllowHeaders = []string{"Authorization"} }, "cors.allowHeaders lacks DPoP"},
		{"CORS origin pattern", func(o []runtime.Object) {
			securityPolicy(o).Spec.CORS.AllowOrigins = []egv1a1.Origin{"https://*.example.com"}
		}, "list exact origins"},
		{"policy on another route", func(o []runtime.Object) { trafficPolicy(o).Spec.TargetRefs[0].Name = "other" }, "BackendTrafficPolicy plantstore: targets HTTPRoute other"},
		{"no limit in the pods", func(o []runtime.Object) { delete(settings(o).Data, "PLANTSTORE_RATE_LIMIT") }, "PLANTSTORE_RATE_LIMIT is off"},
		{"dashboard over 256 KiB", func(o []runtime.Object) {
			cm := configMapNamed(o, "plantstore-dashboard")
			cm.Data["plantstore.json"] += strings.Repeat(" ", 256*1024)
		}, "ConfigMap plantstore-dashboard"},
	}
	prod := build(t, filepath.Join("..", "overlays", "prod"))
	dev := build(t, filepath.Join("..", "overlays", "dev"))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := deepCopy(prod)
			switch tt.name {
			case "Namespace in the overlay":
				objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plantstore"}})
				tt.want = "Namespace plantstore is in the app's manifests"
			case "both monitors":
				objs = append(objs, deepCopy(dev)...)
				objs = slices.DeleteFunc(objs, func(o runtime.Object) bool {
					_, isPM := o.(*monitoringv1.PodMonitor)
					return !isPM && objNamespace(o) == "plantstore-dev"
				})
				for _, o := range objs {
					if pm, ok := o.(*monitoringv1.PodMonitor); ok {
						pm.Namespace = "plantstore"
					}
				}
				tt.want = "both a ServiceMonitor and a PodMonitor"
			}
			tt.mutate(objs)
			got := check.Violations(objs)
			if tt.want == "" {
				if len(got) > 0 {
					t.Errorf("Violations: got %q, want none", got)
				}
				return
			}
			if !slices.ContainsFunc(got, func(v string) bool { return strings.Contains(v, tt.want) }) {
				t.Errorf("Violations after %s: got\n  %s\nwant one containing %q", tt.name, strings.Join(got, "\n  "), tt.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func deepCopy(objs []runtime.Object) []runtime.Object {
	out := make([]runtime.Object, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopyObject()
	}
	return out
}

func dep(objs []runtime.Object) *appsv1.Deployment { return find[*appsv1.Deployment](objs, "") }

func ctr(objs []runtime.Object) *corev1.Container {
	return &dep(objs).Spec.Template.Spec.Containers[0]
}

func job(objs []runtime.Object) *batchv1.Job { return find[*batchv1.Job](objs, "") }

func hpa(objs []runtime.Object) *autoscalingv2.HorizontalPodAutoscaler {
	return find[*autoscalingv2.HorizontalPodAutoscaler](objs, "")
}

// settings returns the ConfigMap the service takes its PLANTSTORE_*
// settings from.
func settings(objs []runtime.Object) *corev1.ConfigMap {
	return configMapNamed(objs, ctr(objs).EnvFrom[0].ConfigMapRef.Name)
}

func configMapNamed(objs []runtime.Object, name string) *corev1.ConfigMap {
	return find[*corev1.ConfigMap](objs, name)
}

func setEnv(c *corev1.Container, e corev1.EnvVar) {
	dropEnv(c, e.Name)
	c.Env = append(c.Env, e)
}

func dropEnv(c *corev1.Container, name string) {
	c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
}

// mountKeys mounts the Secret plantstore-jwt at /etc/plantstore/jwt (only
// its jwks.json through a subPath when subPath is set) and points
// PLANTSTORE_JWT_KEY_FILE at it.
func mountKeys(objs []runtime.Object, subPath string) {
	spec := &dep(objs).Spec.Template.Spec
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "jwt", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "plantstore-jwt"}}})
	m := corev1.VolumeMount{Name: "jwt", MountPath: "/etc/plantstore/jwt", ReadOnly: true}
	if subPath != "" {
		m.MountPath += "/" + subPath
		m.SubPath = subPath
	}
	ctr(objs).VolumeMounts = append(ctr(objs).VolumeMounts, m)
	settings(objs).Data["PLANTSTORE_JWT_KEY_FILE"] = "/etc/plantstore/jwt/jwks.json"
}

func service(objs []runtime.Object, name string) *corev1.Service {
	return find[*corev1.Service](objs, name)
}

func netpolNamed(objs []runtime.Object, name string) *networkingv1.NetworkPolicy {
	return find[*networkingv1.NetworkPolicy](objs, name)
}

func route(objs []runtime.Object) *gatewayv1.HTTPRoute { return find[*gatewayv1.HTTPRoute](objs, "") }

func serviceMonitor(objs []runtime.Object) *monitoringv1.ServiceMonitor {
	return find[*monitoringv1.ServiceMonitor](objs, "")
}

func promRule(objs []runtime.Object) *monitoringv1.PrometheusRule {
	return find[*monitoringv1.PrometheusRule](objs, "")
}

func probe(objs []runtime.Object) *monitoringv1.Probe {
	return find[*monitoringv1.Probe](objs, "plantstore")
}

func securityPolicy(objs []runtime.Object) *egv1a1.SecurityPolicy {
	return find[*egv1a1.SecurityPolicy](objs, "")
}

func trafficPolicy(objs []runtime.Object) *egv1a1.BackendTrafficPolicy {
	return find[*egv1a1.BackendTrafficPolicy](objs, "")
}

// find returns the first object of type T in objs, named name unless name
// is empty; it panics when there is none, which fails the test.
func find[T interface {
	runtime.Object
	GetName() string
}](objs []runtime.Object, name string) T {
	for _, o := range objs {
		if v, ok := o.(T); ok && (name == "" || v.GetName() == name) {
			return v
		}
	}
	var zero T
	panic(fmt.Sprintf("no %T named %q", zero, name))
}

func objNamespace(o runtime.Object) string {
	acc, err := meta.Accessor(o)
	if err != nil {
		return ""
	}
	return acc.GetNamespace()
}

// TestRedisComponent builds the dev overlay with deploy/components/redis
// on top, as an overlay that shares replay and rate state would (prod
// takes it): the Redis URL comes from its Secret, the egress policy opens
// Redis's port to its pods, and the whole passes the policy, which refuses
// it without that port.
func TestRedisComponent(t *testing.T) {
	tmp := t.TempDir()
	for _, d := range []string{"base", "components", "overlays"} {
		if err := os.CopyFS(filepath.Join(tmp, d), os.DirFS(filepath.Join("..", d))); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(tmp, "overlays", "dev-redis")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../dev\ncomponents:\n  - ../../components/redis\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := build(t, dir)
	if got := check.Violations(objs); len(got) > 0 {
		t.Errorf("Violations(dev with Redis):\n  %s", strings.Join(got, "\n  "))
	}
	var ref *corev1.SecretKeySelector
	for _, e := range ctr(objs).Env {
		if e.Name == "PLANTSTORE_REDIS_URL" && e.ValueFrom != nil {
			ref = e.ValueFrom.SecretKeyRef
		}
	}
	if ref == nil || ref.Name != "plantstore-redis" || ref.Key != "url" {
		t.Errorf("PLANTSTORE_REDIS_URL from %+v; want the Secret plantstore-redis, key url", ref)
	}
	// The secret Redis keys are hashed under: the key hash-key of the same
	// Secret, mounted as a directory, so that a new one is read without a
	// restart.
	var keyFile string
	for _, e := range ctr(objs).Env {
		if e.Name == "PLANTSTORE_REDIS_KEY_FILE" {
			keyFile = e.Value
		}
	}
	var keyVol *corev1.SecretVolumeSource
	for _, v := range dep(objs).Spec.Template.Spec.Volumes {
		if v.Name == "redis-key" {
			keyVol = v.Secret
		}
	}
	if m := mountNamed(objs, "redis-key"); keyFile != m.MountPath+"/hash-key" || m.SubPath != "" || !m.ReadOnly ||
		keyVol == nil || keyVol.SecretName != "plantstore-redis" || len(keyVol.Items) != 1 || keyVol.Items[0].Key != "hash-key" || keyVol.Items[0].Path != "hash-key" {
		t.Errorf("PLANTSTORE_REDIS_KEY_FILE %q, mount %+v, volume %+v; want the key hash-key of the Secret plantstore-redis, mounted read-only as a directory", keyFile, m, keyVol)
	}
	np := netpolNamed(objs, "plantstore")
	np.Spec.Egress = np.Spec.Egress[:len(np.Spec.Egress)-1]
	if got := strings.Join(check.Violations(objs), "\n"); !strings.Contains(got, "no egress rule reaches Redis (PLANTSTORE_REDIS_URL) (TCP port 6379)") {
		t.Errorf("without the component's egress rule, violations:\n%s\nwant Redis's port named", got)
	}
}
