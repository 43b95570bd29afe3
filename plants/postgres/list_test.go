package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/observability/metricstest"
	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
	"github.com/plantstore/plantstore/plants/postgres/pgtest"
	"github.com/plantstore/plantstore/plants/storetest"
)

// listCatalog exercises byte order (upper case before lower case, UTF-8
// after ASCII), ties by id (explicit and generated), optional tags and
// plants reachable through several principals.
const listCatalog = `[
	{"id": "b", "name": "apple", "tag": "t1", "readers": ["*", "group:a"]},
	{"id": "a", "name": "apple", "readers": ["group:a", "user:ann"]},
	{"name": "apple", "readers": ["user:ann"]},
	{"id": "z", "name": "Zebra grass", "readers": ["group:b"]},
	{"id": "u", "name": "Äpfel", "tag": "umlaut", "readers": ["*"]},
	{"id": "s", "name": "apple ", "readers": ["group:a", "group:b"]},
	{"id": "x", "name": "yew", "readers": ["user:bob"]}
]`

func TestList(t *testing.T) {
	t.Parallel()
	dsn := migrated(t)
	if err := postgres.Import(t.Context(), dsn, storetest.Catalog(t, listCatalog), false); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dsn, postgres.Options{})
	all := []plants.Plant{
		{ID: "z", Name: "Zebra grass"},
		{ID: "0000000002", Name: "apple"},
		{ID: "a", Name: "apple"},
		{ID: "b", Name: "apple", Tag: "t1"},
		{ID: "s", Name: "apple "},
		{ID: "x", Name: "yew"},
		{ID: "u", Name: "Äpfel", Tag: "umlaut"},
	}
	pick := func(ids ...string) []plants.Plant {
		var out []plants.Plant
		for _, p := range all {
			if slices.Contains(ids, p.ID) {
				out = append(out, p)
			}
		}
		return out
	}
	tests := []struct {
		name   string
		caller plants.Caller
		limit  int
		want   []plants.Plant
	}{
		{"ann in groups a and b", plants.Caller{Subject: "ann", Groups: []string{"a", "b"}}, plants.NoLimit, pick("z", "0000000002", "a", "b", "s", "u")},
		{"ann in group a", plants.Caller{Subject: "ann", Groups: []string{"a"}}, plants.NoLimit, pick("0000000002", "a", "b", "s", "u")},
		{"ann limit 2", plants.Caller{Subject: "ann", Groups: []string{"a"}}, 2, pick("0000000002", "a")},
		{"duplicate groups", plants.Caller{Subject: "x", Groups: []string{"a", "a"}}, plants.NoLimit, pick("a", "b", "s", "u")},
		{"only star", plants.Caller{Subject: "x"}, plants.NoLimit, pick("b", "u")},
		{"only star, limit", plants.Caller{Subject: "x"}, 1, pick("b")},
		{"groups no plant names", plants.Caller{Subject: "x", Groups: []string{"c", "d"}}, plants.NoLimit, pick("b", "u")},
		{"limit 0", plants.Caller{Subject: "x"}, 0, nil},
		{"limit above count", plants.Caller{Subject: "x", Groups: []string{"b"}}, 10, pick("z", "b", "s", "u")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := plants.Query{Caller: tt.caller, Limit: tt.limit}
			got, err := collect(t, s, q)
			if err != nil {
				t.Fatalf("List(%+v): %v", q, err)
			}
			if !slices.EqualFunc(got, tt.want, storetest.SamePlant) {
				t.Errorf("List(%+v) = %+v, want %+v", q, got, tt.want)
			}
		})
	}
}

// TestListPrefix checks that every limit gives a prefix of the full list.
func TestListPrefix(t *testing.T) {
	t.Parallel()
	dsn := migrated(t)
	if err := postgres.Import(t.Context(), dsn, storetest.Catalog(t, listCatalog), false); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dsn, postgres.Options{})
	caller := plants.Caller{Subject: "ann", Groups: []string{"a", "b"}}
	full, err := collect(t, s, plants.Query{Caller: caller, Limit: plants.NoLimit})
	if err != nil {
		t.Fatal(err)
	}
	for limit := 0; limit <= len(full)+1; limit++ {
		got, err := collect(t, s, plants.Query{Caller: caller, Limit: limit})
		if err != nil {
			t.Fatalf("List limit %d: %v", limit, err)
		}
		want := full[:min(limit, len(full))]
		if !slices.EqualFunc(got, want, storetest.SamePlant) {
			t.Errorf("List limit %d = %v, want %v", limit, storetest.Names(got), storetest.Names(want))
		}
	}
}

// TestListStopEarly checks that a caller may stop mid-stream and the store
// still answers afterwards on its single connection.
func TestListStopEarly(t *testing.T) {
	t.Parallel()
	dsn := migrated(t)
	if err := postgres.Import(t.Context(), dsn, generatedCatalog(t, 5000, func(int) []string { return []string{"*"} }), false); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dsn, postgres.Options{MaxConns: 1})
	q := plants.Query{Caller: plants.Caller{Subject: "x"}, Limit: plants.NoLimit}
	for range 3 {
		n := 0
		for _, err := range s.List(t.Context(), q) {
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if n++; n == 10 {
				break
			}
		}
		if n != 10 {
			t.Fatalf("List yielded %d plants before the stop, want 10", n)
		}
	}
	got, err := collect(t, s, q)
	if err != nil || len(got) != 5000 {
		t.Errorf("List after early stops: %d plants, %v; want 5000, nil", len(got), err)
	}
}

// TestListStreams checks that List without a limit streams: when the first
// plant reaches the caller, only a small part of the result has left the
// server, and the rest follows as the caller reads.
func TestListStreams(t *testing.T) {
	t.Parallel()
	dsn := migrated(t)
	const n = 30_000
	tag := strings.Repeat("t", 1000)
	ps := make([]plants.Plant, n)
	for i := range ps {
		ps[i] = plants.Plant{Name: fmt.Sprintf("plant-%06d", i), Tag: tag, Readers: []string{"*"}}
	}
	c, err := plants.NewCatalog(ps)
	if err != nil {
		t.Fatal(err)
	}
	if err := postgres.Import(t.Context(), dsn, c, false); err != nil {
		t.Fatal(err)
	}
	px := pgtest.NewProxy(t, pgtest.ServerAddr(t, dsn))
	s := openStore(t, pgtest.WithHost(t, dsn, px.Addr()), postgres.Options{MaxConns: 1})
	// Connect first, so the count below is the query's alone.
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := px.FromServer.Load()
	var atFirst int64 = -1
	count := 0
	for _, err := range s.List(t.Context(), starQuery) {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if count == 0 {
			atFirst = px.FromServer.Load() - before
		}
		count++
	}
	total := px.FromServer.Load() - before
	if count != n {
		t.Fatalf("List yielded %d plants, want %d", count, n)
	}
	t.Logf("first plant after %d of %d bytes", atFirst, total)
	// Socket buffers hold a few MB at most; a store that reads everything
	// before yielding would show the whole result (over 30 MB) here.
	if atFirst > total/3 {
		t.Errorf("at the first plant %d of %d result bytes had left the server, want at most a third", atFirst, total)
	}
}

// TestListPrincipalsThatReadNothing lists for a caller with many groups
// that no plant names, which the store then remembers and leaves out of
// its next queries: every answer must still be the database's at the time
// of the request, whether an import gives those groups plants, replaces
// the catalog, or the tables are changed by hand (seen at the next poll).
func TestListPrincipalsThatReadNothing(t *testing.T) {
	t.Parallel()
	dsn := migrated(t)
	if err := postgres.Import(t.Context(), dsn, storetest.Catalog(t, `[{"id": "a", "name": "Aloe", "readers": ["*"]}]`), false); err != nil {
		t.Fatal(err)
	}
	const poll = 300 * time.Millisecond
	reg := prometheus.NewPedanticRegistry()
	s, err := postgres.Open(t.Context(), dsn, postgres.Options{Poll: poll}, plants.NewMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	groups := make([]string, 40)
	for i := range groups {
		groups[i] = fmt.Sprintf("g%02d", i)
	}
	caller := plants.Caller{Subject: "u", Groups: groups}
	check := func(step string, want ...string) {
		t.Helper()
		for _, limit := range []int{10, 1, plants.NoLimit} {
			for round := range 2 { // the second round runs on what the first taught the store
				got, err := collect(t, s, plants.Query{Caller: caller, Limit: limit})
				w := want
				if limit >= 0 {
					w = want[:min(limit, len(want))]
				}
				if err != nil || !slices.Equal(storetest.Names(got), w) {
					t.Errorf("%s, limit %d, round %d: List = %q, %v; want %q", step, limit, round, storetest.Names(got), err, w)
				}
			}
		}
	}
	check("no group reads anything", "Aloe")
	if err := postgres.Import(t.Context(), dsn, storetest.Catalog(t, `[{"id": "b", "name": "Basil", "readers": ["group:g07"]}]`), false); err != nil {
		t.Fatal(err)
	}
	check("an import gave g07 a plant", "Aloe", "Basil")
	if err := postgres.Import(t.Context(), dsn, storetest.Catalog(t, `[{"id": "c", "name": "Cress", "readers": ["group:g31", "group:g07"]}, {"id": "d", "name": "Dill", "readers": ["group:g12"]}]`), true); err != nil {
		t.Fatal(err)
	}
	check("a replacing import", "Cress", "Dill")

	// By hand, without the version an import raises: the store trusts what
	// it learned until its next poll.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `INSERT INTO plant_readers (principal, name, plant_id) VALUES ('group:g20', 'Endive', 'e')`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, poll+2*time.Second, "a plant added by hand, after a poll", func() bool {
		got, err := collect(t, s, plants.Query{Caller: caller, Limit: 10})
		return err == nil && slices.Equal(storetest.Names(got), []string{"Cress", "Dill", "Endive"})
	})
	check("after the poll", "Cress", "Dill", "Endive")
	if got := metricstest.Sum(t, reg, "plantstore_catalog_plants", nil); got != 2 {
		t.Errorf("plantstore_catalog_plants = %v; want 2 (the count of the last import)", got)
	}
}

// TestListObservesDuration checks that each listing is timed once in
// plantstore_store_request_duration_seconds{store="postgres"}, under
// result="error" when the database fails it.
func TestListObservesDuration(t *testing.T) {
	t.Parallel()
	dsn := migrated(t)
	if err := postgres.Import(t.Context(), dsn, storetest.Catalog(t, `[{"id": "a", "name": "Aloe", "readers": ["*"]}]`), false); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	s, err := postgres.Open(t.Context(), dsn, postgres.Options{}, plants.NewMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	count := func(result string) float64 {
		return metricstest.Sum(t, reg, "plantstore_store_request_duration_seconds", map[string]string{"store": "postgres", "result": result})
	}
	q := plants.Query{Caller: plants.Caller{Subject: "u"}, Limit: plants.NoLimit}
	for range 2 {
		if got, err := collect(t, s, q); err != nil || len(got) != 1 {
			t.Fatalf("List = %v, %v; want Aloe", got, err)
		}
	}
	if ok, failed := count("ok"), count("error"); ok != 2 || failed != 0 {
		t.Fatalf("after two listings: ok %v, error %v; want 2 and 0", ok, failed)
	}

	// The table gone, the next listing fails and is timed as an error.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), "DROP TABLE plant_readers"); err != nil {
		t.Fatal(err)
	}
	if _, err := collect(t, s, q); !errors.Is(err, plants.ErrUnavailable) {
		t.Fatalf("List without its table = %v; want ErrUnavailable", err)
	}
	if ok, failed := count("ok"), count("error"); ok != 2 || failed != 1 {
		t.Errorf("after the failed listing: ok %v, error %v; want 2 and 1", ok, failed)
	}
	for _, store := range []string{plants.StoreMemory, plants.StoreSnapshot} {
		if n := metricstest.Sum(t, reg, "plantstore_store_request_duration_seconds", map[string]string{"store": store}); n != 0 {
			t.Errorf("store=%q observed %v listings; want 0", store, n)
		}
	}
}
