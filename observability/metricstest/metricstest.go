// Package metricstest reads metrics back from a Prometheus registry, for
// tests: the sum of a metric's series that match some labels, or its
// values by one label.
package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Sum returns the sum over the series of the metric name whose labels
// include labels (nil matches every series) of their value: a counter's or
// a gauge's value, a histogram's sample count. It fails t when the metric
// has no such series.
func Sum(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	sum, found := 0.0, false
	for _, m := range series(t, g, name) {
		if matches(m, labels) {
			sum += value(m)
			found = true
		}
	}
	if !found {
		t.Fatalf("metric %s has no series with labels %v", name, labels)
	}
	return sum
}

// ByLabel returns the values of the metric name's series (as [Sum] reads
// them) summed by the value of their label.
func ByLabel(t testing.TB, g prometheus.Gatherer, name, label string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range series(t, g, name) {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label {
				out[lp.GetValue()] += value(m)
			}
		}
	}
	return out
}

func series(t testing.TB, g prometheus.Gatherer, name string) []*dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := labels[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return m.GetUntyped().GetValue()
}
