package check

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Severities are the values an alert's severity label may take.
var Severities = []string{"critical", "warning"}

// EnvLabel is the label of the pods, and of every series scraped from
// them, that names the environment; alerts read PagingEnv only.
const (
	EnvLabel  = "env"
	PagingEnv = "production"
)

// ProbeJob is the job label of the Probe of the public URL, which the
// rules read.
const ProbeJob = "plantstore-probe"

// ProbePath is the path the Probe asks for: the protected resource
// metadata, public and answered by the service itself.
const ProbePath = "/.well-known/oauth-protected-resource"

// APIProbeJob is the job label of the Probe that makes a real call, with a
// token the blackbox exporter gets from the identity provider; APIProbePath
// is what it asks for: the smallest list.
const (
	APIProbeJob  = "plantstore-api-probe"
	APIProbePath = "/plants?limit=1"
)

// AlertLabels are the labels every alert carries besides its severity, for
// Alertmanager's routes.
var AlertLabels = []string{"team", "service"}

// checkMonitoring checks the Prometheus Operator objects: one way to
// scrape (a ServiceMonitor or a PodMonitor), that reaches the admin port,
// gives job="plantstore", copies the pods' env label and keeps the classic
// histogram buckets the SLO rules read; alerts that say how bad they are
// and where the runbook is, and page for production only; and a probe of
// the public URL wherever the alerts are.
func checkMonitoring(m *manifests, podLabels labels.Set, env map[string]string, v *violations) {
	if podLabels[EnvLabel] == "" {
		v.add("the pods have no %s label: set it in the overlay (labels with includeTemplates), so that the series say which environment they come from and only %s=%q pages", EnvLabel, EnvLabel, PagingEnv)
	}
	if len(m.serviceMonitors) > 0 && len(m.podMonitors) > 0 {
		v.add("both a ServiceMonitor and a PodMonitor: every pod would be scraped twice")
	}
	for _, sm := range m.serviceMonitors {
		checkServiceMonitor(sm, m.services, podLabels, v)
		checkEnvCopied("ServiceMonitor "+sm.Name, sm.Spec.PodTargetLabels, v)
	}
	for _, pm := range m.podMonitors {
		checkPodMonitor(pm, podLabels, v)
		checkEnvCopied("PodMonitor "+pm.Name, pm.Spec.PodTargetLabels, v)
	}
	for _, r := range m.rules {
		checkRules(r, v)
	}
	jobs := map[string]bool{}
	for _, p := range m.probes {
		checkProbeObject(p, podLabels, env, v)
		jobs[p.Spec.JobName] = true
	}
	if len(m.rules) > 0 && !jobs[ProbeJob] {
		v.add("the alerts are deployed without a Probe of the public URL: nothing outside the pods would see callers fail, and PlantstoreProbeAbsent would fire")
	}
	if len(m.rules) > 0 && !jobs[APIProbeJob] {
		v.add("the alerts are deployed without a Probe that calls GET %s with a token (job %s): a gateway or identity provider that refuses every token would page nobody, and PlantstoreProbeAbsent would fire", APIProbePath, APIProbeJob)
	}
}

// checkEnvCopied requires a monitor to copy the pods' env label onto the
// series, which the alerts select.
func checkEnvCopied(owner string, podTargetLabels []string, v *violations) {
	if !slices.Contains(podTargetLabels, EnvLabel) {
		v.add("%s: podTargetLabels must hold %s: the alerts page for %s=%q only", owner, EnvLabel, EnvLabel, PagingEnv)
	}
}

// checkProbeObject requires a Probe to ask, through the public URL, for
// what its job says, under the pods' env: the metadata document (job
// plantstore-probe) or GET /plants?limit=1 (job plantstore-api-probe, with
// a token: its module holds the client credentials).
func checkProbeObject(p *monitoringv1.Probe, podLabels labels.Set, env map[string]string, v *violations) {
	var path string
	switch p.Spec.JobName {
	case ProbeJob:
		path = ProbePath
	case APIProbeJob:
		path = APIProbePath
	default:
		v.add("Probe %s: jobName %q, want %q or %q (the rules read them)", p.Name, p.Spec.JobName, ProbeJob, APIProbeJob)
		return
	}
	sc := p.Spec.Targets.StaticConfig
	if sc == nil || len(sc.Targets) == 0 {
		v.add("Probe %s: no static target", p.Name)
		return
	}
	public, err := url.Parse(env["PLANTSTORE_PUBLIC_URL"])
	for _, t := range sc.Targets {
		u, perr := url.Parse(string(t))
		switch {
		case perr != nil || err != nil || public.Host == "":
			v.add("Probe %s: target %q against PLANTSTORE_PUBLIC_URL %q: cannot compare", p.Name, t, env["PLANTSTORE_PUBLIC_URL"])
		case u.Scheme != public.Scheme || u.Host != public.Host || u.RequestURI() != strings.TrimSuffix(public.Path, "/")+path:
			v.add("Probe %s: target %s, want the public URL's %s%s (PLANTSTORE_PUBLIC_URL)", p.Name, t, strings.TrimSuffix(public.String(), "/"), path)
		}
	}
	if got, want := sc.Labels[EnvLabel], podLabels[EnvLabel]; got != want {
		v.add("Probe %s: label %s=%q, want the pods' %q", p.Name, EnvLabel, got, want)
	}
}

func checkServiceMonitor(sm *monitoringv1.ServiceMonitor, services []*corev1.Service, podLabels labels.Set, v *violations) {
	if ns := sm.Spec.NamespaceSelector; ns.Any || len(ns.MatchNames) > 0 && !slices.Contains(ns.MatchNames, sm.Namespace) {
		v.add("ServiceMonitor %s: namespaceSelector reaches beyond its own namespace", sm.Name)
	}
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil || sel.Empty() {
		v.add("ServiceMonitor %s: empty selector", sm.Name)
		return
	}
	var svc *corev1.Service
	for _, s := range services {
		if sel.Matches(labels.Set(s.Labels)) {
			if svc != nil {
				v.add("ServiceMonitor %s: selects Services %s and %s", sm.Name, svc.Name, s.Name)
			}
			svc = s
		}
	}
	if svc == nil {
		v.add("ServiceMonitor %s: selects no Service", sm.Name)
		return
	}
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
		v.add("ServiceMonitor %s: Service %s does not select the pods", sm.Name, svc.Name)
	}
	if len(sm.Spec.Endpoints) == 0 {
		v.add("ServiceMonitor %s: no endpoints", sm.Name)
	}
	for _, ep := range sm.Spec.Endpoints {
		var port *corev1.ServicePort
		for i, p := range svc.Spec.Ports {
			if p.Name == ep.Port {
				port = &svc.Spec.Ports[i]
			}
		}
		if port == nil || !isPort(port.TargetPort, AdminPortName, AdminPort) {
			v.add("ServiceMonitor %s: endpoint port %q is not Service %s's port to the admin port", sm.Name, ep.Port, svc.Name)
		}
		if ep.Path != "" && ep.Path != "/metrics" {
			v.add("ServiceMonitor %s: endpoint path %q, want /metrics", sm.Name, ep.Path)
		}
	}
	checkJob("ServiceMonitor "+sm.Name, sm.Spec.JobLabel, svc.Labels, v)
	checkClassicHistograms("ServiceMonitor "+sm.Name, sm.Spec.ScrapeClassicHistograms, v)
}

func checkPodMonitor(pm *monitoringv1.PodMonitor, podLabels labels.Set, v *violations) {
	if ns := pm.Spec.NamespaceSelector; ns.Any || len(ns.MatchNames) > 0 && !slices.Contains(ns.MatchNames, pm.Namespace) {
		v.add("PodMonitor %s: namespaceSelector reaches beyond its own namespace", pm.Name)
	}
	sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(podLabels) {
		v.add("PodMonitor %s: selector does not select the pods", pm.Name)
	}
	if len(pm.Spec.PodMetricsEndpoints) == 0 {
		v.add("PodMonitor %s: no podMetricsEndpoints", pm.Name)
	}
	for _, ep := range pm.Spec.PodMetricsEndpoints {
		if ep.Port == nil || *ep.Port != AdminPortName {
			v.add("PodMonitor %s: endpoint port must be %q", pm.Name, AdminPortName)
		}
		if ep.Path != "" && ep.Path != "/metrics" {
			v.add("PodMonitor %s: endpoint path %q, want /metrics", pm.Name, ep.Path)
		}
	}
	checkJob("PodMonitor "+pm.Name, pm.Spec.JobLabel, podLabels, v)
	checkClassicHistograms("PodMonitor "+pm.Name, pm.Spec.ScrapeClassicHistograms, v)
}

// checkJob requires the target's jobLabel to give job="plantstore", which
// the rules and the dashboard select.
func checkJob(owner, jobLabel string, targetLabels map[string]string, v *violations) {
	if jobLabel == "" || targetLabels[jobLabel] != Job {
		v.add("%s: jobLabel %q gives job=%q, want %q (the rules and dashboard select it)", owner, jobLabel, targetLabels[jobLabel], Job)
	}
}

func checkClassicHistograms(owner string, keep *bool, v *violations) {
	if keep == nil || !*keep {
		v.add("%s: scrapeClassicHistograms must be true: the SLO rules read the classic le buckets", owner)
	}
}

// slowGroupInterval bounds the interval of a group whose rules read a
// range of a day or more: at least 2 minutes, since such windows move
// slowly and read much more data, and under Prometheus' 5-minute lookback,
// so that their results never go stale between evaluations.
const (
	minSlowInterval = 2 * time.Minute
	maxSlowInterval = 5 * time.Minute
)

// selectorRe finds the series an expression reads: a name of the
// service's metrics, a recording rule, up, probe_success or a Go runtime
// metric, with its matchers if it has any.
var selectorRe = regexp.MustCompile(`\b(plantstore[_:][a-zA-Z0-9_:]*|up|probe_success|go_[a-z0-9_]+)\b(\{[^}]*\})?`)

// ClusterLabel is the label that tells clusters apart in a Prometheus
// that holds several (Thanos, Mimir): every aggregation keeps it.
const ClusterLabel = "cluster"

// groupingRe finds the label lists of "by (...)" and "on (...)".
var groupingRe = regexp.MustCompile(`\b(by|on)\s*\(([^)]*)\)`)

// dayRangeRe finds ranges of a day or more.
var dayRangeRe = regexp.MustCompile(`\[\d+[dwy]\]`)

// RunbookURLRe is what a rendered runbook_url must look like: a base that
// the overlay chooses, then the runbook's path in the repository.
var RunbookURLRe = regexp.MustCompile(`^https://\S+/(docs/runbooks/[a-z0-9-]+\.md)(#[a-z0-9-]+)?$`)

// checkRules requires every alert to carry a known severity, the team and
// service labels, a summary, a description and a runbook_url, a "for", to
// read only series of env="production", and to speak of pods, not
// instances (but for the probes, whose instance is the URL probed); every
// rule to keep the cluster label through its aggregations; and rules over
// a day or more in a group evaluated every few minutes.
func checkRules(r *monitoringv1.PrometheusRule, v *violations) {
	for _, g := range r.Spec.Groups {
		interval := time.Duration(0)
		if g.Interval != nil {
			d, err := time.ParseDuration(string(*g.Interval))
			if err != nil {
				v.add("PrometheusRule %s: group %s: interval %q: %v", r.Name, g.Name, *g.Interval, err)
			}
			interval = d
		}
		for _, rule := range g.Rules {
			expr := rule.Expr.String()
			name := rule.Alert + rule.Record
			if dayRangeRe.MatchString(expr) && (interval < minSlowInterval || interval >= maxSlowInterval) {
				v.add("PrometheusRule %s: rule %s reads a range of a day or more in group %s, evaluated every %v: put it in a group of its own, every %v to %v", r.Name, name, g.Name, interval, minSlowInterval, maxSlowInterval)
			}
			for _, g := range groupingRe.FindAllStringSubmatch(expr, -1) {
				if !slices.Contains(strings.Fields(strings.ReplaceAll(g[2], ",", " ")), ClusterLabel) {
					v.add("PrometheusRule %s: rule %s aggregates %s (%s) without %s: a Thanos or Mimir ruler over several clusters would merge them", r.Name, name, g[1], g[2], ClusterLabel)
				}
			}
			if rule.Alert == "" {
				continue
			}
			for _, l := range AlertLabels {
				if rule.Labels[l] == "" {
					v.add("PrometheusRule %s: alert %s has no %s label: Alertmanager cannot route it", r.Name, rule.Alert, l)
				}
			}
			if !slices.Contains(Severities, rule.Labels["severity"]) {
				v.add("PrometheusRule %s: alert %s: severity %q, want one of %v", r.Name, rule.Alert, rule.Labels["severity"], Severities)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if rule.Annotations[a] == "" {
					v.add("PrometheusRule %s: alert %s has no %s", r.Name, rule.Alert, a)
				}
			}
			if u := rule.Annotations["runbook_url"]; u != "" && !RunbookURLRe.MatchString(u) {
				v.add("PrometheusRule %s: alert %s: runbook_url %q is not <base>/docs/runbooks/<page>.md: is the overlay's plantstore-runbooks base missing?", r.Name, rule.Alert, u)
			}
			if rule.For == nil || *rule.For == "" || *rule.For == "0s" {
				v.add("PrometheusRule %s: alert %s has no for: one bad evaluation would page", r.Name, rule.Alert)
			}
			for _, sel := range selectorRe.FindAllStringSubmatch(expr, -1) {
				if !strings.Contains(sel[2], fmt.Sprintf(`%s=%q`, EnvLabel, PagingEnv)) {
					v.add("PrometheusRule %s: alert %s reads %s without %s=%q: another environment's series would page", r.Name, rule.Alert, sel[0], EnvLabel, PagingEnv)
				}
			}
			if !strings.Contains(expr, "probe_success") {
				text := expr + rule.Annotations["summary"] + rule.Annotations["description"]
				if strings.Contains(text, "instance") {
					v.add("PrometheusRule %s: alert %s speaks of instance: name the pod, as the runbooks and kubectl do", r.Name, rule.Alert)
				}
			}
		}
	}
}
