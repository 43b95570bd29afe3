package postgres_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
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
	dsn := migrated(t)
	if err := postgres.Import(t.Context(), dsn, mustCatalog(t, listCatalog), false); err != nil {
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
		name       string
		principals []string
		limit      int
		want       []plants.Plant
	}{
		{"everyone", []string{"*", "group:a", "group:b", "user:ann", "user:bob"}, plants.NoLimit, all},
		{"ann in group a", []string{"*", "user:ann", "group:a"}, plants.NoLimit, pick("0000000002", "a", "b", "s", "u")},
		{"ann limit 2", []string{"*", "user:ann", "group:a"}, 2, pick("0000000002", "a")},
		{"duplicate principals", []string{"group:a", "group:a", "*", "*"}, plants.NoLimit, pick("a", "b", "s", "u")},
		{"only star", []string{"*"}, plants.NoLimit, pick("b", "u")},
		{"unknown principal", []string{"user:nobody"}, plants.NoLimit, nil},
		{"no principals", nil, plants.NoLimit, nil},
		{"limit 0", []string{"*"}, 0, nil},
		{"limit above count", []string{"group:b"}, 10, pick("z", "s")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := plants.Query{Principals: tt.principals, Limit: tt.limit}
			got, err := collect(t, s, q)
			if err != nil {
				t.Fatalf("List(%+v): %v", q, err)
			}
			if !slices.EqualFunc(got, tt.want, samePlant) {
				t.Errorf("List(%+v) = %+v, want %+v", q, got, tt.want)
			}
		})
	}
}

// TestListPrefix checks that every limit gives a prefix of the full list.
func TestListPrefix(t *testing.T) {
	dsn := migrated(t)
	if err := postgres.Import(t.Context(), dsn, mustCatalog(t, listCatalog), false); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dsn, postgres.Options{})
	principals := []string{"*", "group:a", "group:b", "user:ann"}
	full, err := collect(t, s, plants.Query{Principals: principals, Limit: plants.NoLimit})
	if err != nil {
		t.Fatal(err)
	}
	for limit := 0; limit <= len(full)+1; limit++ {
		got, err := collect(t, s, plants.Query{Principals: principals, Limit: limit})
		if err != nil {
			t.Fatalf("List limit %d: %v", limit, err)
		}
		want := full[:min(limit, len(full))]
		if !slices.EqualFunc(got, want, samePlant) {
			t.Errorf("List limit %d = %v, want %v", limit, names(got), names(want))
		}
	}
}

// TestListStopEarly checks that a caller may stop mid-stream and the store
// still answers afterwards on its single connection.
func TestListStopEarly(t *testing.T) {
	dsn := migrated(t)
	if err := postgres.Import(t.Context(), dsn, generatedCatalog(t, 5000, func(int) []string { return []string{"*"} }), false); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dsn, postgres.Options{MaxConns: 1})
	q := plants.Query{Principals: []string{"*"}, Limit: plants.NoLimit}
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

func samePlant(a, b plants.Plant) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Tag == b.Tag
}

// TestListStreams checks that List without a limit streams: when the first
// plant reaches the caller, only a small part of the result has left the
// server, and the rest follows as the caller reads.
func TestListStreams(t *testing.T) {
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
	px := newProxy(t, serverAddr(t, dsn))
	s := openStore(t, withHost(t, dsn, px.addr()), postgres.Options{MaxConns: 1})
	// Connect first, so the count below is the query's alone.
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := px.fromServer.Load()
	var atFirst int64 = -1
	count := 0
	for _, err := range s.List(t.Context(), starQuery) {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if count == 0 {
			atFirst = px.fromServer.Load() - before
		}
		count++
	}
	total := px.fromServer.Load() - before
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
