package plants_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/observability/metricstest"
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
	for p, err := range s.List(t.Context(), plants.Query{Caller: plants.Caller{Subject: "x"}, Limit: plants.NoLimit}) {
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
# HELP plantstore_catalog_plants Plants in the catalog the service serves.
# TYPE plantstore_catalog_plants gauge
plantstore_catalog_plants ` + itoa(c.Len()) + `
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "plantstore_catalog_plants"); err != nil {
		t.Error(err)
	}
	n := 0
	for _, err := range s.List(t.Context(), plants.Query{Caller: plants.Caller{Subject: "x"}, Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if got := testutil.CollectAndCount(reg, "plantstore_store_request_duration_seconds"); got != 6 {
		t.Errorf("plantstore_store_request_duration_seconds has %d series; want 6 (3 stores × 2 results)", got)
	}
	for _, tt := range []struct {
		result string
		want   int
	}{{"ok", 1}, {"error", 1}} {
		if got := int(metricstest.Sum(t, reg, "plantstore_store_request_duration_seconds", map[string]string{"store": "memory", "result": tt.result})); got != tt.want {
			t.Errorf("store duration count{memory,%s} = %d; want %d", tt.result, got, tt.want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

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
	q := plants.Query{Caller: plants.Caller{Subject: "x"}, Limit: plants.NoLimit}
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

// TestMemoryStoreReloadFile reloads a catalog file, a good one then a bad
// one: the good one serves, the bad one is refused while the good one
// keeps serving, and both reloads are counted.
func TestMemoryStoreReloadFile(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	s := plants.NewMemoryStore(plants.SampleCatalog(), plants.NewMetrics(reg))
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.json"), filepath.Join(dir, "bad.json")
	if err := os.WriteFile(good, []byte(`[{"name": "Fern", "readers": ["*"]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`[{"name": "Fern", "readers": ["admins"]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path                string
		wantErr             bool
		success, failure    float64
		wantServing, wanted string
	}{
		{good, false, 1, 0, "Fern", "the new catalog"},
		{bad, true, 1, 1, "Fern", "the last good catalog"},
	}
	for _, tt := range tests {
		c, err := s.ReloadFile(tt.path)
		var ce *plants.CatalogError
		if tt.wantErr != (err != nil) || tt.wantErr && !errors.As(err, &ce) || !tt.wantErr && c != s.Catalog() {
			t.Errorf("ReloadFile(%s) = %v, %v; want an error: %v", tt.path, c, err, tt.wantErr)
		}
		if ps := s.Catalog().Plants(); len(ps) != 1 || ps[0].Name != tt.wantServing {
			t.Errorf("after ReloadFile(%s): serving %v; want %s", tt.path, ps, tt.wanted)
		}
		for result, want := range map[string]float64{"success": tt.success, "failure": tt.failure} {
			if got := metricstest.Sum(t, reg, "plantstore_catalog_reloads_total", map[string]string{"result": result}); got != want {
				t.Errorf("after ReloadFile(%s): reloads{result=%q} = %v; want %v", tt.path, result, got, want)
			}
		}
	}
	if got := metricstest.Sum(t, reg, "plantstore_catalog_reload_duration_seconds", nil); got != 2 {
		t.Errorf("reload durations observed: %v; want 2", got)
	}
}
