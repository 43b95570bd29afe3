package plants_test

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"runtime"
	"testing"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/storetest"
)

// indexCatalog returns n plants where even positions are read by group:even
// (every fourth also by group:quad, so the merge removes repeats), odd ones
// by group:odd, and one in a thousand also by user:rare.
func indexCatalog(tb testing.TB, n int) *plants.Catalog {
	tb.Helper()
	ps := make([]plants.Plant, n)
	for i := range ps {
		var readers []string
		switch {
		case i%4 == 0:
			readers = []string{"group:even", "group:quad"}
		case i%2 == 0:
			readers = []string{"group:even"}
		default:
			readers = []string{"group:odd"}
		}
		if i%1000 == 7 {
			readers = append(readers, "user:rare")
		}
		ps[i] = plants.Plant{Name: fmt.Sprintf("plant %08d", i), Readers: readers}
	}
	c, err := plants.NewCatalog(ps)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// BenchmarkMemoryStoreList lists limit=10 for a caller who sees half the
// catalog and one who sees 0.1% of it: the cost must not depend on the
// catalog's size.
func BenchmarkMemoryStoreList(b *testing.B) {
	callers := []struct {
		name   string
		caller plants.Caller
		sees   func(size int) int
	}{
		{"half", plants.Caller{Subject: "someone", Groups: []string{"even", "quad"}}, func(size int) int { return size / 2 }},
		{"0.1%", plants.Caller{Subject: "rare", Groups: []string{"none"}}, func(size int) int { return size / 1000 }},
	}
	for _, size := range []int{1_000, 100_000, 1_000_000} {
		s := plants.NewMemoryStore(indexCatalog(b, size), nil)
		for _, caller := range callers {
			b.Run(fmt.Sprintf("plants=%d/caller=%s", size, caller.name), func(b *testing.B) {
				benchList(b, s, plants.Query{Caller: caller.caller, Limit: 10}, min(10, caller.sees(size)))
			})
		}
	}
}

// benchList lists q from s in a benchmark loop, failing unless each
// listing yields want plants.
func benchList(b *testing.B, s *plants.MemoryStore, q plants.Query, want int) {
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for _, err := range s.List(b.Context(), q) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != want {
			b.Fatalf("listed %d plants; want %d", n, want)
		}
	}
}

// BenchmarkMemoryStorePage lists a page of 10 from the start and after
// the 900,000th of 1,000,000 plants (keyset paging), for a caller who sees
// half the catalog and one who sees 0.1% of it: the deep page is found by
// binary searches, so it costs what the first does.
//
//	go test ./plants -run '^$' -bench MemoryStorePage
func BenchmarkMemoryStorePage(b *testing.B) {
	const size = 1_000_000
	c := indexCatalog(b, size)
	s := plants.NewMemoryStore(c, nil)
	deep := plants.KeyOf(c.Plants()[size*9/10])
	for _, caller := range []struct {
		name   string
		caller plants.Caller
	}{
		{"half", plants.Caller{Subject: "someone", Groups: []string{"even", "quad"}}},
		{"0.1%", plants.Caller{Subject: "rare", Groups: []string{"none"}}},
	} {
		for _, page := range []struct {
			name  string
			after plants.Key
		}{{"first", plants.Key{}}, {"after=900000", deep}} {
			b.Run(fmt.Sprintf("caller=%s/page=%s", caller.name, page.name), func(b *testing.B) {
				benchList(b, s, plants.Query{Caller: caller.caller, Limit: 10, After: page.after}, 10)
			})
		}
	}
}

// millionCatalogJSON returns a catalog file of a million plants in a
// scrambled order, with a tag and a thousand distinct reader lists.
func millionCatalogJSON() *bytes.Buffer {
	return catalogJSON(1_000_000, func(i int) string {
		return fmt.Sprintf(`{"name": "Plant %07d", "tag": "herb", "readers": ["group:g%d", "user:u%d", "*"]}`, (i*7919)%1_000_000, i%50, i%1000)
	})
}

// scatteredCatalogJSON returns storetest.LargeCatalog's million plants as a
// catalog file: a hundred thousand reader lists, each of ten plants a
// hundred thousand entries apart.
func scatteredCatalogJSON() *bytes.Buffer {
	return catalogJSON(1_000_000, func(i int) string {
		h := fnv.New64a()
		fmt.Fprint(h, i)
		half := "group:odd"
		if i%2 == 0 {
			half = "group:half"
		}
		return fmt.Sprintf(`{"name": "plant %016x", "tag": "tag-%d", "readers": [%q, "group:g%d", "user:u%d"]}`, h.Sum64(), i%10, half, i%1000, i%100000)
	})
}

// catalogJSON returns a catalog file of n entries.
func catalogJSON(n int, entry func(i int) string) *bytes.Buffer {
	var buf bytes.Buffer
	buf.WriteString("[\n")
	for i := range n {
		if i > 0 {
			buf.WriteString(",\n")
		}
		buf.WriteString(entry(i))
	}
	buf.WriteString("\n]\n")
	return &buf
}

// BenchmarkParseCatalog parses catalog files of a million entries. B/plant
// is the live heap the parsed catalog holds, per plant.
func BenchmarkParseCatalog(b *testing.B) {
	for _, file := range []struct {
		name string
		json func() *bytes.Buffer
	}{
		{"lists=1000", millionCatalogJSON},
		{"lists=100000", scatteredCatalogJSON},
	} {
		b.Run(file.name, func(b *testing.B) {
			buf := file.json()
			parse := func() *plants.Catalog {
				c, err := plants.ParseCatalog(bytes.NewReader(buf.Bytes()), "bench.json")
				if err != nil || c.Len() != 1_000_000 {
					b.Fatal(c, err)
				}
				return c
			}
			perPlant := storetest.BytesPerPlant(parse)
			b.SetBytes(int64(buf.Len()))
			b.ReportAllocs()
			for b.Loop() {
				parse()
			}
			b.ReportMetric(perPlant, "B/plant")
		})
	}
}

// BenchmarkGCWithCatalog1M is one full garbage collection while a
// 1,000,000-plant catalog read from a file is served: what the catalog
// costs every collection the service's garbage sets off.
func BenchmarkGCWithCatalog1M(b *testing.B) {
	buf := millionCatalogJSON()
	c, err := plants.ParseCatalog(buf, "bench.json")
	if err != nil {
		b.Fatal(err)
	}
	s := plants.NewMemoryStore(c, nil)
	runtime.GC()
	for b.Loop() {
		runtime.GC()
	}
	runtime.KeepAlive(s)
}
