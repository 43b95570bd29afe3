package auth

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the auth package's Prometheus metrics, labelled by issuer: the
// configured issuer names, "default" for the unnamed issuer of the -jwt-*
// flags, and "unknown" for requests refused before an issuer was chosen, so
// that no label value ever comes from a request. A metric with an issuer
// label has series only for the issuers configured now: a named issuer's
// from [Metrics.ForIssuer] until [Metrics.Forget], the unnamed issuer's
// from the first thing its key sources or its requests record, so that a
// service configured by an issuers file never shows a "default" issuer
// without keys. A nil *Metrics records nothing. The methods are safe for
// concurrent use.
type Metrics struct {
	failures  *prometheus.CounterVec
	audits    *prometheus.CounterVec
	callers   *prometheus.GaugeVec
	refreshes *prometheus.CounterVec
	reloads   *prometheus.CounterVec
	keys      *prometheus.GaugeVec
	// issuer is the label of what a key source records through this
	// value: see [Metrics.ForIssuer].
	issuer string
	// shared is what every copy ForIssuer makes shares.
	shared *sharedMetrics
}

// sharedMetrics is the state the copies of one Metrics share.
type sharedMetrics struct {
	// unnamed starts the series of the unnamed issuer, once.
	unnamed sync.Once
	// verifier is the Verifier whose caches the fill gauges read.
	verifier atomic.Pointer[Verifier]
	// callers are the distinct callers audited rules would refuse.
	callers auditCallers
}

// Values of the result label of plantstore_jwks_refreshes_total and
// plantstore_key_file_reloads_total.
const (
	resultSuccess = "success"
	resultFailure = "failure"
)

// result is the result label of ok.
func result(ok bool) string {
	if ok {
		return resultSuccess
	}
	return resultFailure
}

// Values of the issuer label that are no issuer's name.
const (
	UnnamedIssuerLabel = "default" // the unnamed issuer of the -jwt-* flags
	UnknownIssuerLabel = "unknown" // refused before an issuer was chosen
)

// NewMetrics registers the auth metrics on reg and returns them, recording
// for the unnamed issuer: plantstore_auth_failures_total{issuer,reason},
// plantstore_auth_audit_total{issuer,reason},
// plantstore_auth_audit_callers{issuer,reason},
// plantstore_jwks_refreshes_total{issuer,result},
// plantstore_key_file_reloads_total{issuer,result} and
// plantstore_jwks_keys{issuer}; and the fill of the caches of the Verifier
// that [Middleware] serves: plantstore_token_cache_bytes,
// plantstore_token_cache_limit_bytes, plantstore_dpop_replay_entries and
// plantstore_dpop_replay_entries_limit. The series of "unknown" start at
// zero, so dashboards see them before the first event; those of an issuer
// start at zero when it is configured (see [Metrics]).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "plantstore_auth_failures_total",
			Help: "Requests refused by authentication or authorization, by issuer and reason.",
		}, []string{"issuer", "reason"}),
		audits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "plantstore_auth_audit_total",
			Help: "Requests accepted that a rule the issuer audits would have refused, by issuer and the reason it would have refused them with.",
		}, []string{"issuer", "reason"}),
		callers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "plantstore_auth_audit_callers",
			Help: "Distinct callers (issuer and subject) whose requests a rule the issuer audits would have refused, on this replica in the current hour (counted up to 10000), by issuer and reason.",
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
		issuer: UnnamedIssuerLabel,
		shared: &sharedMetrics{},
	}
	reg.MustRegister(m.failures, m.audits, m.callers, m.refreshes, m.reloads, m.keys, fillCollector{m.shared})
	m.start(UnknownIssuerLabel)
	return m
}

// use starts the series of label when it is the unnamed issuer's and
// they have not started: its key sources and requests record through the
// Metrics NewMetrics returned, which no call configures.
func (m *Metrics) use(label string) {
	if label == UnnamedIssuerLabel {
		m.shared.unnamed.Do(func() { m.start(UnnamedIssuerLabel) })
	}
}

// start makes the series of issuer label exist at zero.
func (m *Metrics) start(label string) {
	for _, r := range Reasons() {
		m.failures.WithLabelValues(label, string(r))
	}
	if label != UnknownIssuerLabel {
		for _, r := range auditReasons() {
			m.audits.WithLabelValues(label, string(r))
			m.callers.WithLabelValues(label, string(r))
		}
		m.refreshes.WithLabelValues(label, resultSuccess)
		m.refreshes.WithLabelValues(label, resultFailure)
		m.reloads.WithLabelValues(label, resultSuccess)
		m.reloads.WithLabelValues(label, resultFailure)
		m.keys.WithLabelValues(label)
	}
}

// ForIssuer returns the metrics that the key sources of the issuer named
// name ("" for the unnamed one) record through (a [keys.Recorder]), with
// its series started.
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
	for _, r := range auditReasons() {
		m.audits.DeleteLabelValues(label, string(r))
		m.callers.DeleteLabelValues(label, string(r))
	}
	m.shared.callers.forget(label)
	m.refreshes.DeleteLabelValues(label, resultSuccess)
	m.refreshes.DeleteLabelValues(label, resultFailure)
	m.reloads.DeleteLabelValues(label, resultSuccess)
	m.reloads.DeleteLabelValues(label, resultFailure)
}

// issuerLabel is the issuer label of the issuer named name, when a request
// was routed to one, and "unknown" when it was not.
func issuerLabel(name string, routed bool) string {
	switch {
	case !routed:
		return UnknownIssuerLabel
	case name == "":
		return UnnamedIssuerLabel
	}
	return name
}

// Failure counts one refused request.
func (m *Metrics) Failure(e *Error) {
	if m != nil {
		label := issuerLabel(e.Issuer, e.routed)
		m.use(label)
		m.failures.WithLabelValues(label, string(e.Reason)).Inc()
	}
}

// Audit counts one accepted request at now of the caller id that the
// rules its issuer audits would have refused, once for each reason, and
// the caller among the distinct callers of the hour.
func (m *Metrics) Audit(id *Identity, now time.Time) {
	if m == nil || len(id.audit.reasons) == 0 {
		return
	}
	label := issuerLabel(id.Issuer, true)
	m.use(label)
	caller := CallerKey(id.Issuer, id.Subject)
	set := func(k auditKey, n int) { m.callers.WithLabelValues(k.issuer, string(k.reason)).Set(float64(n)) }
	for _, r := range id.audit.reasons {
		m.audits.WithLabelValues(label, string(r)).Inc()
		m.shared.callers.add(auditKey{label, r}, caller, now, set)
	}
}

// Refresh counts one JWKS fetch, ok when it succeeded.
func (m *Metrics) Refresh(ok bool) {
	if m != nil {
		m.use(m.issuer)
		m.refreshes.WithLabelValues(m.issuer, result(ok)).Inc()
	}
}

// KeyFileReload counts one key file reload that changed the keys (ok) or
// was refused.
func (m *Metrics) KeyFileReload(ok bool) {
	if m != nil {
		m.use(m.issuer)
		m.reloads.WithLabelValues(m.issuer, result(ok)).Inc()
	}
}

// AddKeys moves the usable-keys gauge by delta (a source adds its new count
// and subtracts its old one when its set changes).
func (m *Metrics) AddKeys(delta int) {
	if m != nil {
		m.use(m.issuer)
		m.keys.WithLabelValues(m.issuer).Add(float64(delta))
	}
}

// watch makes the fill gauges read the caches of v.
func (m *Metrics) watch(v *Verifier) {
	if m != nil {
		m.shared.verifier.Store(v)
	}
}

// The fill gauges of the bounded structures an operator sizes.
var (
	tokenCacheBytesDesc = prometheus.NewDesc("plantstore_token_cache_bytes",
		"Bytes the verified-token cache holds: its table and every cached token, identity and principals.", nil, nil)
	tokenCacheLimitDesc = prometheus.NewDesc("plantstore_token_cache_limit_bytes",
		"The most bytes the verified-token cache may hold (-jwt-cache-bytes); 0 when it is off.", nil, nil)
	replayEntriesDesc = prometheus.NewDesc("plantstore_dpop_replay_entries",
		"DPoP proofs this replica remembers against replay, until their window ends.", nil, nil)
	replayLimitDesc = prometheus.NewDesc("plantstore_dpop_replay_entries_limit",
		"The most DPoP proofs the replay cache remembers: at this, new proofs are refused (429, dpop_quota).", nil, nil)
	failureEntriesDesc = prometheus.NewDesc("plantstore_dpop_failure_entries",
		"Callers and DPoP keys whose proofs failed their signature check within the last minute, counted against their budget (dpop_blocked).", nil, nil)
	failureLimitDesc = prometheus.NewDesc("plantstore_dpop_failure_entries_limit",
		"The most callers and keys the failure budget counts at once: at this, a new one takes an old one's place.", nil, nil)
)

// fillCollector reports the fill of the watched Verifier's caches at
// each scrape; nothing before a Verifier is watched.
type fillCollector struct{ shared *sharedMetrics }

func (fillCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tokenCacheBytesDesc
	ch <- tokenCacheLimitDesc
	ch <- replayEntriesDesc
	ch <- replayLimitDesc
	ch <- failureEntriesDesc
	ch <- failureLimitDesc
}

func (f fillCollector) Collect(ch chan<- prometheus.Metric) {
	v := f.shared.verifier.Load()
	if v == nil {
		return
	}
	used, limit := v.cache.fill()
	entries, max := v.replays.Fill()
	ch <- prometheus.MustNewConstMetric(tokenCacheBytesDesc, prometheus.GaugeValue, float64(used))
	ch <- prometheus.MustNewConstMetric(tokenCacheLimitDesc, prometheus.GaugeValue, float64(limit))
	ch <- prometheus.MustNewConstMetric(replayEntriesDesc, prometheus.GaugeValue, float64(entries))
	ch <- prometheus.MustNewConstMetric(replayLimitDesc, prometheus.GaugeValue, float64(max))
	failures, failuresMax := v.failures.Fill()
	ch <- prometheus.MustNewConstMetric(failureEntriesDesc, prometheus.GaugeValue, float64(failures))
	ch <- prometheus.MustNewConstMetric(failureLimitDesc, prometheus.GaugeValue, float64(failuresMax))
}
