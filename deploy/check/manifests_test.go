package check_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/plantstore/plantstore/deploy/check"
)

// kustomize returns the command that builds an overlay: $PLANTSTORE_KUSTOMIZE
// (e.g. "kustomize build"), else kustomize or kubectl kustomize from PATH.
func kustomize(t testing.TB) []string {
	t.Helper()
	if s := os.Getenv("PLANTSTORE_KUSTOMIZE"); s != "" {
		return strings.Fields(s)
	}
	if _, err := exec.LookPath("kustomize"); err == nil {
		return []string{"kustomize", "build"}
	}
	if _, err := exec.LookPath("kubectl"); err == nil {
		return []string{"kubectl", "kustomize"}
	}
	t.Fatal("neither kustomize nor kubectl is on PATH (set PLANTSTORE_KUSTOMIZE)")
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
			for _, want := range []string{"Namespace", "ConfigMap", "Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget", "NetworkPolicy"} {
				if kinds[want] == 0 {
					t.Errorf("%s: no %s; got %v", dir, want, kinds)
				}
			}
		})
	}
}

// TestOverlayStores checks what tells the overlays apart: dev serves the
// embedded catalog, prod reads PostgreSQL with the DSN from a Secret and
// migrates before the service starts.
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
			d := deployment(t, build(t, filepath.Join("..", "overlays", tt.overlay)))
			spec := d.Spec.Template.Spec
			dsn := func(c corev1.Container) bool {
				for _, e := range c.Env {
					if e.Name == "PLANTSTORE_DATABASE_URL" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
						return true
					}
				}
				return false
			}
			if got := dsn(spec.Containers[0]); got != tt.database {
				t.Errorf("%s: DSN from a Secret = %v, want %v", tt.overlay, got, tt.database)
			}
			migrates := len(spec.InitContainers) == 1 && dsn(spec.InitContainers[0]) &&
				len(spec.InitContainers[0].Args) == 1 && spec.InitContainers[0].Args[0] == "migrate"
			if migrates != tt.database {
				t.Errorf("%s: migrate init container = %v, want %v", tt.overlay, migrates, tt.database)
			}
		})
	}
}

func deployment(t testing.TB, objs []runtime.Object) *appsv1.Deployment {
	t.Helper()
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			return d
		}
	}
	t.Fatal("no Deployment")
	return nil
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
		{"one replica", func(o []runtime.Object) { *dep(o).Spec.Replicas = 1 }, "replicas must be at least 2"},
		{"latest tag", func(o []runtime.Object) { ctr(o).Image = "ghcr.io/plantstore/plantstore:latest" }, `tag "latest"`},
		{"untagged image", func(o []runtime.Object) { ctr(o).Image = "registry:5000/plantstore" }, "no tag or digest"},
		{"untagged init image", func(o []runtime.Object) { dep(o).Spec.Template.Spec.InitContainers[0].Image = "plantstore" }, "container migrate: image"},
		{"readiness on API port", func(o []runtime.Object) { ctr(o).ReadinessProbe.HTTPGet.Port = intstr.FromString("http") }, "readinessProbe port http"},
		{"liveness on /readyz", func(o []runtime.Object) { ctr(o).LivenessProbe.HTTPGet.Path = "/readyz" }, `livenessProbe path "/readyz"`},
		{"no readiness", func(o []runtime.Object) { ctr(o).ReadinessProbe = nil }, "readinessProbe must be an httpGet"},
		{"root filesystem writable", func(o []runtime.Object) { *ctr(o).SecurityContext.ReadOnlyRootFilesystem = false }, "readOnlyRootFilesystem"},
		{"privilege escalation", func(o []runtime.Object) { ctr(o).SecurityContext.AllowPrivilegeEscalation = nil }, "allowPrivilegeEscalation"},
		{"capabilities kept", func(o []runtime.Object) { ctr(o).SecurityContext.Capabilities.Drop = nil }, "drop ALL"},
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
			configMap(o).Data["PLANTSTORE_SHUTDOWN_DELAY"] = "10s"
		}, "terminationGracePeriodSeconds 30s"},
		{"longer drain", func(o []runtime.Object) { configMap(o).Data["PLANTSTORE_SHUTDOWN_TIMEOUT"] = "60s" }, "shutdown delay + timeout (5s + 1m0s)"},
		{"no memory limit", func(o []runtime.Object) { delete(ctr(o).Resources.Limits, corev1.ResourceMemory) }, "memory request and limit"},
		{"GOMEMLIMIT in MiB", func(o []runtime.Object) {
			for i, e := range ctr(o).Env {
				if e.Name == "GOMEMLIMIT" {
					ctr(o).Env[i].ValueFrom.ResourceFieldRef.Divisor = resource.MustParse("1Mi")
				}
			}
		}, "GOMEMLIMIT divisor"},
		{"no GOMAXPROCS", func(o []runtime.Object) {
			var env []corev1.EnvVar
			for _, e := range ctr(o).Env {
				if e.Name != "GOMAXPROCS" {
					env = append(env, e)
				}
			}
			ctr(o).Env = env
		}, "GOMAXPROCS must come from limits.cpu"},
		{"dev flag", func(o []runtime.Object) { ctr(o).Args = append(ctr(o).Args, "-dev") }, "-dev is for development only"},
		{"unnamed port", func(o []runtime.Object) { ctr(o).Ports[0].Name = "" }, "has no name"},
		{"admin port on API Service", func(o []runtime.Object) {
			s := service(o, "plantstore")
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "admin", Port: 9090, TargetPort: intstr.FromString("admin")})
		}, "exposes more than the API port"},
		{"no topology spread", func(o []runtime.Object) { dep(o).Spec.Template.Spec.TopologySpreadConstraints = nil }, "topologySpreadConstraints"},
		{"API open to all", func(o []runtime.Object) { netpol(o).Spec.Ingress[0].From = nil }, "allows every source"},
		{"metrics from gateway", func(o []runtime.Object) {
			netpol(o).Spec.Ingress[1].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] = "gateway-system"
		}, "admin port is not open to namespace monitoring"},
		{"route to wrong port", func(o []runtime.Object) {
			p := gatewayv1.PortNumber(8080)
			route(o).Spec.Rules[0].BackendRefs[0].Port = &p
		}, "no backendRef to Service plantstore port 80"},
		{"HPA min 1", func(o []runtime.Object) {
			for _, x := range o {
				if h, ok := x.(*autoscalingv2.HorizontalPodAutoscaler); ok {
					*h.Spec.MinReplicas = 1
				}
			}
		}, "minReplicas must be at least 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := build(t, filepath.Join("..", "overlays", "prod"))
			tt.mutate(objs)
			got := check.Violations(objs)
			if tt.want == "" {
				if len(got) > 0 {
					t.Errorf("Violations: got %q, want none", got)
				}
				return
			}
			found := false
			for _, v := range got {
				found = found || strings.Contains(v, tt.want)
			}
			if !found {
				t.Errorf("Violations after %s: got %q, want one containing %q", tt.name, got, tt.want)
			}
		})
	}
}

func dep(objs []runtime.Object) *appsv1.Deployment {
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			return d
		}
	}
	panic("no Deployment")
}

func ctr(objs []runtime.Object) *corev1.Container {
	return &dep(objs).Spec.Template.Spec.Containers[0]
}

func configMap(objs []runtime.Object) *corev1.ConfigMap {
	for _, o := range objs {
		if c, ok := o.(*corev1.ConfigMap); ok {
			return c
		}
	}
	panic("no ConfigMap")
}

func service(objs []runtime.Object, name string) *corev1.Service {
	for _, o := range objs {
		if s, ok := o.(*corev1.Service); ok && s.Name == name {
			return s
		}
	}
	panic("no Service " + name)
}

func netpol(objs []runtime.Object) *networkingv1.NetworkPolicy {
	for _, o := range objs {
		if n, ok := o.(*networkingv1.NetworkPolicy); ok {
			return n
		}
	}
	panic("no NetworkPolicy")
}

func route(objs []runtime.Object) *gatewayv1.HTTPRoute {
	for _, o := range objs {
		if r, ok := o.(*gatewayv1.HTTPRoute); ok {
			return r
		}
	}
	panic("no HTTPRoute")
}
