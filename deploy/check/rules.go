package check

import (
	"fmt"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"
)

// RulesFile returns the spec of a PrometheusRule as a Prometheus rules file
// (the groups: document promtool and rule_files read). When interval is
// not empty, every group is evaluated at that interval instead of its own.
func RulesFile(r *monitoringv1.PrometheusRule, interval string) ([]byte, error) {
	spec := r.Spec.DeepCopy()
	if interval != "" {
		d := monitoringv1.Duration(interval)
		for i := range spec.Groups {
			spec.Groups[i].Interval = &d
		}
	}
	b, err := yaml.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("PrometheusRule %s: %w", r.Name, err)
	}
	return b, nil
}

// PrometheusRule returns the one PrometheusRule in a YAML stream.
func PrometheusRule(stream []byte) (*monitoringv1.PrometheusRule, error) {
	objs, err := Decode(stream)
	if err != nil {
		return nil, err
	}
	var found *monitoringv1.PrometheusRule
	for _, o := range objs {
		if r, ok := o.(*monitoringv1.PrometheusRule); ok {
			if found != nil {
				return nil, fmt.Errorf("more than one PrometheusRule")
			}
			found = r
		}
	}
	if found == nil {
		return nil, fmt.Errorf("no PrometheusRule")
	}
	return found, nil
}
