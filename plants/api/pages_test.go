package api_test

import (
	"context"
	"iter"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"

	"github.com/plantstore/plantstore/plants"
)

// listOnly hides every method of a store but List: the handler then lists
// for every request.
type listOnly struct{ plants.Store }

// countingStore is a paged store that counts its listings.
type countingStore struct {
	*plants.MemoryStore
	lists atomic.Int64
}

func (s *countingStore) List(ctx context.Context, q plants.Query) iter.Seq2[plants.Plant, error] {
	s.lists.Add(1)
	return s.MemoryStore.List(ctx, q)
}

func pagesCatalog(t *testing.T, extra string) *plants.Catalog {
	t.Helper()
	ps := []plants.Plant{
		{Name: "Aloe", Tag: "succulent", Readers: []string{"*"}},
		{Name: "Basil", Readers: []string{"group:cooks"}},
		{Name: "Cactus", Tag: "succulent", Readers: []string{"user:alice"}},
		{Name: "Dill", Readers: []string{"*"}},
		{Name: "Fern <&>", Tag: "fern", Readers: []string{"*", "group:cooks"}},
		{Name: "Ivy", Readers: []string{"*"}},
	}
	if extra != "" {
		ps = append(ps, plants.Plant{Name: extra, Readers: []string{"*"}})
	}
	c, err := plants.NewCatalog(ps)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPageCache serves every page of several callers twice from a paged
// store and compares each answer with the one of a store that lists every
// time: the same status, body and Link, while the second round lists
// nothing. Callers whose principals name the same plants share pages;
// the others get their own.
func TestPageCache(t *testing.T) {
	mem := plants.NewMemoryStore(pagesCatalog(t, ""), nil)
	store := &countingStore{MemoryStore: mem}
	cached := newTestAPI(t, store)
	oracle := newTestAPI(t, listOnly{mem})

	callers := map[string][]string{
		"bob":         as("bob"),
		"carol":       as("carol"), // bob's pages: no plant names either
		"alice":       as("alice"),
		"bob (cooks)": as("bob", "cooks"),
	}
	// Every page of each caller at limit 2, then the whole list.
	pages := func(a *testAPI, who []string) (targets []string, got []response) {
		target := "/plants?limit=2"
		for target != "" {
			r := a.do(t, "GET", target, who...)
			targets, got = append(targets, target), append(got, r)
			target = ""
			if l := r.header.Get("Link"); l != "" {
				u, err := url.Parse(strings.TrimSuffix(strings.TrimPrefix(l, "<"), `>; rel="next"`))
				if err != nil {
					t.Fatalf("Link %q: %v", l, err)
				}
				target = u.RequestURI()
			}
		}
		r := a.do(t, "GET", "/plants", who...)
		return append(targets, "/plants"), append(got, r)
	}
	seen := map[string]string{}
	for round := range 2 {
		before := store.lists.Load()
		for name, who := range callers {
			targets, got := pages(cached, who)
			_, want := pages(oracle, who)
			if len(got) != len(want) {
				t.Fatalf("round %d, %s: %d pages; want %d", round, name, len(got), len(want))
			}
			var all []string
			for i := range got {
				if got[i].status != 200 || string(got[i].body) != string(want[i].body) || got[i].header.Get("Link") != want[i].header.Get("Link") {
					t.Errorf("round %d, %s, %s: %d %s Link %q; want 200 %s Link %q", round, name, targets[i],
						got[i].status, got[i].body, got[i].header.Get("Link"), want[i].body, want[i].header.Get("Link"))
				}
				all = append(all, string(got[i].body))
			}
			seen[name] = strings.Join(all, " ")
		}
		if lists := store.lists.Load() - before; round == 1 && lists != 0 {
			t.Errorf("second round: %d listings; want every page from the cache", lists)
		}
	}
	if seen["bob"] != seen["carol"] || seen["bob"] == seen["alice"] || seen["bob"] == seen["bob (cooks)"] {
		t.Errorf("pages by caller: %q", seen)
	}
	if !strings.Contains(seen["alice"], "Cactus") || strings.Contains(seen["bob"], "Cactus") {
		t.Errorf("alice's plant: alice sees %s, bob sees %s", seen["alice"], seen["bob"])
	}
}

// TestPageCacheReload checks that a page made before a new catalog is not
// served after it, and that HEAD is never answered from a GET's page
// without its own headers.
func TestPageCacheReload(t *testing.T) {
	mem := plants.NewMemoryStore(pagesCatalog(t, ""), nil)
	a := newTestAPI(t, mem)
	first := a.do(t, "GET", "/plants", as("bob")...)
	a.do(t, "GET", "/plants", as("bob")...)
	mem.Replace(pagesCatalog(t, "Basil 2"))
	after := a.do(t, "GET", "/plants", as("bob")...)
	if !strings.Contains(string(after.body), "Basil 2") || string(after.body) == string(first.body) {
		t.Errorf("after the reload: %s; want the new catalog's plant (before: %s)", after.body, first.body)
	}
	head := a.do(t, "HEAD", "/plants?limit=1", as("bob")...)
	get := a.do(t, "GET", "/plants?limit=1", as("bob")...)
	if len(head.body) != 0 || head.header.Get("Link") != get.header.Get("Link") || head.header.Get("Link") == "" {
		t.Errorf("HEAD: body %q Link %q; GET Link %q", head.body, head.header.Get("Link"), get.header.Get("Link"))
	}
}

// BenchmarkListHandlerCached is BenchmarkListHandler's first page of 10
// plants with the page cache: the request after the first is a lookup.
func BenchmarkListHandlerCached(b *testing.B) {
	e := newEngine(plants.NewMemoryStore(newBenchCatalog(b, 1000), nil), zap.NewNop(), nil)
	req := httptest.NewRequest("GET", "/plants?limit=10", nil)
	req.Header.Set(hdrSub, "u")
	b.ReportAllocs()
	for b.Loop() {
		e.ServeHTTP(&discard{h: make(map[string][]string, 4)}, req)
	}
}

// TestPageCacheConcurrent serves callers from many goroutines while the
// catalog is replaced back and forth: every answer is one of the two
// catalogs' pages for that caller, never another caller's (run it with
// -race too).
func TestPageCacheConcurrent(t *testing.T) {
	v1, v2 := pagesCatalog(t, ""), pagesCatalog(t, "Basil 2")
	want := map[string][2]string{}
	callers := map[string][]string{"bob": as("bob"), "alice": as("alice"), "cooks": as("bob", "cooks")}
	for name, who := range callers {
		a := newTestAPI(t, listOnly{plants.NewMemoryStore(v1, nil)})
		b := newTestAPI(t, listOnly{plants.NewMemoryStore(v2, nil)})
		want[name] = [2]string{string(a.do(t, "GET", "/plants?limit=3", who...).body), string(b.do(t, "GET", "/plants?limit=3", who...).body)}
	}
	mem := plants.NewMemoryStore(v1, nil)
	a := newTestAPI(t, mem)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			mem.Replace([]*plants.Catalog{v1, v2}[i%2])
		}
	}()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				name := []string{"bob", "alice", "cooks"}[(g+i)%3]
				got := string(a.do(t, "GET", "/plants?limit=3", callers[name]...).body)
				if got != want[name][0] && got != want[name][1] {
					t.Errorf("%s: %s; want %s or %s", name, got, want[name][0], want[name][1])
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-done
}
