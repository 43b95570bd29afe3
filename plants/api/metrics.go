package api

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the API's own Prometheus metrics. A nil *Metrics records
// nothing. The methods are safe for concurrent use.
type Metrics struct {
	returned prometheus.Histogram
}

// NewMetrics registers plantstore_plants_returned (a histogram of the
// plants per GET /plants response) on reg and returns it. Registering twice
// on one registry panics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		returned: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "plantstore_plants_returned",
			Help:    "Plants returned per successful GET /plants response.",
			Buckets: []float64{0, 1, 5, 10, 50, 100, 500, 1000, 5000, 10000, 100000, 1000000},
		}),
	}
	reg.MustRegister(m.returned)
	return m
}

// observeReturned records the number of plants one response carried.
func (m *Metrics) observeReturned(n int) {
	if m != nil {
		m.returned.Observe(float64(n))
	}
}
