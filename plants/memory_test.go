package plants_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/storetest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, c *plants.Catalog) plants.Store {
		return plants.NewMemoryStore(c, nil)
	})
}

func TestMemoryStoreWithoutCatalog(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	s := plants.NewMemoryStore(nil, plants.NewMetrics(reg))
	if err := s.Ready(t.Context()); !errors.Is(err, plants.ErrUnavailable) {
		t.Errorf("Ready() without a catalog = %v; want ErrUnavailable", err)
	}
	var errs []error
	for p, err := range s.List(t.Context(), plants.Query{Principals: []string{"*"}, Limit: plants.NoLimit}) {
		if err == nil {
			t.Errorf("List without a catalog yielded %+v", p)
			continue
		}
		errs = append(errs, err)
	}
	if len(errs) != 1 || !errors.Is(errs[0], plants.ErrUnavailable) {
		t.Errorf("List without a catalog yielded errors %v; want one ErrUnavailable", errs)
	}
	if s.Catalog() != nil {
		t.Errorf("Catalog() = %v; want nil", s.Catalog())
	}

	c := plants.SampleCatalog()
	s.Replace(c)
	if err := s.Ready(t.Context()); err != nil {
		t.Errorf("Ready() after Replace = %v; want nil", err)
	}
	if s.Catalog() != c {
		t.Errorf("Catalog() after Replace is not the catalog given")
	}
	want := `
# HELP plantstore_catalog_plants Plants in the catalog the in-memory store serves.
# TYPE plantstore_catalog_plants gauge
plantstore_catalog_plants ` + itoa(c.Len()) + `
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "plantstore_catalog_plants"); err != nil {
		t.Error(err)
	}
	n := 0
	for _, err := range s.List(t.Context(), plants.Query{Principals: []string{"*"}, Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if got := testutil.CollectAndCount(reg, "plantstore_store_request_duration_seconds"); got != 4 {
		t.Errorf("plantstore_store_request_duration_seconds has %d series; want 4", got)
	}
	for _, tt := range []struct {
		result string
		want   int
	}{{"ok", 1}, {"error", 1}} {
		if got := histogramCount(t, reg, "plantstore_store_request_duration_seconds", map[string]string{"store": "memory", "result": tt.result}); got != tt.want {
			t.Errorf("store duration count{memory,%s} = %d; want %d", tt.result, got, tt.want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// histogramCount returns the sample count of the histogram series name with
// the given labels, or -1 when there is none.
func histogramCount(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) int {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue metrics
				}
			}
			return int(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

func TestMemoryStoreReplaceWhileListing(t *testing.T) {
	oldCat, err := plants.NewCatalog([]plants.Plant{{Name: "old 1", Readers: []string{"*"}}, {Name: "old 2", Readers: []string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	newCat, err := plants.NewCatalog([]plants.Plant{{Name: "new", Readers: []string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	s := plants.NewMemoryStore(oldCat, nil)
	q := plants.Query{Principals: []string{"*"}, Limit: plants.NoLimit}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2000 {
			s.Replace([]*plants.Catalog{oldCat, newCat}[i%2])
		}
	}()
	for listing := 0; ; listing++ {
		var got []string
		for p, err := range s.List(t.Context(), q) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p.Name)
		}
		if s := strings.Join(got, ","); s != "old 1,old 2" && s != "new" {
			t.Fatalf("listing %d = %q; want one whole catalog", listing, s)
		}
		select {
		case <-done:
			return
		default:
		}
	}
}
