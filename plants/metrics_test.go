package plants_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/observability/metricstest"
	"github.com/plantstore/plantstore/plants"
)

func TestObserveStoreSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := plants.NewMetrics(reg)
	// A different count per series, so that a mixed-up series shows.
	counts := []struct {
		store, result string
		n             int
	}{
		{plants.StoreMemory, plants.ResultOK, 1},
		{plants.StoreMemory, plants.ResultError, 2},
		{plants.StorePostgres, plants.ResultOK, 3},
		{plants.StorePostgres, plants.ResultError, 4},
		{plants.StoreSnapshot, plants.ResultOK, 5},
		{plants.StoreSnapshot, plants.ResultError, 6},
		{"other", plants.ResultOK, 7}, // not one of the six: still recorded
		{plants.StoreMemory, "other", 8},
	}
	for _, c := range counts {
		for range c.n {
			m.ObserveStore(c.store, c.result, time.Millisecond)
		}
	}
	for _, c := range counts {
		labels := map[string]string{"store": c.store, "result": c.result}
		if got := int(metricstest.Sum(t, reg, "plantstore_store_request_duration_seconds", labels)); got != c.n {
			t.Errorf("store duration count{%s,%s} = %d; want %d", c.store, c.result, got, c.n)
		}
	}
	var nilMetrics *plants.Metrics
	nilMetrics.ObserveStore(plants.StoreMemory, plants.ResultOK, time.Second) // records nothing, no panic
}
