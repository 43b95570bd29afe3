package postgres_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
	"github.com/plantstore/plantstore/plants/storetest"
)

// The 1M-plant benchmarks import a large catalog first (tens of seconds), so
// they run only when asked for by name with -bench, e.g.
//
//	go test ./plants/postgres -run '^$' -bench 1M -benchtime 2000x
const benchPlants = 1_000_000

// Callers of the benchmark catalog: one sees half of it, one 0.1%. Both hold
// principals that match nothing, as real callers do.
var (
	callerHalf  = plants.Caller{Subject: "alice", Groups: []string{"half", "staff", "ops"}}
	callerSmall = plants.Caller{Subject: "bob", Groups: []string{"g7", "staff", "ops"}}
)

// BenchmarkImport1M imports 1,000,000 plants with three readers each, one
// import per iteration (the first into an empty schema, the next ones
// replacing the catalog).
func BenchmarkImport1M(b *testing.B) {
	dsn := migrated(b)
	c := storetest.LargeCatalog(b, benchPlants, "plant")
	replace := false
	for b.Loop() {
		if err := postgres.Import(b.Context(), dsn, c, replace); err != nil {
			b.Fatalf("Import: %v", err)
		}
		replace = true
	}
	b.ReportMetric(float64(benchPlants), "plants/op")
}

// BenchmarkList1M lists from a 1,000,000-plant catalog. The after=900000
// cases list the page of 10 after the 900,000th plant of the catalog
// (keyset paging), which costs what the first page does. p50-ns is the median
// latency of one List, drained. live-heap-growth-B is the largest growth of
// the live heap while draining one List: it stays flat when the visible set
// grows from 1,000 to 500,000 plants, because rows stream.
//
// TEST_BENCH_DATABASE_URL names a database (with search_path) that
// already holds the benchmark catalog, to skip the import.
func BenchmarkList1M(b *testing.B) {
	dsn := os.Getenv("TEST_BENCH_DATABASE_URL")
	c := storetest.LargeCatalog(b, benchPlants, "plant")
	deep := plants.KeyOf(c.Plants()[benchPlants*9/10])
	if dsn == "" {
		dsn = migrated(b)
		start := time.Now()
		if err := postgres.Import(b.Context(), dsn, c, false); err != nil {
			b.Fatalf("Import: %v", err)
		}
		b.Logf("imported %d plants in %v", benchPlants, time.Since(start).Round(time.Millisecond))
	}
	s, err := postgres.Open(b.Context(), dsn, postgres.Options{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	logPlans(b, dsn)

	for _, bc := range []struct {
		name   string
		caller plants.Caller
		limit  int
		after  plants.Key
	}{
		{"half/limit=10", callerHalf, 10, plants.Key{}},
		{"half/limit=10/after=900000", callerHalf, 10, deep},
		{"0.1%/limit=10", callerSmall, 10, plants.Key{}},
		{"0.1%/limit=10/after=900000", callerSmall, 10, deep},
		{"half/limit=1000", callerHalf, 1000, plants.Key{}},
		{"0.1%/all", callerSmall, plants.NoLimit, plants.Key{}},
		{"half/all", callerHalf, plants.NoLimit, plants.Key{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			q := plants.Query{Caller: bc.caller, Limit: bc.limit, After: bc.after}
			var growth uint64
			if bc.limit == plants.NoLimit {
				growth = heapGrowth(b, s, q)
			}
			var durations []time.Duration
			rows := 0
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				rows = 0
				for _, err := range s.List(b.Context(), q) {
					if err != nil {
						b.Fatalf("List: %v", err)
					}
					rows++
				}
				durations = append(durations, time.Since(start))
			}
			slices.Sort(durations)
			b.ReportMetric(float64(durations[len(durations)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(rows), "plants")
			if bc.limit == plants.NoLimit {
				b.ReportMetric(float64(growth), "live-heap-growth-B")
			}
		})
	}
}

// heapGrowth drains one List and returns the largest growth of the live
// heap (measured after a garbage collection, every 10,000 plants and at the
// end) over the live heap before it started.
func heapGrowth(b *testing.B, s *postgres.Store, q plants.Query) uint64 {
	b.Helper()
	live := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	base := live()
	var peak uint64
	sample := func() {
		if l := live(); l > base {
			peak = max(peak, l-base)
		}
	}
	n := 0
	for _, err := range s.List(b.Context(), q) {
		if err != nil {
			b.Fatalf("List: %v", err)
		}
		if n++; n%10_000 == 0 {
			sample()
		}
	}
	sample()
	return peak
}

// logPlans logs EXPLAIN (ANALYZE, BUFFERS) of the list queries for the
// benchmark callers, for docs/postgres.md: the limited statement, generic
// plan forced (the plan a prepared statement settles on), and the merge of
// a listing without a limit.
func logPlans(b *testing.B, dsn string) {
	b.Helper()
	conn, err := pgx.Connect(b.Context(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	explain := func(what, sql string, args ...any) {
		rows, err := conn.Query(b.Context(), "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+sql, args...)
		if err != nil {
			b.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("plan for %s:\n%s", what, strings.Join(lines, "\n"))
	}
	if _, err := conn.Exec(b.Context(), "SET plan_cache_mode = force_generic_plan"); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		caller plants.Caller
	}{{"half, limit 10", callerHalf}, {"0.1%, limit 10", callerSmall}} {
		explain(c.name, postgres.ListLimitedSQL, c.caller.Principals(), int64(0), false, 10, "", "")
	}
	ps := callerHalf.Principals()
	args := []any{int64(0), false, "", ""}
	for _, p := range ps {
		args = append(args, p)
	}
	explain("half, no limit", postgres.ListSQL(len(ps)), args...)
}

// BenchmarkListGroups lists limit=10 for an ordinary caller (2 groups),
// for callers with 256 groups that no plant names, and for callers with 20
// groups that all read plants, in parallel, on a catalog of 1,000 plants
// read per request: what the first cost once the store knows they read
// nothing, and what the probe (and its transaction) of the second costs on
// every request.
func BenchmarkListGroups(b *testing.B) {
	dsn := migrated(b)
	ps := make([]plants.Plant, 1000)
	for i := range ps {
		r := "*"
		if i%3 != 0 {
			r = fmt.Sprintf("group:g%02d", i%20)
		}
		ps[i] = plants.Plant{Name: fmt.Sprintf("Plant %04d", i), Tag: "t", Readers: []string{r}}
	}
	c, err := plants.NewCatalog(ps)
	if err != nil {
		b.Fatal(err)
	}
	if err := postgres.Import(b.Context(), dsn, c, false); err != nil {
		b.Fatal(err)
	}
	s := openStore(b, dsn, postgres.Options{})
	hostile := make([]string, 256)
	for i := range hostile {
		hostile[i] = fmt.Sprintf("hostile-%03d-xxxx", i)
	}
	reading := make([]string, 20)
	for i := range reading {
		reading[i] = fmt.Sprintf("g%02d", i)
	}
	for _, bc := range []struct {
		name   string
		caller plants.Caller
	}{
		{"2 groups", plants.Caller{Subject: "ordinary", Groups: []string{"g01", "g02"}}},
		{"256 groups", plants.Caller{Subject: "hostile", Groups: hostile}},
		{"20 reading groups", plants.Caller{Subject: "many", Groups: reading}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			q := plants.Query{Caller: bc.caller, Limit: 10}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					for _, err := range s.List(b.Context(), q) {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		})
	}
}
