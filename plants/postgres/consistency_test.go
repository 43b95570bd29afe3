package postgres_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
	"github.com/plantstore/plantstore/plants/storetest"
)

// consistencyCatalog returns a catalog of n plants whose readers depend on
// flip, so that the two catalogs give every test caller another answer:
// the principals that read plants in one (group:x, group:g03, user:u,
// group:h05) read none in the other, where group:y, group:g17, user:v and
// group:h11 do; group:r00 to r09 read in one, r05 to r14 in the other; a
// quarter are read by * in both (under other names).
func consistencyCatalog(t testing.TB, n int, flip bool) *plants.Catalog {
	t.Helper()
	first, prefix := []string{"group:x", "group:g03", "user:u", "group:h05"}, "a"
	from := 0
	if flip {
		first, prefix, from = []string{"group:y", "group:g17", "user:v", "group:h11"}, "b", 5
	}
	for i := from; i < from+10; i++ {
		first = append(first, fmt.Sprintf("group:r%02d", i))
	}
	ps := make([]plants.Plant, n)
	for i := range ps {
		r := "*"
		if i%4 != 0 {
			r = first[i%len(first)]
		}
		ps[i] = plants.Plant{ID: fmt.Sprintf("%s%04d", prefix, i), Name: fmt.Sprintf("%s plant %04d", prefix, i/3), Readers: []string{r}}
	}
	c, err := plants.NewCatalog(ps)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestListConsistentDuringImports lists, from several goroutines, while
// imports replace the catalog with one of two others in a loop: every
// answer must be the whole answer of one of the two catalogs, never a mix
// (a listing that read part of its answer before an import committed and
// part after). The callers cover each way the store answers: few
// principals and many (which the store sorts out first: those that read
// nothing once, those that read plants on every listing), with and
// without a limit. TEST_SOAK=1 runs many more imports.
func TestListConsistentDuringImports(t *testing.T) {
	t.Parallel()
	imports := 16
	if os.Getenv("TEST_SOAK") == "1" {
		imports = 400
	}
	dsn := migrated(t)
	catalogs := []*plants.Catalog{consistencyCatalog(t, 600, false), consistencyCatalog(t, 600, true)}
	if err := postgres.Import(t.Context(), dsn, catalogs[0], false); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dsn, postgres.Options{})

	many := []string{"x", "y"}
	for i := range 40 {
		many = append(many, fmt.Sprintf("g%02d", i))
	}
	hostile := []string{"hX"}
	for i := range 30 {
		hostile = append(hostile, fmt.Sprintf("h%02d", i))
	}
	// More than eight principals that read plants, which the store sorts
	// out before each listing.
	var reading []string
	for i := range 15 {
		reading = append(reading, fmt.Sprintf("r%02d", i))
	}
	callers := []plants.Caller{
		{Subject: "u", Groups: []string{"x"}},
		{Subject: "r", Groups: reading},
		{Subject: "v", Groups: []string{"y", "g03"}},
		{Subject: "w", Groups: many},
		{Subject: "u", Groups: hostile},
	}
	var queries []plants.Query
	for _, c := range callers {
		for _, limit := range []int{plants.NoLimit, 1000, 25} {
			queries = append(queries, plants.Query{Caller: c, Limit: limit})
		}
	}
	// The two answers each query may have, from the memory store.
	want := make([][2][]string, len(queries))
	for ci, c := range catalogs {
		m := plants.NewMemoryStore(c, nil)
		for qi, q := range queries {
			got, err := collect(t, m, q)
			if err != nil {
				t.Fatal(err)
			}
			want[qi][ci] = storetest.Names(got)
		}
		for qi := range queries {
			if ci == 1 && slices.Equal(want[qi][0], want[qi][1]) {
				t.Fatalf("query %d (%+v) has the same answer in both catalogs: the test cannot tell them apart", qi, queries[qi])
			}
		}
	}

	var (
		done          atomic.Bool
		listings, bad atomic.Int64
		mu            sync.Mutex
		examples      []string
		wg            sync.WaitGroup
	)
	for w := range 3 {
		wg.Go(func() {
			for i := w; !done.Load(); i++ {
				qi := i % len(queries)
				got, err := collect(t, s, queries[qi])
				if err != nil {
					t.Errorf("List(%+v): %v", queries[qi], err)
					return
				}
				listings.Add(1)
				names := storetest.Names(got)
				if slices.Equal(names, want[qi][0]) || slices.Equal(names, want[qi][1]) {
					continue
				}
				if bad.Add(1) <= 3 {
					mu.Lock()
					examples = append(examples, fmt.Sprintf("caller %s (%d groups), limit %d: %d plants, first %q, want %d or %d",
						queries[qi].Caller.Subject, len(queries[qi].Caller.Groups), queries[qi].Limit,
						len(names), names[:min(3, len(names))], len(want[qi][0]), len(want[qi][1])))
					mu.Unlock()
				}
			}
		})
	}
	for i := range imports {
		if err := postgres.Import(t.Context(), dsn, catalogs[(i+1)%2], true); err != nil {
			t.Error(err)
			break
		}
	}
	done.Store(true)
	wg.Wait()
	t.Logf("%d imports, %d listings, %d matching neither catalog", imports, listings.Load(), bad.Load())
	if bad.Load() > 0 {
		t.Errorf("%d of %d listings matched neither catalog, e.g.:\n%s", bad.Load(), listings.Load(), strings.Join(examples, "\n"))
	}
}
