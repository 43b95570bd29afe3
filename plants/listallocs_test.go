//go:build !race

package plants_test

import (
	"context"
	"testing"

	"github.com/plantstore/plantstore/plants"
)

// TestMemoryStoreListAllocs: listing a page for a caller of a few
// principals, from the start and after a cursor, allocates nothing: the
// merge of the caller's reader lists keeps its state on the stack. (The
// race detector changes what escapes; the test runs without it.)
func TestMemoryStoreListAllocs(t *testing.T) {
	s := plants.NewMemoryStore(indexCatalog(t, 10_000), nil)
	caller := plants.Caller{Subject: "rare", Groups: []string{"even", "quad", "odd"}}
	var after plants.Key
	for p, err := range s.List(context.Background(), plants.Query{Caller: caller, Limit: 100}) {
		if err != nil {
			t.Fatal(err)
		}
		after = plants.KeyOf(p)
	}
	for _, q := range []plants.Query{
		{Caller: caller, Limit: 10},
		{Caller: caller, Limit: 10, After: after},
	} {
		n := 0
		allocs := testing.AllocsPerRun(100, func() {
			n = 0
			for _, err := range s.List(context.Background(), q) {
				if err != nil {
					t.Fatal(err)
				}
				n++
			}
		})
		if n != 10 || allocs != 0 {
			t.Errorf("after %v: %d plants with %.1f allocations a listing; want 10 with none", q.After, n, allocs)
		}
	}
}
