package check

import (
	"slices"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Severities are the values an alert's severity label may take.
var Severities = []string{"critical", "warning"}

// checkMonitoring checks the Prometheus Operator objects: one way to
// scrape (a ServiceMonitor or a PodMonitor), that reaches the admin port,
// gives job="plantstore" and keeps the classic histogram buckets the SLO
// rules read; and alerts that say how bad they are and where the runbook is.
func checkMonitoring(m *manifests, podLabels labels.Set, v *violations) {
	if len(m.serviceMonitors) > 0 && len(m.podMonitors) > 0 {
		v.add("both a ServiceMonitor and a PodMonitor: every pod would be scraped twice")
	}
	for _, sm := range m.serviceMonitors {
		checkServiceMonitor(sm, m.services, podLabels, v)
	}
	for _, pm := range m.podMonitors {
		checkPodMonitor(pm, podLabels, v)
	}
	for _, r := range m.rules {
		checkRules(r, v)
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

// checkRules requires every alert to carry a known severity, a summary, a
// description and a runbook_url.
func checkRules(r *monitoringv1.PrometheusRule, v *violations) {
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "" {
				continue
			}
			if !slices.Contains(Severities, rule.Labels["severity"]) {
				v.add("PrometheusRule %s: alert %s: severity %q, want one of %v", r.Name, rule.Alert, rule.Labels["severity"], Severities)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if rule.Annotations[a] == "" {
					v.add("PrometheusRule %s: alert %s has no %s", r.Name, rule.Alert, a)
				}
			}
		}
	}
}
