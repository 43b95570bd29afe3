package auth

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the auth package's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	failures  *prometheus.CounterVec
	refreshes *prometheus.CounterVec
	keys      prometheus.Gauge
}

// Results of a JWKS fetch, the values of the result label of
// plantstore_jwks_refreshes_total.
const (
	RefreshSuccess = "success"
	RefreshFailure = "failure"
)

// NewMetrics registers the auth metrics on reg and returns them. Every
// reason and result series starts at zero, so dashboards see them before the
// first event.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "plantstore_auth_failures_total",
			Help: "Requests refused by authentication or authorization, by reason.",
		}, []string{"reason"}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "plantstore_jwks_refreshes_total",
			Help: "JWKS fetches, by result.",
		}, []string{"result"}),
		keys: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "plantstore_jwks_keys",
			Help: "Verification keys currently usable, over all key sources.",
		}),
	}
	reg.MustRegister(m.failures, m.refreshes, m.keys)
	for _, r := range Reasons() {
		m.failures.WithLabelValues(string(r))
	}
	m.refreshes.WithLabelValues(RefreshSuccess)
	m.refreshes.WithLabelValues(RefreshFailure)
	return m
}

// Failure counts one refused request.
func (m *Metrics) Failure(r Reason) {
	if m != nil {
		m.failures.WithLabelValues(string(r)).Inc()
	}
}

// Refresh counts one JWKS fetch with the given result.
func (m *Metrics) Refresh(result string) {
	if m != nil {
		m.refreshes.WithLabelValues(result).Inc()
	}
}

// AddKeys moves the usable-keys gauge by delta (a source adds its new count
// and subtracts its old one when its set changes).
func (m *Metrics) AddKeys(delta int) {
	if m != nil {
		m.keys.Add(float64(delta))
	}
}
