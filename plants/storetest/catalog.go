package storetest

import (
	"fmt"
	"hash/fnv"
	"runtime"
	"testing"

	"github.com/plantstore/plantstore/plants"
)

// LargeCatalog returns n plants named "<prefix> <hash of i>", in a name
// order unrelated to their position, two in three with a tag, each with
// three readers: group:half or group:odd (half of the plants each),
// group:g<i mod 1000> (0.1% each) and user:u<i mod 100000>. Few plants
// share their readers: the catalog a store holds the most memory for. Two
// prefixes make two catalogs that share no name, so that a listing tells
// which one it came from.
func LargeCatalog(tb testing.TB, n int, prefix string) *plants.Catalog {
	tb.Helper()
	ps := make([]plants.Plant, n)
	for i := range ps {
		h := fnv.New64a()
		fmt.Fprint(h, i)
		half := "group:odd"
		if i%2 == 0 {
			half = "group:half"
		}
		tag := ""
		if i%3 != 0 {
			tag = fmt.Sprintf("tag-%d", i%10)
		}
		ps[i] = plants.Plant{
			Name:    fmt.Sprintf("%s %016x", prefix, h.Sum64()),
			Tag:     tag,
			Readers: []string{half, fmt.Sprintf("group:g%d", i%1000), fmt.Sprintf("user:u%d", i%100000)},
		}
	}
	c, err := plants.NewCatalog(ps)
	if err != nil {
		tb.Fatalf("NewCatalog: %v", err)
	}
	return c
}

// BytesPerPlant returns the live heap that the catalog load returns holds,
// per plant: what a catalog costs in memory, for benchmarks to report.
func BytesPerPlant(load func() *plants.Catalog) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := load()
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := c.Len()
	runtime.KeepAlive(c)
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)
}
