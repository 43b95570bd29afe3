package check_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/plantstore/plantstore/deploy/check"
)

// capacityInputs reads .ci/capacity.d/inputs, which the capacity model and
// docs/capacity.md's tables are computed from.
func capacityInputs(t testing.TB) map[string]float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", ".ci", "capacity.d", "inputs"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := check.CapacityInputs(b)
	if err != nil {
		t.Fatalf(".ci/capacity.d/inputs: %v", err)
	}
	return in
}

// TestCapacityMatchesManifests holds the manifests to the capacity model:
// the CPU a pod serves at the autoscaler's target, its memory request
// (GOMEMLIMIT) and, for the base, the autoscaler's bounds must be the
// inputs docs/capacity.md is computed from, in the base and every overlay
// (prod raises the minimum; its bounds are its own). Each kind of drift is
// shown refused, and so are the manifests as they were before (the HPA at
// 70 % of a 250m request: a quarter of the model's pod).
func TestCapacityMatchesManifests(t *testing.T) {
	in := capacityInputs(t)
	base := build(t, filepath.Join("..", "base"))
	tests := []struct {
		name   string
		objs   func(t *testing.T) []runtime.Object
		bounds bool
		want   string // "" for none
	}{
		{"base", func(*testing.T) []runtime.Object { return deepCopy(base) }, true, ""},
		{"prod", overlay("prod"), false, ""},
		{"dev", overlay("dev"), true, ""},
		{"prod-ingress", overlay("prod-ingress"), false, ""},
		{"a CPU request of 250m", func(*testing.T) []runtime.Object {
			o := deepCopy(base)
			ctr(o).Resources.Requests[corev1.ResourceCPU] = resource.MustParse("250m")
			return o
		}, true, "holds each pod at 0.25 cores (requests.cpu 250m at averageUtilization 100), the capacity model at 0.7"},
		{"the HPA at 70 %", func(*testing.T) []runtime.Object {
			o := deepCopy(base)
			*hpa(o).Spec.Metrics[0].Resource.Target.AverageUtilization = 70
			return o
		}, true, "holds each pod at 0.49 cores"},
		{"the HPA on an average value", func(*testing.T) []runtime.Object {
			o := deepCopy(base)
			q := resource.MustParse("700m")
			hpa(o).Spec.Metrics[0].Resource.Target = autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q}
			return o
		}, true, "no CPU target of type Utilization"},
		{"more memory", func(*testing.T) []runtime.Object {
			o := deepCopy(base)
			ctr(o).Resources.Requests[corev1.ResourceMemory] = resource.MustParse("240Mi")
			return o
		}, true, "memory request 240Mi, the capacity model's pod_mem_mb 230Mi"},
		{"a higher maximum", func(*testing.T) []runtime.Object {
			o := deepCopy(base)
			hpa(o).Spec.MaxReplicas = 20
			return o
		}, true, "maxReplicas 20, the capacity model's max_replicas 10"},
		{"testdata/before-pager/prod.yaml", rendered(filepath.Join("testdata", "before-pager", "prod.yaml")), false, "holds each pod at 0.175 cores (requests.cpu 250m at averageUtilization 70), the capacity model at 0.7 (pod_cpu_target): the replicas it runs for a load are 4 times the model's"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := check.CapacityProblems(tt.objs(t), in, tt.bounds)
			switch {
			case tt.want == "" && len(got) > 0:
				t.Errorf("CapacityProblems(%s): %q, want none", tt.name, got)
			case tt.want != "" && !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, tt.want) }):
				t.Errorf("CapacityProblems(%s): %q, want one containing %q", tt.name, got, tt.want)
			}
		})
	}
}
