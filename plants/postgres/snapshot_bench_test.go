package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
	"github.com/plantstore/plantstore/plants/storetest"
)

// BenchmarkSnapshotLoad1M reads a 1,000,000-plant catalog from the database
// into memory, as each snapshot reload does, for two catalogs: one whose
// plants share a thousand reader lists, and storetest.LargeCatalog, where a
// list is shared by ten plants scattered over the catalog. B/plant is the
// live heap the loaded catalog holds, per plant.
func BenchmarkSnapshotLoad1M(b *testing.B) {
	for _, shape := range []struct {
		name    string
		catalog func(testing.TB) *plants.Catalog
	}{
		{"lists=1000", sharedListsCatalog},
		{"lists=100000", func(tb testing.TB) *plants.Catalog { return storetest.LargeCatalog(tb, benchPlants, "plant") }},
	} {
		b.Run(shape.name, func(b *testing.B) {
			dsn := migrated(b)
			if err := postgres.Import(b.Context(), dsn, shape.catalog(b), false); err != nil {
				b.Fatalf("Import: %v", err)
			}
			s := openSnapshot(b, dsn, postgres.Options{Poll: time.Hour}, nil)
			waitLoaded(b, s)
			load := func() *plants.Catalog {
				c, err := s.Load(b.Context())
				if err != nil || c.Len() != benchPlants {
					b.Fatalf("Load = %v, %v; want %d plants", c, err, benchPlants)
				}
				return c
			}
			perPlant := storetest.BytesPerPlant(load)
			b.ReportAllocs()
			for b.Loop() {
				load()
			}
			b.ReportMetric(perPlant, "B/plant")
		})
	}
}

// sharedListsCatalog returns benchPlants plants whose readers are one of a
// thousand lists of three, in a name order unrelated to the lists.
func sharedListsCatalog(tb testing.TB) *plants.Catalog {
	tb.Helper()
	ps := make([]plants.Plant, benchPlants)
	for i := range ps {
		ps[i] = plants.Plant{
			Name:    fmt.Sprintf("Plant %07d", (i*7919)%benchPlants),
			Tag:     "herb",
			Readers: []string{fmt.Sprintf("group:g%d", i%50), fmt.Sprintf("user:u%d", i%1000), "*"},
		}
	}
	c, err := plants.NewCatalog(ps)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
