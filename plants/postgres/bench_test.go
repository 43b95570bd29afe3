package postgres_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
)

// The 1M-plant benchmarks import a large catalog first (tens of seconds), so
// they run only when asked for by name with -bench, e.g.
//
//	go test ./plants/postgres -run '^$' -bench 1M -benchtime 2000x
const benchPlants = 1_000_000

// Callers of the benchmark catalog: one sees half of it, one 0.1%. Both hold
// principals that match nothing, as real callers do.
var (
	callerHalf  = []string{"*", "user:alice", "group:half", "group:staff", "group:ops"}
	callerSmall = []string{"*", "user:bob", "group:g7", "group:staff", "group:ops"}
)

// benchCatalog returns n plants in a name order unrelated to their
// position, each with three readers: group:half or group:odd (half of the
// plants each), group:g<i mod 1000> (0.1% each) and user:u<i mod 100000>.
func benchCatalog(b testing.TB, n int) *plants.Catalog {
	b.Helper()
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
			Name:    fmt.Sprintf("plant %016x", h.Sum64()),
			Tag:     tag,
			Readers: []string{half, fmt.Sprintf("group:g%d", i%1000), fmt.Sprintf("user:u%d", i%100000)},
		}
	}
	c, err := plants.NewCatalog(ps)
	if err != nil {
		b.Fatalf("NewCatalog: %v", err)
	}
	return c
}

// BenchmarkImport1M imports 1,000,000 plants with three readers each, one
// import per iteration (the first into an empty schema, the next ones
// replacing the catalog).
func BenchmarkImport1M(b *testing.B) {
	dsn := migrated(b)
	c := benchCatalog(b, benchPlants)
	replace := false
	for b.Loop() {
		if err := postgres.Import(b.Context(), dsn, c, replace); err != nil {
			b.Fatalf("Import: %v", err)
		}
		replace = true
	}
	b.ReportMetric(float64(benchPlants), "plants/op")
}

// BenchmarkList1M lists from a 1,000,000-plant catalog. p50-ns is the median
// latency of one List, drained. live-heap-growth-B is the largest growth of
// the live heap while draining one List: it stays flat when the visible set
// grows from 1,000 to 500,000 plants, because rows stream.
//
// PLANTSTORE_BENCH_DATABASE_URL names a database (with search_path) that
// already holds the benchmark catalog, to skip the import.
func BenchmarkList1M(b *testing.B) {
	dsn := os.Getenv("PLANTSTORE_BENCH_DATABASE_URL")
	if dsn == "" {
		dsn = migrated(b)
		start := time.Now()
		if err := postgres.Import(b.Context(), dsn, benchCatalog(b, benchPlants), false); err != nil {
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
		name       string
		principals []string
		limit      int
	}{
		{"half/limit=10", callerHalf, 10},
		{"0.1%/limit=10", callerSmall, 10},
		{"half/limit=1000", callerHalf, 1000},
		{"0.1%/all", callerSmall, plants.NoLimit},
		{"half/all", callerHalf, plants.NoLimit},
	} {
		b.Run(bc.name, func(b *testing.B) {
			q := plants.Query{Principals: bc.principals, Limit: bc.limit}
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

// logPlans logs EXPLAIN (ANALYZE, BUFFERS) of the list query for each
// benchmark caller, for the README.
func logPlans(b *testing.B, dsn string) {
	b.Helper()
	conn, err := pgx.Connect(b.Context(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, c := range []struct {
		name       string
		principals []string
		limit      any
	}{
		{"half, limit 10", callerHalf, 10},
		{"0.1%, limit 10", callerSmall, 10},
		{"half, no limit", callerHalf, nil},
	} {
		args := []any{}
		for _, p := range c.principals {
			args = append(args, p)
		}
		args = append(args, c.limit)
		rows, err := conn.Query(b.Context(), "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+postgres.ListSQL(len(c.principals)), args...)
		if err != nil {
			b.Fatal(err)
		}
		plan := ""
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				b.Fatal(err)
			}
			plan += line + "\n"
		}
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
		b.Logf("plan for %s (%v):\n%s", c.name, c.principals, plan)
	}

	// pgx prepares the statement; after five runs PostgreSQL may switch it
	// to a generic plan, which must keep the same shape.
	n := len(callerHalf)
	types := strings.TrimSuffix(strings.Repeat("text, ", n), ", ") + ", bigint"
	if _, err := conn.Exec(b.Context(), "PREPARE list_generic("+types+") AS "+postgres.ListSQL(n)); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(b.Context(), "SET plan_cache_mode = force_generic_plan"); err != nil {
		b.Fatal(err)
	}
	quoted := make([]string, n)
	for i, p := range callerHalf {
		quoted[i] = "'" + p + "'"
	}
	rows, err := conn.Query(b.Context(), "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE list_generic("+strings.Join(quoted, ", ")+", 10)")
	if err != nil {
		b.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("generic plan for half, limit 10:\n%s", strings.Join(lines, "\n"))
}
