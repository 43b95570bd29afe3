package plants

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the plants package's Prometheus metrics. A nil *Metrics
// records nothing. The methods are safe for concurrent use.
type Metrics struct {
	duration *prometheus.HistogramVec
	catalog  prometheus.Gauge
	// reloaded and refused count the catalog reloads by result;
	// reloadTime times them.
	reloaded, refused prometheus.Counter
	reloadTime        prometheus.Histogram
	// observers holds duration's six series, resolved once (a label
	// lookup hashes the values on every call), by observerIndex.
	observers [6]prometheus.Observer
}

// Values of the store and result labels of
// plantstore_store_request_duration_seconds.
const (
	StoreMemory   = "memory"
	StorePostgres = "postgres"
	// StoreSnapshot is the in-memory snapshot of a PostgreSQL catalog.
	StoreSnapshot = "snapshot"
	ResultOK      = "ok"
	ResultError   = "error"
)

// Values of the result label of plantstore_catalog_reloads_total.
const (
	ReloadSuccess = "success"
	ReloadFailure = "failure"
)

// NewMetrics registers the store metrics on reg and returns them:
// plantstore_store_request_duration_seconds{store,result} (histogram),
// plantstore_catalog_plants (gauge),
// plantstore_catalog_reloads_total{result="success|failure"} and
// plantstore_catalog_reload_duration_seconds (histogram). Every store and
// result series starts at zero. Registering twice on one registry panics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "plantstore_store_request_duration_seconds",
			Help:    "Time from the start to the end of one store listing, including the time the response writer takes to consume it, by store and result.",
			Buckets: prometheus.DefBuckets,
		}, []string{"store", "result"}),
		catalog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "plantstore_catalog_plants",
			Help: "Plants in the catalog the service serves.",
		}),
	}
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "plantstore_catalog_reloads_total",
		Help: "Catalog reloads while serving, by result: the -data file (SIGHUP), or the database into the snapshot (its first load included).",
	}, []string{"result"})
	m.reloaded, m.refused = reloads.WithLabelValues(ReloadSuccess), reloads.WithLabelValues(ReloadFailure)
	m.reloadTime = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "plantstore_catalog_reload_duration_seconds",
		Help:    "Time to read and index a catalog on a reload, failed reloads included.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	})
	reg.MustRegister(m.duration, m.catalog, reloads, m.reloadTime)
	for _, store := range []string{StoreMemory, StorePostgres, StoreSnapshot} {
		for _, result := range []string{ResultOK, ResultError} {
			i, _ := observerIndex(store, result)
			m.observers[i] = m.duration.WithLabelValues(store, result)
		}
	}
	return m
}

// ObserveStore records one store listing that took d. store is
// [StoreMemory], [StorePostgres] or [StoreSnapshot], result [ResultOK] or
// [ResultError].
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
	case StoreSnapshot:
		i = 4
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

// ObserveReload records one catalog reload that took d: ok when the new
// catalog serves, not when it was refused.
func (m *Metrics) ObserveReload(ok bool, d time.Duration) {
	if m == nil {
		return
	}
	if ok {
		m.reloaded.Inc()
	} else {
		m.refused.Inc()
	}
	m.reloadTime.Observe(d.Seconds())
}
