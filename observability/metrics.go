package observability

import (
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// methodLabel maps a request method to the closed set of method label
// values: the standard methods, and OTHER for anything else, so a client
// cannot mint label values.
func methodLabel(m string) string {
	// Constants are returned, not m, so the cache keeps no request memory.
	switch m {
	case http.MethodGet:
		return http.MethodGet
	case http.MethodHead:
		return http.MethodHead
	case http.MethodPost:
		return http.MethodPost
	case http.MethodPut:
		return http.MethodPut
	case http.MethodPatch:
		return http.MethodPatch
	case http.MethodDelete:
		return http.MethodDelete
	case http.MethodOptions:
		return http.MethodOptions
	case http.MethodConnect:
		return http.MethodConnect
	case http.MethodTrace:
		return http.MethodTrace
	}
	return "OTHER"
}

// seriesKey identifies one (method, route, code) combination.
type seriesKey struct {
	method string
	route  string
	code   int
}

// series holds the observers of one combination, resolved once.
type series struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// HTTPMetrics are the RED metrics of the API, recorded by [Middleware].
// Resolving a labelled child with WithLabelValues hashes and allocates, so
// resolved children are kept in a copy-on-write map: the hot path is an
// atomic load and a map lookup. Its size is bounded by routes × methods ×
// codes.
type HTTPMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge

	mu    sync.Mutex // serializes additions to cache
	cache atomic.Pointer[map[seriesKey]series]
}

// NewHTTPMetrics registers plantstore_http_requests_total,
// plantstore_http_request_duration_seconds and
// plantstore_http_requests_in_flight on reg and returns them. Registering
// twice on one registry panics.
func NewHTTPMetrics(reg prometheus.Registerer) *HTTPMetrics {
	labels := []string{"method", "route", "code"}
	m := &HTTPMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "plantstore_http_requests_total",
			Help: "HTTP requests served by the API, by method, route template and status code.",
		}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "plantstore_http_request_duration_seconds",
			Help: "Time from the first middleware to the last, by method, route template and status code.",
			// From 100µs to 10s. The API answers from memory in well under
			// a millisecond, so the low buckets resolve the median; a
			// database round trip or a long streamed list lands in the
			// milliseconds to seconds; 10s is the longest a request should
			// ever take. Native buckets (factor 1.1, about 5% error) give
			// fine quantiles to scrapers that accept them.
			Buckets:                         []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  160,
			NativeHistogramMinResetDuration: time.Hour,
		}, labels),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "plantstore_http_requests_in_flight",
			Help: "HTTP requests the API is serving now.",
		}),
	}
	reg.MustRegister(m.requests, m.duration, m.inFlight)
	empty := map[seriesKey]series{}
	m.cache.Store(&empty)
	return m
}

// series returns the observers for one combination, resolving them on
// first use.
func (m *HTTPMetrics) series(method, route string, code int) series {
	k := seriesKey{route: route, method: method, code: code}
	if s, ok := (*m.cache.Load())[k]; ok {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.cache.Load()
	if s, ok := old[k]; ok {
		return s
	}
	c := strconv.Itoa(code)
	s := series{
		requests: m.requests.WithLabelValues(method, route, c),
		duration: m.duration.WithLabelValues(method, route, c),
	}
	next := make(map[seriesKey]series, len(old)+1)
	maps.Copy(next, old)
	next[k] = s
	m.cache.Store(&next)
	return s
}
