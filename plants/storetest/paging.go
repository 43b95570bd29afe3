package storetest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/plants"
)

// testAfter: a listing after a key starts strictly after it, in byte order
// of names and then ids (generated ids by position), whether the key is a
// plant's or falls between plants, with and without a limit.
func testAfter(t *testing.T, newStore func(*testing.T, *plants.Catalog) plants.Store) {
	c := Catalog(t, `[
		{"name": "tie", "tag": "pos0", "readers": ["*"]},
		{"name": "ébène", "readers": ["*"]},
		{"name": "tie", "tag": "pos2", "readers": ["*"]},
		{"name": "Zebra", "readers": ["*"]},
		{"id": "b", "name": "tie", "readers": ["*"]},
		{"id": "B", "name": "tie", "readers": ["group:g"]},
		{"name": "a b", "readers": ["*"]},
		{"name": "ab", "readers": ["group:g"]},
		{"name": "a", "readers": ["*"]},
		{"name": "tie", "tag": "pos9", "readers": ["*"]},
		{"name": "tie", "tag": "pos10", "readers": ["*"]},
		{"name": "😀", "readers": ["*"]}
	]`)
	s := newStore(t, c)
	all := c.Plants()
	var keys []plants.Key
	for _, p := range all {
		k := plants.KeyOf(p)
		keys = append(keys, k,
			plants.Key{Name: k.Name, ID: k.ID + "\x01"},  // just after the plant
			plants.Key{Name: k.Name + "\x01", ID: "zzz"}, // after every plant of the name
			plants.Key{Name: k.Name, ID: "0"},            // before every id of the name but "0"
		)
	}
	keys = append(keys, plants.Key{Name: "tie", ID: "0000000005"}, plants.Key{Name: "\U0010FFFF", ID: "x"}, plants.Key{Name: "A", ID: "A"})
	for _, caller := range []plants.Caller{{Subject: "u"}, {Subject: "u", Groups: []string{"g"}}} {
		for _, k := range keys {
			for _, limit := range []int{plants.NoLimit, 1, 2, 100} {
				q := plants.Query{Caller: caller, Limit: limit, After: k}
				check(t, q, list(t, s, q), want(c, q))
			}
		}
	}
}

// testPagingWhileChanging walks every page for every sample user, with
// plants added and removed between pages, in pages of a few sizes: each
// page is what its store holds after the cursor (the last page's last
// plant), so the walk lists no plant twice and none out of order, never a
// plant added behind the cursor, and every plant that every version of the
// catalog holds exactly once. Each version of the catalog is its own store,
// as after an import a replica serves the next one: the cursor is the same
// everywhere.
func testPagingWhileChanging(t *testing.T, newStore func(*testing.T, *plants.Catalog) plants.Store) {
	const versions = 4
	catalogs := []*plants.Catalog{plants.SampleCatalog()}
	for v := 1; v < versions; v++ {
		catalogs = append(catalogs, changed(t, catalogs[v-1], v))
	}
	stores := make([]plants.Store, versions)
	for v, c := range catalogs {
		stores[v] = newStore(t, c)
	}
	// In every version: the plants every version holds, by id.
	inAll := map[string]int{}
	for _, c := range catalogs {
		for _, p := range c.Plants() {
			inAll[p.ID+"\x00"+p.Name]++
		}
	}
	for _, caller := range plants.SampleUsers() {
		for _, limit := range []int{1, 2, 3, 5} {
			var (
				walked []plants.Plant
				after  plants.Key
			)
			for page := 0; ; page++ {
				v := min(page, versions-1)
				q := plants.Query{Caller: caller, Limit: limit, After: after}
				got := list(t, stores[v], q)
				check(t, q, got, want(catalogs[v], q))
				walked = append(walked, got...)
				if len(got) < limit {
					break
				}
				if page > 1000 {
					t.Fatalf("%s, limit %d: no end to the pages", caller.Subject, limit)
				}
				after = plants.KeyOf(got[len(got)-1])
			}
			what := fmt.Sprintf("%s, limit %d", caller.Subject, limit)
			for i := 1; i < len(walked); i++ {
				if plants.KeyOf(walked[i-1]).Compare(plants.KeyOf(walked[i])) >= 0 {
					t.Errorf("%s: %q/%q then %q/%q: out of order or repeated", what, walked[i-1].Name, walked[i-1].ID, walked[i].Name, walked[i].ID)
				}
			}
			seen := map[string]bool{}
			for _, p := range walked {
				seen[p.ID+"\x00"+p.Name] = true
				if strings.HasPrefix(p.Name, "A0 ") {
					t.Errorf("%s: %q, added behind the cursor, was listed", what, p.Name)
				}
			}
			for _, p := range catalogs[0].Plants() {
				if inAll[p.ID+"\x00"+p.Name] == versions && plants.Readable(p.Readers, caller) && !seen[p.ID+"\x00"+p.Name] {
					t.Errorf("%s: %q/%q, in every version, was never listed", what, p.Name, p.ID)
				}
			}
		}
	}
}

// changed returns the catalog of version v, made from c: every fifth plant
// (shifted by v) removed; for every third one a plant of the same name and
// a larger id (a tie the cursor must order by id) and one named after it;
// and one plant that sorts before every other ("A0 …"), which a walk past
// its first page must never see.
func changed(t *testing.T, c *plants.Catalog, v int) *plants.Catalog {
	t.Helper()
	readers := [][]string{{"*"}, {"group:gardeners"}, {"user:bob"}, {"group:botanists"}, {"user:alice", "user:carol"}}
	var ps []plants.Plant
	for i, p := range c.Plants() {
		if (i+v)%5 != 0 {
			ps = append(ps, p)
		}
		if i%3 == 0 {
			r := readers[(i+v)%len(readers)]
			ps = append(ps,
				plants.Plant{ID: fmt.Sprintf("%s~%d", p.ID, v), Name: p.Name, Tag: "tie", Readers: r},
				plants.Plant{ID: fmt.Sprintf("next-%d-%d", v, i), Name: fmt.Sprintf("%s %d", p.Name, v), Readers: r})
		}
	}
	ps = append(ps, plants.Plant{ID: fmt.Sprintf("first-%d", v), Name: fmt.Sprintf("A0 %d", v), Readers: []string{"*"}})
	next, err := plants.NewCatalog(ps)
	if err != nil {
		t.Fatalf("catalog version %d: %v", v, err)
	}
	return next
}
