package check

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Ports and names the policy expects of the service.
const (
	APIPort       = 8080
	AdminPort     = 9090
	APIPortName   = "http"
	AdminPortName = "admin"
	// Job is the job label the rules and the dashboard select
	// (job="plantstore"): the ServiceMonitor's or PodMonitor's jobLabel
	// must give it.
	Job = "plantstore"
)

// ReadyCheckBudget is the longest /readyz lets its checks (keys, store)
// run: the service's readyTimeout in observability/admin.go.
const ReadyCheckBudget = 5 * time.Second

// The service's defaults for -shutdown-delay and -shutdown-timeout.
const (
	defaultShutdownDelay   = 5 * time.Second
	defaultShutdownTimeout = 20 * time.Second
)

// The labels every object carries (deploy/base and each component).
var commonLabels = []string{"app.kubernetes.io/name", "app.kubernetes.io/part-of"}

// manifests are the objects of one overlay, by kind.
type manifests struct {
	all             []runtime.Object
	deps            []*appsv1.Deployment
	jobs            []*batchv1.Job
	services        []*corev1.Service
	configMaps      map[string]*corev1.ConfigMap
	namespaces      []*corev1.Namespace
	hpas            []*autoscalingv2.HorizontalPodAutoscaler
	pdbs            []*policyv1.PodDisruptionBudget
	netpols         []*networkingv1.NetworkPolicy
	ingresses       []*networkingv1.Ingress
	routes          []*gatewayv1.HTTPRoute
	serviceMonitors []*monitoringv1.ServiceMonitor
	podMonitors     []*monitoringv1.PodMonitor
	rules           []*monitoringv1.PrometheusRule
	probes          []*monitoringv1.Probe
	securityPols    []*egv1a1.SecurityPolicy
	trafficPols     []*egv1a1.BackendTrafficPolicy
}

func sortByKind(objs []runtime.Object) *manifests {
	m := &manifests{all: objs, configMaps: map[string]*corev1.ConfigMap{}}
	for _, o := range objs {
		switch t := o.(type) {
		case *appsv1.Deployment:
			m.deps = append(m.deps, t)
		case *batchv1.Job:
			m.jobs = append(m.jobs, t)
		case *corev1.Service:
			m.services = append(m.services, t)
		case *corev1.ConfigMap:
			m.configMaps[t.Name] = t
		case *corev1.Namespace:
			m.namespaces = append(m.namespaces, t)
		case *autoscalingv2.HorizontalPodAutoscaler:
			m.hpas = append(m.hpas, t)
		case *policyv1.PodDisruptionBudget:
			m.pdbs = append(m.pdbs, t)
		case *networkingv1.NetworkPolicy:
			m.netpols = append(m.netpols, t)
		case *networkingv1.Ingress:
			m.ingresses = append(m.ingresses, t)
		case *gatewayv1.HTTPRoute:
			m.routes = append(m.routes, t)
		case *monitoringv1.ServiceMonitor:
			m.serviceMonitors = append(m.serviceMonitors, t)
		case *monitoringv1.PodMonitor:
			m.podMonitors = append(m.podMonitors, t)
		case *monitoringv1.PrometheusRule:
			m.rules = append(m.rules, t)
		case *monitoringv1.Probe:
			m.probes = append(m.probes, t)
		case *egv1a1.SecurityPolicy:
			m.securityPols = append(m.securityPols, t)
		case *egv1a1.BackendTrafficPolicy:
			m.trafficPols = append(m.trafficPols, t)
		}
	}
	return m
}

// Violations returns every way the objects of one overlay break the
// deployment policy, or nil. The objects are those Decode returns.
func Violations(objs []runtime.Object) []string {
	var v violations
	m := sortByKind(objs)
	for _, ns := range m.namespaces {
		v.add("Namespace %s is in the app's manifests: namespaces live in deploy/namespaces, so that deleting or pruning the app never deletes one", ns.Name)
	}
	if len(m.deps) != 1 {
		v.add("want exactly one Deployment, got %d", len(m.deps))
		return v
	}
	d := m.deps[0]
	checkMetadata(m, d, &v)
	pod := d.Spec.Template
	podLabels := labels.Set(pod.Labels)
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(podLabels) {
		v.add("Deployment %s: selector does not match the pod template labels", d.Name)
	}
	hpa := checkScaling(d, m.hpas, m.pdbs, podLabels, &v)
	switch {
	case hpa != nil && d.Spec.Replicas != nil:
		v.add("Deployment %s: replicas is %d while HorizontalPodAutoscaler %s scales it: every apply would reset the count", d.Name, *d.Spec.Replicas, hpa.Name)
	case hpa == nil && (d.Spec.Replicas == nil || *d.Spec.Replicas < 2):
		v.add("Deployment %s: replicas must be at least 2", d.Name)
	}
	env := configEnv(pod.Spec.Containers, m.configMaps, &v)
	checkPodSpec("Deployment "+d.Name, pod.Spec, m.services, &v)
	checkSettings(env, &v)
	checkGrace(pod.Spec, env, &v)
	checkTopology(d.Name, pod.Spec.TopologySpreadConstraints, podLabels, &v)
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		checkContainer(c, psc, &v)
	}
	var main *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "plantstore" {
			main = &pod.Spec.Containers[i]
		}
	}
	if main == nil {
		v.add("Deployment %s: no container named plantstore", d.Name)
		return v
	}
	checkMain(main, env, &v)
	if hpa != nil {
		checkCPUTarget(hpa, main, &v)
	}
	checkMounts(main, pod.Spec, env, &v)
	apiService := checkServices(m.services, podLabels, &v)
	checkRoutes(m.routes, m.ingresses, apiService, &v)
	checkNetworkPolicies(m.netpols, podLabels, &v)
	checkEgress("Deployment "+d.Name, m.netpols, podLabels, egressNeeds(env), &v)
	checkDatabase(m, d, main, env, hpa, &v)
	checkMonitoring(m, podLabels, env, &v)
	checkEnvoyGateway(m, env, &v)
	if podLabels[EnvLabel] == PagingEnv {
		checkProduction(m, main, env, &v)
	}
	for _, cm := range m.configMaps {
		checkConfigMapSize(cm, &v)
	}
	return v
}

type violations []string

func (v *violations) add(format string, args ...any) {
	*v = append(*v, fmt.Sprintf(format, args...))
}

// kindOf names an object's kind for messages.
func kindOf(o runtime.Object) string {
	if k := o.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return reflect.TypeOf(o).Elem().Name()
}

// checkMetadata requires every object in the Deployment's namespace, with
// the Deployment's common labels: an object a component adds above the
// overlay that sets them would otherwise land in the default namespace
// unlabelled.
func checkMetadata(m *manifests, d *appsv1.Deployment, v *violations) {
	if d.Namespace == "" {
		v.add("Deployment %s: no namespace", d.Name)
	}
	for _, o := range m.all {
		if _, ok := o.(*corev1.Namespace); ok {
			continue
		}
		acc, err := meta.Accessor(o)
		if err != nil {
			continue
		}
		if acc.GetNamespace() != d.Namespace {
			v.add("%s %s: namespace %q, want the Deployment's %q", kindOf(o), acc.GetName(), acc.GetNamespace(), d.Namespace)
		}
		for _, l := range commonLabels {
			if want := d.Labels[l]; want == "" || acc.GetLabels()[l] != want {
				v.add("%s %s: label %s = %q, want %q", kindOf(o), acc.GetName(), l, acc.GetLabels()[l], want)
			}
		}
	}
}

// configEnv merges the ConfigMaps the containers take their environment
// from and their literal env values.
func configEnv(cs []corev1.Container, cms map[string]*corev1.ConfigMap, v *violations) map[string]string {
	env := map[string]string{}
	for _, c := range cs {
		for _, from := range c.EnvFrom {
			if from.ConfigMapRef == nil {
				continue
			}
			cm, ok := cms[from.ConfigMapRef.Name]
			if !ok {
				v.add("container %s: envFrom ConfigMap %s is not in the manifests", c.Name, from.ConfigMapRef.Name)
				continue
			}
			for k, val := range cm.Data {
				env[k] = val
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				env[e.Name] = e.Value
			} else if _, ok := env[e.Name]; !ok {
				env[e.Name] = ""
			}
		}
	}
	return env
}

// checkSettings refuses PLANTSTORE_* variables that name no serve flag:
// the binary warns about them and they do nothing.
func checkSettings(env map[string]string, v *violations) {
	var unknown []string
	for name := range env {
		if len(name) > len("PLANTSTORE_") && strings.HasPrefix(name, "PLANTSTORE_") && !knownVariable(name) {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		v.add("%s names no serve flag: the binary warns about it and ignores it", name)
	}
}

// checkGrace requires the grace period to cover the service's own drain:
// the shutdown delay plus the shutdown timeout.
func checkGrace(spec corev1.PodSpec, env map[string]string, v *violations) {
	delay, timeout := defaultShutdownDelay, defaultShutdownTimeout
	for name, dst := range map[string]*time.Duration{"PLANTSTORE_SHUTDOWN_DELAY": &delay, "PLANTSTORE_SHUTDOWN_TIMEOUT": &timeout} {
		if s, ok := env[name]; ok {
			d, err := time.ParseDuration(s)
			if err != nil {
				v.add("%s=%q is not a duration", name, s)
				continue
			}
			*dst = d
		}
	}
	grace := 30 * time.Second // the API server's default
	if spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	}
	if grace <= delay+timeout {
		v.add("terminationGracePeriodSeconds %v must be above shutdown delay + timeout (%v + %v)", grace, delay, timeout)
	}
}

func checkScaling(d *appsv1.Deployment, hpas []*autoscalingv2.HorizontalPodAutoscaler, pdbs []*policyv1.PodDisruptionBudget, podLabels labels.Set, v *violations) *autoscalingv2.HorizontalPodAutoscaler {
	var found *autoscalingv2.HorizontalPodAutoscaler
	for _, h := range hpas {
		if h.Spec.ScaleTargetRef.Kind != "Deployment" || h.Spec.ScaleTargetRef.Name != d.Name {
			continue
		}
		found = h
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 {
			v.add("HorizontalPodAutoscaler %s: minReplicas must be at least 2", h.Name)
		}
		if h.Spec.MaxReplicas < 2 || (h.Spec.MinReplicas != nil && h.Spec.MaxReplicas < *h.Spec.MinReplicas) {
			v.add("HorizontalPodAutoscaler %s: maxReplicas %d below minReplicas", h.Name, h.Spec.MaxReplicas)
		}
	}
	if found == nil {
		v.add("no HorizontalPodAutoscaler for Deployment %s", d.Name)
	}
	pdbFound := false
	for _, p := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(podLabels) {
			pdbFound = true
		}
	}
	if !pdbFound {
		v.add("no PodDisruptionBudget selects the pods")
	}
	return found
}

// checkCPUTarget requires the autoscaler's CPU target, a share of the
// pod's CPU request, to leave room under the CPU limit: the autoscaler
// adds pods only once the pods' use is over 110 % of the target (its
// default tolerance), which a pod throttled at its limit below that never
// reaches.
func checkCPUTarget(h *autoscalingv2.HorizontalPodAutoscaler, c *corev1.Container, v *violations) {
	util, ok := cpuUtilization(h)
	if !ok {
		v.add("HorizontalPodAutoscaler %s: no CPU target of type Utilization", h.Name)
		return
	}
	req, okReq := c.Resources.Requests[corev1.ResourceCPU]
	lim, okLim := c.Resources.Limits[corev1.ResourceCPU]
	if !okReq || !okLim {
		return // checkContainer names them
	}
	at := float64(req.MilliValue()) * float64(util) / 100
	if at*1.1 >= float64(lim.MilliValue()) {
		v.add("HorizontalPodAutoscaler %s: its target, %.0fm (averageUtilization %d of requests.cpu %s), is within 10 %% of the CPU limit %s: pods throttled at the limit never go far enough past the target to scale out", h.Name, at, util, req.String(), lim.String())
	}
}

// checkConfigMapSize keeps every ConfigMap (the dashboard's above all)
// within what "kubectl apply" can record in its last-applied annotation.
func checkConfigMapSize(cm *corev1.ConfigMap, v *violations) {
	n := 0
	for k, s := range cm.Data {
		n += len(k) + len(s)
	}
	if n > 256*1024 {
		v.add("ConfigMap %s: %d bytes, over the 262144 that kubectl apply keeps in its last-applied annotation", cm.Name, n)
	}
}
