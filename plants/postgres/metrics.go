package postgres

import (
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Prometheus metrics of this package's stores: the age of
// the snapshot a [Snapshot] serves, and the statistics of the connection
// pool of the store in use. (Reloads are counted by [plants.Metrics].) A
// nil *Metrics records nothing. The methods are safe for concurrent use.
type Metrics struct {
	state *stateCollector
}

// NewMetrics registers on reg and returns:
//
//   - plantstore_catalog_snapshot_age_seconds: seconds since the snapshot in
//     use was last loaded or found current by a read of the catalog version
//     (never by a notification alone; +Inf before the first snapshot), only
//     while a [Snapshot] reports here;
//   - plantstore_db_pool_connections{state="idle|acquired|constructing"},
//     plantstore_db_pool_max_connections, plantstore_db_pool_acquires_total,
//     plantstore_db_pool_empty_acquires_total and
//     plantstore_db_pool_acquire_wait_seconds_total, read from the pool of
//     the store that reports here at each scrape.
//
// Registering twice on one registry panics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{state: newStateCollector()}
	reg.MustRegister(m.state)
	return m
}

// reportPool makes the pool statistics come from p.
func (m *Metrics) reportPool(p *pgxpool.Pool) {
	if m != nil {
		m.state.pool.Store(p)
	}
}

// reportAge makes plantstore_catalog_snapshot_age_seconds come from age.
func (m *Metrics) reportAge(age func() float64) {
	if m != nil {
		m.state.age.Store(&age)
	}
}

// stateCollector reads the pool's statistics and the snapshot's age when
// scraped.
type stateCollector struct {
	pool atomic.Pointer[pgxpool.Pool]
	age  atomic.Pointer[func() float64]

	conns, maxConns, acquires, emptyAcquires, acquireWait, snapshotAge *prometheus.Desc
}

func newStateCollector() *stateCollector {
	return &stateCollector{
		conns: prometheus.NewDesc("plantstore_db_pool_connections",
			"Connections of the PostgreSQL pool, by state.", []string{"state"}, nil),
		maxConns: prometheus.NewDesc("plantstore_db_pool_max_connections",
			"Size of the PostgreSQL pool (-db-max-conns).", nil, nil),
		acquires: prometheus.NewDesc("plantstore_db_pool_acquires_total",
			"Connections taken from the PostgreSQL pool.", nil, nil),
		emptyAcquires: prometheus.NewDesc("plantstore_db_pool_empty_acquires_total",
			"Connections taken from the PostgreSQL pool that had to wait, for one to be released or opened.", nil, nil),
		acquireWait: prometheus.NewDesc("plantstore_db_pool_acquire_wait_seconds_total",
			"Time spent taking connections from the PostgreSQL pool, opening new ones included.", nil, nil),
		snapshotAge: prometheus.NewDesc("plantstore_catalog_snapshot_age_seconds",
			"Seconds since the catalog snapshot in use was last loaded or found current by a read of the catalog version; +Inf before the first snapshot.", nil, nil),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.conns, c.maxConns, c.acquires, c.emptyAcquires, c.acquireWait, c.snapshotAge} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if p := c.pool.Load(); p != nil {
		st := p.Stat()
		for _, s := range []struct {
			state string
			n     int32
		}{{"idle", st.IdleConns()}, {"acquired", st.AcquiredConns()}, {"constructing", st.ConstructingConns()}} {
			ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.n), s.state)
		}
		ch <- prometheus.MustNewConstMetric(c.maxConns, prometheus.GaugeValue, float64(st.MaxConns()))
		ch <- prometheus.MustNewConstMetric(c.acquires, prometheus.CounterValue, float64(st.AcquireCount()))
		ch <- prometheus.MustNewConstMetric(c.emptyAcquires, prometheus.CounterValue, float64(st.EmptyAcquireCount()))
		ch <- prometheus.MustNewConstMetric(c.acquireWait, prometheus.CounterValue, st.AcquireDuration().Seconds())
	}
	if age := c.age.Load(); age != nil {
		ch <- prometheus.MustNewConstMetric(c.snapshotAge, prometheus.GaugeValue, (*age)())
	}
}
