package check

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// GOMEMLIMIT's share of the container's memory limit: at most 90 %, so the
// heap's goal leaves room for stacks, runtime structures and page cache
// before the OOM killer, and at least 50 %, so the limit is not paid for
// and left unused.
const (
	minMemLimitShare = 0.5
	maxMemLimitShare = 0.9
)

// checkPodSpec checks what every pod of the service needs, whatever runs
// in it: no API token, and no service links, which would put
// <SERVICE>_SERVICE_HOST and friends among the PLANTSTORE_* settings.
func checkPodSpec(owner string, spec corev1.PodSpec, services []*corev1.Service, v *violations) {
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		v.add("%s: automountServiceAccountToken must be false", owner)
	}
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		var names []string
		for _, s := range services {
			names = append(names, strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))+"_SERVICE_HOST")
		}
		sort.Strings(names)
		v.add("%s: enableServiceLinks must be false: Kubernetes would set %s and more, which land among the PLANTSTORE_* settings", owner, strings.Join(names, ", "))
	}
}

func checkContainer(c corev1.Container, psc *corev1.PodSecurityContext, v *violations) {
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
			continue
		}
		if r != corev1.ResourceMemory {
			continue
		}
		// What the container's memory grows to: GOMEMLIMIT for a Go
		// runtime that has one, else its limit. The node must reserve it.
		goal, what := lim.Value(), "its limit "+lim.String()
		if n, ok := goMemLimit(c); ok {
			goal, what = n, fmt.Sprintf("GOMEMLIMIT (%s)", resource.NewQuantity(n, resource.BinarySI).String())
		}
		if req.Value() < goal {
			v.add("container %s: memory request %s below %s: the node does not reserve what the pod may use, so memory pressure evicts it or the kernel kills it below its limit", c.Name, req.String(), what)
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
// port within their budgets, the Go runtime sized from the limits, and the
// trusted proxies.
func checkMain(c *corev1.Container, env map[string]string, v *violations) {
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
	// /livez, the Kubernetes name of the service's /healthz: one name in
	// every manifest, as the docs give it.
	checkProbe(c.Name, "livenessProbe", c.LivenessProbe, "/livez", v)
	if p := c.ReadinessProbe; p != nil {
		timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
		if timeout <= ReadyCheckBudget {
			v.add("container %s: readinessProbe timeoutSeconds %v is not above the %v /readyz allows its checks: a slow check would read as a failed probe", c.Name, timeout, ReadyCheckBudget)
		}
		period := time.Duration(p.PeriodSeconds) * time.Second
		if p.PeriodSeconds == 0 {
			period = 10 * time.Second // the API server's default
		}
		if period < timeout {
			v.add("container %s: readinessProbe periodSeconds %v below its timeout %v", c.Name, period, timeout)
		}
	}
	var gomaxprocs bool
	for _, e := range c.Env {
		switch e.Name {
		case "GOMAXPROCS":
			gomaxprocs = true
			if e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil || e.ValueFrom.ResourceFieldRef.Resource != "limits.cpu" {
				v.add("container %s: GOMAXPROCS must come from limits.cpu (resourceFieldRef)", c.Name)
			}
		case "GOMEMLIMIT":
			checkMemLimit(c, e, v)
		}
	}
	if !gomaxprocs {
		v.add("container %s: GOMAXPROCS must come from limits.cpu (resourceFieldRef)", c.Name)
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GOMEMLIMIT" }) {
		v.add("container %s: GOMEMLIMIT is not set: the heap would grow to the OOM killer", c.Name)
	}
	checkTrustedProxies(env["PLANTSTORE_TRUSTED_PROXIES"], v)
}

// goMemLimit returns the GOMEMLIMIT of c in bytes, as the kubelet and the
// Go runtime would compute it, when c sets one that can be read.
func goMemLimit(c corev1.Container) (int64, bool) {
	for _, e := range c.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		switch {
		case e.ValueFrom == nil:
			n, err := parseGoMemLimit(e.Value)
			return n, err == nil
		case e.ValueFrom.ResourceFieldRef != nil:
			ref := e.ValueFrom.ResourceFieldRef
			div := ref.Divisor
			if !div.IsZero() && div.Cmp(resource.MustParse("1")) != 0 {
				return 0, false
			}
			var q resource.Quantity
			var ok bool
			switch ref.Resource {
			case "limits.memory":
				q, ok = c.Resources.Limits[corev1.ResourceMemory]
			case "requests.memory":
				q, ok = c.Resources.Requests[corev1.ResourceMemory]
			}
			return q.Value(), ok
		}
	}
	return 0, false
}

// checkMemLimit requires GOMEMLIMIT from the container's memory request
// through the downward API, never a literal that drifts from the
// resources when they change, and to leave headroom under the memory
// limit: between 50 and 90 % of it.
func checkMemLimit(c *corev1.Container, e corev1.EnvVar, v *violations) {
	limit, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		return // checkContainer names the missing limit
	}
	switch {
	case e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil:
		ref := e.ValueFrom.ResourceFieldRef
		if ref.Resource != "limits.memory" && ref.Resource != "requests.memory" {
			v.add("container %s: GOMEMLIMIT from %s, want requests.memory", c.Name, ref.Resource)
			return
		}
		// GOMEMLIMIT reads a bare number as bytes: any divisor but 1 is a
		// unit error.
		if div := ref.Divisor; !div.IsZero() && div.Cmp(resource.MustParse("1")) != 0 {
			v.add("container %s: GOMEMLIMIT divisor must be 1 (bytes), got %s", c.Name, div.String())
			return
		}
	case e.ValueFrom == nil:
		if _, err := parseGoMemLimit(e.Value); err != nil {
			v.add("container %s: GOMEMLIMIT=%q: %v", c.Name, e.Value, err)
			return
		}
		v.add("container %s: GOMEMLIMIT=%s is written out: take it from requests.memory (resourceFieldRef, divisor 1), so that a change of the pod's memory moves it too", c.Name, e.Value)
	default:
		v.add("container %s: GOMEMLIMIT must come from requests.memory (resourceFieldRef)", c.Name)
		return
	}
	goal, ok := goMemLimit(*c)
	if !ok {
		return
	}
	share := float64(goal) / float64(limit.Value())
	switch {
	case share > maxMemLimitShare:
		v.add("container %s: GOMEMLIMIT is %.0f %% of the memory limit %s: leave at least %.0f %% for what the Go heap does not count", c.Name, share*100, limit.String(), (1-maxMemLimitShare)*100)
	case share < minMemLimitShare:
		v.add("container %s: GOMEMLIMIT is %.0f %% of the memory limit %s: under %.0f %% the collector works hard with memory to spare", c.Name, share*100, limit.String(), minMemLimitShare*100)
	}
}

// parseGoMemLimit parses a GOMEMLIMIT value as the Go runtime does: a
// number of bytes with an optional B, KiB, MiB, GiB or TiB suffix.
func parseGoMemLimit(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("want bytes with an optional B, KiB, MiB, GiB or TiB suffix")
	}
	return n * mult, nil
}

// checkTrustedProxies requires CIDRs that cover pod networks of both
// address families and never the whole Internet: the gateway's pods are
// in the pod network, and a dual-stack or IPv6 cluster gives them IPv6
// addresses.
func checkTrustedProxies(list string, v *violations) {
	if list == "" {
		v.add("PLANTSTORE_TRUSTED_PROXIES is empty: the access log's remote_ip would be the gateway's")
		return
	}
	var v4, v6 bool
	for _, s := range strings.Split(list, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			v.add("PLANTSTORE_TRUSTED_PROXIES: %q is not a CIDR", s)
			continue
		}
		if p.Bits() == 0 {
			v.add("PLANTSTORE_TRUSTED_PROXIES: %s trusts every address: any caller could choose its remote_ip", p)
		}
		v4 = v4 || p.Addr().Is4()
		v6 = v6 || p.Addr().Is6()
	}
	if !v4 {
		v.add("PLANTSTORE_TRUSTED_PROXIES %q covers no IPv4 range", list)
	}
	if !v6 {
		v.add("PLANTSTORE_TRUSTED_PROXIES %q covers no IPv6 range: gateway pods of a dual-stack or IPv6 cluster would not be trusted", list)
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

// checkTopology requires spread constraints that select the pods, one of
// them hard: with soft ones only, every replica may land on one node. A
// hard one must honor node taints: otherwise tainted and cordoned nodes
// count as empty domains that hold the skew down, so the HPA stops at the
// number of untainted nodes and a drain's replacement stays Pending.
func checkTopology(owner string, tsc []corev1.TopologySpreadConstraint, podLabels labels.Set, v *violations) {
	if len(tsc) == 0 {
		v.add("Deployment %s: no topologySpreadConstraints", owner)
		return
	}
	hard := false
	for _, c := range tsc {
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil || sel.Empty() || !sel.Matches(podLabels) {
			v.add("Deployment %s: topology spread on %s does not select the pods", owner, c.TopologyKey)
		}
		hard = hard || c.WhenUnsatisfiable == corev1.DoNotSchedule
		if c.WhenUnsatisfiable == corev1.DoNotSchedule && (c.NodeTaintsPolicy == nil || *c.NodeTaintsPolicy != corev1.NodeInclusionPolicyHonor) {
			v.add("Deployment %s: topology spread on %s is DoNotSchedule without nodeTaintsPolicy: Honor: tainted and cordoned nodes count as empty domains, capping the replicas at the untainted nodes and leaving a drain's replacement Pending", owner, c.TopologyKey)
		}
	}
	if !hard {
		v.add("Deployment %s: every topology spread is ScheduleAnyway: want one DoNotSchedule (by hostname or zone)", owner)
	}
}

// fileSettings are the settings that name files the service reads and
// rereads when they change.
var fileSettings = []string{"PLANTSTORE_JWT_KEY_FILE", "PLANTSTORE_JWT_HMAC_SECRET_FILE", "PLANTSTORE_JWT_ISSUERS_FILE", "PLANTSTORE_DATA", "PLANTSTORE_DPOP_NONCE_KEY_FILE"}

// checkMounts requires every file setting to point into a volume mounted
// whole: the kubelet updates a Secret or ConfigMap volume by swapping a
// symlink, which a subPath mount never sees, so a rotated key would stay
// unseen until the pod restarts.
func checkMounts(c *corev1.Container, spec corev1.PodSpec, env map[string]string, v *violations) {
	for _, name := range fileSettings {
		file := env[name]
		if file == "" {
			continue
		}
		var mount *corev1.VolumeMount
		for i, m := range c.VolumeMounts {
			if file == m.MountPath || strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/") {
				if mount == nil || len(m.MountPath) > len(mount.MountPath) {
					mount = &c.VolumeMounts[i]
				}
			}
		}
		switch {
		case mount == nil:
			v.add("%s=%s is under no volumeMount of container %s", name, file, c.Name)
		case mount.SubPath != "" || mount.SubPathExpr != "":
			v.add("%s=%s comes through the subPath mount %s, which never sees the volume's updates: mount the volume's directory", name, file, mount.MountPath)
		case path.Clean(file) == path.Clean(mount.MountPath):
			v.add("%s=%s is the mount point itself, want a file in it", name, file)
		}
	}
}
