package check

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Ports, paths and namespaces the policy expects.
const (
	APIPort          = 8080
	AdminPort        = 9090
	APIPortName      = "http"
	AdminPortName    = "admin"
	GatewayNamespace = "gateway-system"
	MonitorNamespace = "monitoring"
)

// The service's defaults for -shutdown-delay and -shutdown-timeout.
const (
	defaultShutdownDelay   = 5 * time.Second
	defaultShutdownTimeout = 20 * time.Second
)

// Violations returns every way the objects of one overlay break the
// deployment policy, or nil. The objects are those Decode returns.
func Violations(objs []runtime.Object) []string {
	var v violations
	var (
		deps      []*appsv1.Deployment
		services  []*corev1.Service
		hpas      []*autoscalingv2.HorizontalPodAutoscaler
		pdbs      []*policyv1.PodDisruptionBudget
		netpols   []*networkingv1.NetworkPolicy
		ingresses []*networkingv1.Ingress
		routes    []*gatewayv1.HTTPRoute
	)
	configMaps := map[string]*corev1.ConfigMap{}
	for _, o := range objs {
		switch t := o.(type) {
		case *appsv1.Deployment:
			deps = append(deps, t)
		case *corev1.Service:
			services = append(services, t)
		case *corev1.ConfigMap:
			configMaps[t.Name] = t
		case *autoscalingv2.HorizontalPodAutoscaler:
			hpas = append(hpas, t)
		case *policyv1.PodDisruptionBudget:
			pdbs = append(pdbs, t)
		case *networkingv1.NetworkPolicy:
			netpols = append(netpols, t)
		case *networkingv1.Ingress:
			ingresses = append(ingresses, t)
		case *gatewayv1.HTTPRoute:
			routes = append(routes, t)
		}
	}
	if len(deps) != 1 {
		v.add("want exactly one Deployment, got %d", len(deps))
		return v
	}
	d := deps[0]
	pod := d.Spec.Template
	podLabels := labels.Set(pod.Labels)
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(podLabels) {
		v.add("Deployment %s: selector does not match the pod template labels", d.Name)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		v.add("Deployment %s: replicas must be at least 2", d.Name)
	}
	if len(pod.Spec.TopologySpreadConstraints) == 0 {
		v.add("Deployment %s: no topologySpreadConstraints", d.Name)
	}
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		v.add("Deployment %s: automountServiceAccountToken must be false", d.Name)
	}
	env := configEnv(pod.Spec.Containers, configMaps, &v)
	checkGrace(pod.Spec, env, &v)
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	all := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		checkContainer(c, psc, env, &v)
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
	checkMain(main, &v)
	apiService := checkServices(services, podLabels, &v)
	checkRoutes(routes, ingresses, apiService, &v)
	checkScaling(d, hpas, pdbs, podLabels, &v)
	checkNetworkPolicies(netpols, podLabels, &v)
	return v
}

type violations []string

func (v *violations) add(format string, args ...any) {
	*v = append(*v, fmt.Sprintf(format, args...))
}

// configEnv merges the ConfigMaps the containers take their environment from.
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
			}
		}
	}
	return env
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

func checkContainer(c corev1.Container, psc *corev1.PodSecurityContext, env map[string]string, v *violations) {
	if err := checkImage(c.Image); err != nil {
		v.add("container %s: image %q: %v", c.Name, c.Image, err)
	}
	for _, arg := range append(append([]string{}, c.Command...), c.Args...) {
		if arg == "-dev" || arg == "--dev" || strings.HasPrefix(arg, "-dev=") || strings.HasPrefix(arg, "--dev=") {
			v.add("container %s: -dev is for development only", c.Name)
		}
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okReq := c.Resources.Requests[r]
		lim, okLim := c.Resources.Limits[r]
		if !okReq || !okLim {
			v.add("container %s: %s request and limit are both required", c.Name, r)
			continue
		}
		if req.Cmp(lim) > 0 {
			v.add("container %s: %s request %s above limit %s", c.Name, r, req.String(), lim.String())
		}
	}
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	nonRoot := sc.RunAsNonRoot
	if nonRoot == nil {
		nonRoot = psc.RunAsNonRoot
	}
	if nonRoot == nil || !*nonRoot {
		v.add("container %s: runAsNonRoot must be true", c.Name)
	}
	uid := sc.RunAsUser
	if uid == nil {
		uid = psc.RunAsUser
	}
	if uid != nil && *uid == 0 {
		v.add("container %s: runAsUser 0", c.Name)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		v.add("container %s: readOnlyRootFilesystem must be true", c.Name)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		v.add("container %s: allowPrivilegeEscalation must be false", c.Name)
	}
	if sc.Privileged != nil && *sc.Privileged {
		v.add("container %s: privileged", c.Name)
	}
	dropsAll := false
	if sc.Capabilities != nil {
		for _, cp := range sc.Capabilities.Drop {
			dropsAll = dropsAll || cp == "ALL"
		}
		if len(sc.Capabilities.Add) > 0 {
			v.add("container %s: adds capabilities %v", c.Name, sc.Capabilities.Add)
		}
	}
	if !dropsAll {
		v.add("container %s: capabilities must drop ALL", c.Name)
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil {
		seccomp = psc.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		v.add("container %s: seccompProfile must be RuntimeDefault", c.Name)
	}
}

// checkImage refuses an image without a tag or digest and the latest tag.
func checkImage(image string) error {
	if image == "" {
		return fmt.Errorf("empty")
	}
	if strings.Contains(image, "@sha256:") {
		return nil
	}
	name := image[strings.LastIndex(image, "/")+1:]
	i := strings.LastIndex(name, ":")
	if i < 0 {
		return fmt.Errorf("no tag or digest")
	}
	if tag := name[i+1:]; tag == "" || tag == "latest" {
		return fmt.Errorf("tag %q is not a pinned version", tag)
	}
	return nil
}

// checkMain checks the service container: named ports, probes on the admin
// port, the Go runtime sized from the limits.
func checkMain(c *corev1.Container, v *violations) {
	ports := map[string]int32{}
	for _, p := range c.Ports {
		if p.Name == "" {
			v.add("container %s: port %d has no name", c.Name, p.ContainerPort)
		}
		ports[p.Name] = p.ContainerPort
	}
	if ports[APIPortName] != APIPort {
		v.add("container %s: want port %s = %d", c.Name, APIPortName, APIPort)
	}
	if ports[AdminPortName] != AdminPort {
		v.add("container %s: want port %s = %d", c.Name, AdminPortName, AdminPort)
	}
	checkProbe(c.Name, "readinessProbe", c.ReadinessProbe, "/readyz", v)
	checkProbe(c.Name, "livenessProbe", c.LivenessProbe, "/healthz", v)
	want := map[string]string{"GOMAXPROCS": "limits.cpu", "GOMEMLIMIT": "limits.memory"}
	for _, e := range c.Env {
		res, ok := want[e.Name]
		if !ok {
			continue
		}
		delete(want, e.Name)
		if e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil || e.ValueFrom.ResourceFieldRef.Resource != res {
			v.add("container %s: %s must come from %s (resourceFieldRef)", c.Name, e.Name, res)
			continue
		}
		// GOMEMLIMIT reads a bare number as bytes: any other divisor would shrink it.
		if div := e.ValueFrom.ResourceFieldRef.Divisor; res == "limits.memory" && !div.IsZero() && div.Cmp(resource.MustParse("1")) != 0 {
			v.add("container %s: GOMEMLIMIT divisor must be 1 (bytes), got %s", c.Name, div.String())
		}
	}
	for name, res := range want {
		v.add("container %s: %s must come from %s (resourceFieldRef)", c.Name, name, res)
	}
	for _, e := range c.Env {
		if e.Name == "PLANTSTORE_DEV" {
			v.add("container %s: PLANTSTORE_DEV set", c.Name)
		}
	}
}

func checkProbe(container, which string, p *corev1.Probe, path string, v *violations) {
	if p == nil || p.HTTPGet == nil {
		v.add("container %s: %s must be an httpGet on %s", container, which, path)
		return
	}
	if p.HTTPGet.Path != path {
		v.add("container %s: %s path %q, want %q", container, which, p.HTTPGet.Path, path)
	}
	if !isPort(p.HTTPGet.Port, AdminPortName, AdminPort) {
		v.add("container %s: %s port %s, want the admin port", container, which, p.HTTPGet.Port.String())
	}
}

func isPort(p intstr.IntOrString, name string, number int32) bool {
	if p.Type == intstr.String {
		return p.StrVal == name
	}
	return p.IntVal == number
}

// checkServices requires one Service for the API port only and one for the
// admin port only (for Prometheus), and returns the API Service.
func checkServices(services []*corev1.Service, podLabels labels.Set, v *violations) *corev1.Service {
	var api, metrics []*corev1.Service
	for _, s := range services {
		if len(s.Spec.Selector) == 0 || !labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels) {
			continue
		}
		if s.Spec.Type != "" && s.Spec.Type != corev1.ServiceTypeClusterIP {
			v.add("Service %s: type %s, want ClusterIP", s.Name, s.Spec.Type)
		}
		var toAPI, toAdmin, other bool
		for _, p := range s.Spec.Ports {
			if p.Name == "" {
				v.add("Service %s: port %d has no name", s.Name, p.Port)
			}
			switch {
			case isPort(p.TargetPort, APIPortName, APIPort):
				toAPI = true
			case isPort(p.TargetPort, AdminPortName, AdminPort):
				toAdmin = true
			default:
				other = true
			}
		}
		switch {
		case toAPI && (toAdmin || other):
			v.add("Service %s: exposes more than the API port", s.Name)
		case toAPI:
			api = append(api, s)
		case toAdmin && !other:
			metrics = append(metrics, s)
		default:
			v.add("Service %s: targets neither the API nor the admin port alone", s.Name)
		}
	}
	if len(metrics) != 1 {
		v.add("want one Service for the admin port (metrics), got %d", len(metrics))
	}
	if len(api) != 1 {
		v.add("want one Service for the API port, got %d", len(api))
		return nil
	}
	return api[0]
}

// checkRoutes requires the gateway route (HTTPRoute or Ingress) to send
// /plants to the API Service.
func checkRoutes(routes []*gatewayv1.HTTPRoute, ingresses []*networkingv1.Ingress, api *corev1.Service, v *violations) {
	if len(routes)+len(ingresses) == 0 {
		v.add("no HTTPRoute or Ingress")
		return
	}
	if api == nil {
		return
	}
	port := api.Spec.Ports[0]
	for _, r := range routes {
		found := false
		for _, rule := range r.Spec.Rules {
			for _, b := range rule.BackendRefs {
				if string(b.Name) == api.Name && b.Port != nil && int32(*b.Port) == port.Port {
					found = true
				}
			}
		}
		if !found {
			v.add("HTTPRoute %s: no backendRef to Service %s port %d", r.Name, api.Name, port.Port)
		}
		if len(r.Spec.ParentRefs) == 0 {
			v.add("HTTPRoute %s: no parentRefs", r.Name)
		}
	}
	for _, in := range ingresses {
		found := false
		for _, rule := range in.Spec.Rules {
			if rule.HTTP == nil {
				continue
			}
			for _, p := range rule.HTTP.Paths {
				s := p.Backend.Service
				if s != nil && s.Name == api.Name && (s.Port.Name == port.Name && port.Name != "" || s.Port.Number == port.Port) {
					found = true
				}
			}
		}
		if !found {
			v.add("Ingress %s: no path to Service %s port %s", in.Name, api.Name, port.Name)
		}
	}
}

func checkScaling(d *appsv1.Deployment, hpas []*autoscalingv2.HorizontalPodAutoscaler, pdbs []*policyv1.PodDisruptionBudget, podLabels labels.Set, v *violations) {
	found := false
	for _, h := range hpas {
		if h.Spec.ScaleTargetRef.Kind != "Deployment" || h.Spec.ScaleTargetRef.Name != d.Name {
			continue
		}
		found = true
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 {
			v.add("HorizontalPodAutoscaler %s: minReplicas must be at least 2", h.Name)
		}
		if h.Spec.MaxReplicas < 2 || (h.Spec.MinReplicas != nil && h.Spec.MaxReplicas < *h.Spec.MinReplicas) {
			v.add("HorizontalPodAutoscaler %s: maxReplicas %d below minReplicas", h.Name, h.Spec.MaxReplicas)
		}
	}
	if !found {
		v.add("no HorizontalPodAutoscaler for Deployment %s", d.Name)
	}
	found = false
	for _, p := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(podLabels) {
			found = true
		}
	}
	if !found {
		v.add("no PodDisruptionBudget selects the pods")
	}
}

// checkNetworkPolicies requires ingress to the pods to be limited to the API
// port from the gateway namespace and the admin port from the monitoring
// namespace, and nothing else.
func checkNetworkPolicies(nps []*networkingv1.NetworkPolicy, podLabels labels.Set, v *violations) {
	var gateway, monitoring, selected bool
	for _, np := range nps {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !sel.Matches(podLabels) {
			continue
		}
		selected = true
		hasIngress := false
		for _, t := range np.Spec.PolicyTypes {
			hasIngress = hasIngress || t == networkingv1.PolicyTypeIngress
		}
		if !hasIngress {
			v.add("NetworkPolicy %s: policyTypes lacks Ingress", np.Name)
		}
		for i, rule := range np.Spec.Ingress {
			if len(rule.From) == 0 || len(rule.Ports) == 0 {
				v.add("NetworkPolicy %s: ingress rule %d allows every source or every port", np.Name, i)
				continue
			}
			for _, from := range rule.From {
				ns := namespaceOf(from)
				for _, p := range rule.Ports {
					switch {
					case p.Port != nil && isPort(*p.Port, APIPortName, APIPort) && ns == GatewayNamespace:
						gateway = true
					case p.Port != nil && isPort(*p.Port, AdminPortName, AdminPort) && ns == MonitorNamespace:
						monitoring = true
					default:
						v.add("NetworkPolicy %s: ingress rule %d allows port %v from %q", np.Name, i, p.Port, ns)
					}
				}
			}
		}
	}
	if !selected {
		v.add("no NetworkPolicy selects the pods")
	}
	if !gateway {
		v.add("NetworkPolicy: the API port is not open to namespace %s", GatewayNamespace)
	}
	if !monitoring {
		v.add("NetworkPolicy: the admin port is not open to namespace %s", MonitorNamespace)
	}
}

// namespaceOf returns the namespace a peer names by its
// kubernetes.io/metadata.name label, or "" for any other peer.
func namespaceOf(p networkingv1.NetworkPolicyPeer) string {
	if p.NamespaceSelector == nil || p.IPBlock != nil || len(p.NamespaceSelector.MatchExpressions) > 0 || len(p.NamespaceSelector.MatchLabels) != 1 {
		return ""
	}
	return p.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
}
