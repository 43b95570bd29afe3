package plants

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the plants package's Prometheus metrics. A nil *Metrics
// records nothing. The methods are safe for concurrent use.
type Metrics struct {
	returned prometheus.Histogram
	duration *prometheus.HistogramVec
	catalog  prometheus.Gauge
	// observers holds duration's four series, resolved once (a label
	// lookup hashes the values on every call), by observerIndex.
	observers [4]prometheus.Observer
}

// Values of the store and result labels of
// plantstore_store_request_duration_seconds.
const (
	StoreMemory   = "memory"
	StorePostgres = "postgres"
	ResultOK      = "ok"
	ResultError   = "error"
)

// NewMetrics registers the plants metrics on reg and returns them:
// plantstore_plants_returned (histogram of plants per GET /plants
// response), plantstore_store_request_duration_seconds{store,result}
// (histogram) and plantstore_catalog_plants (gauge). Every store and result
// series starts at zero. Registering twice on one registry panics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		returned: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "plantstore_plants_returned",
			Help:    "Plants returned per successful GET /plants response.",
			Buckets: []float64{0, 1, 5, 10, 50, 100, 500, 1000, 5000, 10000, 100000, 1000000},
		}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "plantstore_store_request_duration_seconds",
			Help:    "Time from the start to the end of one store listing, including the time the response writer takes to consume it, by store and result.",
			Buckets: prometheus.DefBuckets,
		}, []string{"store", "result"}),
		catalog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "plantstore_catalog_plants",
			Help: "Plants in the catalog the in-memory store serves.",
		}),
	}
	reg.MustRegister(m.returned, m.duration, m.catalog)
	for _, store := range []string{StoreMemory, StorePostgres} {
		for _, result := range []string{ResultOK, ResultError} {
			i, _ := observerIndex(store, result)
			m.observers[i] = m.duration.WithLabelValues(store, result)
		}
	}
	return m
}

// ObserveStore records one store listing that took d. store is
// [StoreMemory] or [StorePostgres], result [ResultOK] or [ResultError].
func (m *Metrics) ObserveStore(store, result string, d time.Duration) {
	if m == nil {
		return
	}
	if i, ok := observerIndex(store, result); ok {
		m.observers[i].Observe(d.Seconds())
		return
	}
	m.duration.WithLabelValues(store, result).Observe(d.Seconds())
}

// observerIndex returns the index in Metrics.observers of a known store
// and result, and false for any other pair.
func observerIndex(store, result string) (int, bool) {
	i := 0
	switch store {
	case StoreMemory:
	case StorePostgres:
		i = 2
	default:
		return 0, false
	}
	switch result {
	case ResultOK:
	case ResultError:
		i++
	default:
		return 0, false
	}
	return i, true
}

// SetCatalogPlants sets the number of plants in the served catalog.
func (m *Metrics) SetCatalogPlants(n int) {
	if m != nil {
		m.catalog.Set(float64(n))
	}
}

// observeReturned records the number of plants one response carried.
func (m *Metrics) observeReturned(n int) {
	if m != nil {
		m.returned.Observe(float64(n))
	}
}
