package auth

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the auth package's Prometheus metrics, labelled by issuer: the
// configured issuer names, "default" for the unnamed issuer of the -jwt-*
// flags, and "unknown" for requests refused before an issuer was chosen, so
// that no label value ever comes from a request. A nil *Metrics records
// nothing. The methods are safe for concurrent use.
type Metrics struct {
	failures  *prometheus.CounterVec
	refreshes *prometheus.CounterVec
	reloads   *prometheus.CounterVec
	keys      *prometheus.GaugeVec
	// issuer is the label of what a key source records through this
	// value: see [Metrics.ForIssuer].
	issuer string
}

// Results of a JWKS fetch or a key file reload, the values of the result
// label of plantstore_jwks_refreshes_total and
// plantstore_key_file_reloads_total.
const (
	RefreshSuccess = "success"
	RefreshFailure = "failure"
)

// Values of the issuer label that are no issuer's name.
const (
	IssuerDefault = "default" // the unnamed issuer of the -jwt-* flags
	IssuerUnknown = "unknown" // refused before an issuer was chosen
)

// NewMetrics registers the auth metrics on reg and returns them, recording
// for the unnamed issuer: plantstore_auth_failures_total{issuer,reason},
// plantstore_jwks_refreshes_total{issuer,result},
// plantstore_key_file_reloads_total{issuer,result} and
// plantstore_jwks_keys{issuer}. The series of "default" and "unknown"
// start at zero, so dashboards see them before the first event.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "plantstore_auth_failures_total",
			Help: "Requests refused by authentication or authorization, by issuer and reason.",
		}, []string{"issuer", "reason"}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "plantstore_jwks_refreshes_total",
			Help: "JWKS fetches, by issuer and result.",
		}, []string{"issuer", "result"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "plantstore_key_file_reloads_total",
			Help: "Key file and HMAC secret reads that changed the keys (success) or were refused (failure), by issuer.",
		}, []string{"issuer", "result"}),
		keys: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "plantstore_jwks_keys",
			Help: "Verification keys currently usable, over all key sources of an issuer.",
		}, []string{"issuer"}),
		issuer: IssuerDefault,
	}
	reg.MustRegister(m.failures, m.refreshes, m.reloads, m.keys)
	m.start(IssuerUnknown)
	m.start(IssuerDefault)
	return m
}

// start makes the series of issuer label exist at zero.
func (m *Metrics) start(label string) {
	for _, r := range Reasons() {
		m.failures.WithLabelValues(label, string(r))
	}
	if label != IssuerUnknown {
		m.refreshes.WithLabelValues(label, RefreshSuccess)
		m.refreshes.WithLabelValues(label, RefreshFailure)
		m.reloads.WithLabelValues(label, RefreshSuccess)
		m.reloads.WithLabelValues(label, RefreshFailure)
		m.keys.WithLabelValues(label)
	}
}

// ForIssuer returns the metrics that the key sources of the issuer named
// name ("" for the unnamed one) record through, with its series started.
func (m *Metrics) ForIssuer(name string) *Metrics {
	if m == nil {
		return nil
	}
	c := *m
	c.issuer = issuerLabel(name, true)
	c.start(c.issuer)
	return &c
}

// Forget drops the series of the issuer named name, which is no longer
// configured, so that its keys stop counting.
func (m *Metrics) Forget(name string) {
	if m == nil {
		return
	}
	label := issuerLabel(name, true)
	m.keys.DeleteLabelValues(label)
	for _, r := range Reasons() {
		m.failures.DeleteLabelValues(label, string(r))
	}
	m.refreshes.DeleteLabelValues(label, RefreshSuccess)
	m.refreshes.DeleteLabelValues(label, RefreshFailure)
	m.reloads.DeleteLabelValues(label, RefreshSuccess)
	m.reloads.DeleteLabelValues(label, RefreshFailure)
}

// issuerLabel is the issuer label of the issuer named name, when a request
// was routed to one, and "unknown" when it was not.
func issuerLabel(name string, routed bool) string {
	switch {
	case !routed:
		return IssuerUnknown
	case name == "":
		return IssuerDefault
	}
	return name
}

// Failure counts one refused request.
func (m *Metrics) Failure(e *Error) {
	if m != nil {
		m.failures.WithLabelValues(issuerLabel(e.Issuer, e.routed), string(e.Reason)).Inc()
	}
}

// Refresh counts one JWKS fetch with the given result.
func (m *Metrics) Refresh(result string) {
	if m != nil {
		m.refreshes.WithLabelValues(m.issuer, result).Inc()
	}
}

// KeyFileReload counts one key file reload with the given result.
func (m *Metrics) KeyFileReload(result string) {
	if m != nil {
		m.reloads.WithLabelValues(m.issuer, result).Inc()
	}
}

// AddKeys moves the usable-keys gauge by delta (a source adds its new count
// and subtracts its old one when its set changes).
func (m *Metrics) AddKeys(delta int) {
	if m != nil {
		m.keys.WithLabelValues(m.issuer).Add(float64(delta))
	}
}
