package check

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// CapacityInputs reads the capacity model's inputs (.ci/capacity.d/inputs):
// one "name value" a line, "#" starting a comment.
func CapacityInputs(b []byte) (map[string]float64, error) {
	in := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: want a name and a value, got %q", n, sc.Text())
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", n, f[0], err)
		}
		in[f[0]] = v
	}
	return in, sc.Err()
}

// CapacityProblems returns where the pods and the autoscaler of one
// overlay's objects differ from the capacity model's inputs, or nil: the
// CPU a pod serves at the HorizontalPodAutoscaler's target (its CPU
// request times averageUtilization, a share of the request) must be the
// model's pod_cpu_target, the memory request (which the Deployment gives
// the runtime as GOMEMLIMIT) its pod_mem_mb and, with bounds set, the
// autoscaler's minimum and maximum its min_replicas and max_replicas. The
// tables of docs/capacity.md are computed from those inputs: a manifest
// that drifts from them makes every table wrong.
func CapacityProblems(objs []runtime.Object, in map[string]float64, bounds bool) []string {
	var v violations
	m := sortByKind(objs)
	if len(m.deps) != 1 || len(m.hpas) != 1 {
		v.add("want one Deployment and one HorizontalPodAutoscaler, got %d and %d", len(m.deps), len(m.hpas))
		return v
	}
	d, h := m.deps[0], m.hpas[0]
	c := mainContainer(d)
	if c == nil {
		v.add("Deployment %s: no container named plantstore", d.Name)
		return v
	}
	for _, k := range []string{"pod_cpu_target", "pod_mem_mb", "min_replicas", "max_replicas"} {
		if _, ok := in[k]; !ok {
			v.add("the capacity inputs have no %s", k)
		}
	}
	if len(v) > 0 {
		return v
	}
	util, ok := cpuUtilization(h)
	req, hasReq := c.Resources.Requests[corev1.ResourceCPU]
	switch {
	case !ok:
		v.add("HorizontalPodAutoscaler %s: no CPU target of type Utilization: the model sizes pods by a share of their CPU request", h.Name)
	case !hasReq:
		v.add("container %s: no CPU request", c.Name)
	default:
		at := float64(req.MilliValue()) / 1000 * float64(util) / 100
		if math.Abs(at-in["pod_cpu_target"]) > 0.0005 {
			v.add("HorizontalPodAutoscaler %s holds each pod at %.3g cores (requests.cpu %s at averageUtilization %d), the capacity model at %.3g (pod_cpu_target): the replicas it runs for a load are %.2g times the model's", h.Name, at, req.String(), util, in["pod_cpu_target"], in["pod_cpu_target"]/at)
		}
	}
	if mem, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok || mem.Value() != int64(in["pod_mem_mb"])<<20 {
		v.add("container %s: memory request %s, the capacity model's pod_mem_mb %gMi", c.Name, mem.String(), in["pod_mem_mb"])
	}
	if goal, ok := goMemLimit(*c); !ok || goal != int64(in["pod_mem_mb"])<<20 {
		v.add("container %s: GOMEMLIMIT of %d bytes, the capacity model's pod_mem_mb %gMi", c.Name, goal, in["pod_mem_mb"])
	}
	if bounds {
		if h.Spec.MinReplicas == nil || float64(*h.Spec.MinReplicas) != in["min_replicas"] {
			v.add("HorizontalPodAutoscaler %s: minReplicas %v, the capacity model's min_replicas %g", h.Name, h.Spec.MinReplicas, in["min_replicas"])
		}
		if float64(h.Spec.MaxReplicas) != in["max_replicas"] {
			v.add("HorizontalPodAutoscaler %s: maxReplicas %d, the capacity model's max_replicas %g", h.Name, h.Spec.MaxReplicas, in["max_replicas"])
		}
	}
	return v
}

// cpuUtilization returns the HPA's CPU target as a share of the request,
// in percent.
func cpuUtilization(h *autoscalingv2.HorizontalPodAutoscaler) (int32, bool) {
	for _, m := range h.Spec.Metrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
			m.Resource.Target.Type == autoscalingv2.UtilizationMetricType && m.Resource.Target.AverageUtilization != nil {
			return *m.Resource.Target.AverageUtilization, true
		}
	}
	return 0, false
}

// mainContainer returns the Deployment's container named plantstore, or nil.
func mainContainer(d *appsv1.Deployment) *corev1.Container {
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == "plantstore" {
			return &d.Spec.Template.Spec.Containers[i]
		}
	}
	return nil
}
