// Package storetest is the conformance suite of [plants.Store]: the
// ordering, limit and access behaviours of the API and the catalog that
// every store must show alike.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/plants"
)

// Run runs the conformance suite as subtests of t. newStore returns a store
// serving exactly the plants of c (and nothing else), ready to list; it is
// called once per subtest and may use t.Cleanup. Listed plants are compared
// on ID, Name and Tag; a store need not fill in Readers.
func Run(t *testing.T, newStore func(t *testing.T, c *plants.Catalog) plants.Store) {
	t.Run("Order", func(t *testing.T) { testOrder(t, newStore) })
	t.Run("Limit", func(t *testing.T) { testLimit(t, newStore) })
	t.Run("Principals", func(t *testing.T) { testPrincipals(t, newStore) })
	t.Run("EmptyCatalog", func(t *testing.T) { testEmptyCatalog(t, newStore) })
	t.Run("ReadableSeveralWays", func(t *testing.T) { testReadableSeveralWays(t, newStore) })
	t.Run("EarlyBreak", func(t *testing.T) { testEarlyBreak(t, newStore) })
	t.Run("CanceledContext", func(t *testing.T) { testCanceledContext(t, newStore) })
	t.Run("Random", func(t *testing.T) { testRandom(t, newStore) })
	t.Run("After", func(t *testing.T) { testAfter(t, newStore) })
	t.Run("PagingWhileChanging", func(t *testing.T) { testPagingWhileChanging(t, newStore) })
}

// Catalog parses a catalog from JSON, failing the test on error.
func Catalog(t testing.TB, js string) *plants.Catalog {
	t.Helper()
	c, err := plants.ParseCatalog(strings.NewReader(js), "storetest.json")
	if err != nil {
		t.Fatalf("storetest catalog: %v", err)
	}
	return c
}

// list collects the plants a store lists for q, failing the test on an
// error.
func list(t testing.TB, s plants.Store, q plants.Query) []plants.Plant {
	t.Helper()
	got := []plants.Plant{}
	for p, err := range s.List(t.Context(), q) {
		if err != nil {
			t.Fatalf("List(%+v): %v", q, err)
		}
		got = append(got, p)
	}
	return got
}

// want lists c the way the contract says: every visible plant after
// q.After, in the catalog's order, at most limit.
func want(c *plants.Catalog, q plants.Query) []plants.Plant {
	out := []plants.Plant{}
	for _, p := range c.Plants() {
		if q.Limit >= 0 && len(out) == q.Limit {
			break
		}
		if plants.KeyOf(p).Compare(q.After) <= 0 {
			continue
		}
		if plants.Readable(p.Readers, q.Caller) {
			out = append(out, p)
		}
	}
	return out
}

// SamePlant reports whether a and b have the same ID, Name and Tag, all a
// listing shows.
func SamePlant(a, b plants.Plant) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Tag == b.Tag
}

// format renders plants as "id/name/tag" lines for failure messages.
func format(ps []plants.Plant) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "\n\t%q/%q/%q", p.ID, p.Name, p.Tag)
	}
	if b.Len() == 0 {
		return " (none)"
	}
	return b.String()
}

// check compares listed plants with the expected ones on ID, Name and Tag.
func check(t testing.TB, q plants.Query, got, want []plants.Plant) {
	t.Helper()
	if !slices.EqualFunc(got, want, SamePlant) {
		t.Errorf("List(%+v) =%s\nwant%s", q, format(got), format(want))
	}
}

// Names returns the plants' names.
func Names(ps []plants.Plant) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

func testOrder(t *testing.T, newStore func(*testing.T, *plants.Catalog) plants.Store) {
	// Byte order: upper case before lower case, ASCII before any non-ASCII,
	// "a" before "a b" before "ab"; equal names by id, generated ids by
	// position (entry 10 after entry 2, which a numeric-string order would
	// get wrong).
	c := Catalog(t, `[
		{"name": "tie", "tag": "pos0", "readers": ["*"]},
		{"name": "ébène", "readers": ["*"]},
		{"name": "tie", "tag": "pos2", "readers": ["*"]},
		{"name": "zebra", "readers": ["*"]},
		{"name": "Zebra", "readers": ["*"]},
		{"id": "b", "name": "tie", "tag": "id-b", "readers": ["*"]},
		{"id": "B", "name": "tie", "tag": "id-B", "readers": ["*"]},
		{"name": "a b", "readers": ["*"]},
		{"name": "ab", "readers": ["*"]},
		{"name": "a", "readers": ["*"]},
		{"name": "tie", "tag": "pos10", "readers": ["*"]},
		{"name": "Ébène", "readers": ["*"]},
		{"name": "ebene", "readers": ["*"]},
		{"name": "日本", "readers": ["*"]},
		{"name": "ﬀ", "readers": ["*"]},
		{"name": "😀", "readers": ["*"]},
		{"name": "~", "readers": ["*"]},
		{"name": "0", "readers": ["*"]},
		{"name": "aa", "tag": "", "readers": ["*"]}
	]`)
	s := newStore(t, c)
	q := plants.Query{Caller: anyone, Limit: plants.NoLimit}
	got := list(t, s, q)
	wantNames := []string{"0", "Zebra", "a", "a b", "aa", "ab", "ebene", "tie", "tie", "tie", "tie", "tie", "zebra", "~", "Ébène", "ébène", "日本", "ﬀ", "😀"}
	if !slices.Equal(Names(got), wantNames) {
		t.Errorf("List(%+v) names = %q; want %q", q, Names(got), wantNames)
	}
	var tieTags []string
	for _, p := range got {
		if p.Name == "tie" {
			tieTags = append(tieTags, p.Tag)
		}
	}
	// Generated ids are "00000000NN", which sort before "B" and "b".
	if wantTags := []string{"pos0", "pos2", "pos10", "id-B", "id-b"}; !slices.Equal(tieTags, wantTags) {
		t.Errorf("List(%+v) tags of the ties = %q; want %q", q, tieTags, wantTags)
	}
	check(t, q, got, want(c, q))
	for _, p := range got {
		if p.Name == "aa" && p.Tag != "" {
			t.Errorf("plant %q has tag %q; want none", p.Name, p.Tag)
		}
	}
	// Stable across calls.
	check(t, q, list(t, s, q), got)
}

func testLimit(t *testing.T, newStore func(*testing.T, *plants.Catalog) plants.Store) {
	var b strings.Builder
	b.WriteString("[")
	for i := range 30 {
		if i > 0 {
			b.WriteString(",")
		}
		reader := `"*"`
		if i%3 == 0 {
			reader = `"group:g"`
		}
		fmt.Fprintf(&b, `{"name": "plant %02d", "readers": [%s]}`, (i*7)%30, reader)
	}
	b.WriteString("]")
	c := Catalog(t, b.String())
	s := newStore(t, c)
	all := plants.Query{Caller: plants.Caller{Subject: "u"}, Limit: plants.NoLimit}
	full := list(t, s, all)
	if len(full) != 20 {
		t.Fatalf("List(%+v) gave %d plants; want 20", all, len(full))
	}
	tests := []struct {
		name  string
		limit int
		want  int
	}{
		{"zero", 0, 0},
		{"one", 1, 1},
		{"some", 7, 7},
		{"all but one", 19, 19},
		{"exactly all", 20, 20},
		{"one over", 21, 20},
		{"far over", 2147483647, 20},
		{"no limit", plants.NoLimit, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := plants.Query{Caller: all.Caller, Limit: tt.limit}
			got := list(t, s, q)
			if len(got) != tt.want {
				t.Errorf("List(%+v) gave %d plants; want %d", q, len(got), tt.want)
			}
			// limit=N is always a prefix of the full list.
			check(t, q, got, full[:min(tt.want, len(full))])
		})
	}
}

// anyone is a caller who reads only what "*" reads.
var anyone = plants.Caller{Subject: "nobody-in-particular"}

func testPrincipals(t *testing.T, newStore func(*testing.T, *plants.Catalog) plants.Store) {
	c := Catalog(t, `[
		{"id": "open", "name": "open", "readers": ["*"]},
		{"id": "alice", "name": "alice's", "readers": ["user:alice"]},
		{"id": "gardeners", "name": "gardeners'", "readers": ["group:gardeners"]},
		{"id": "admins", "name": "admins'", "readers": ["group:admins"]},
		{"id": "both", "name": "both", "readers": ["user:alice", "group:admins"]},
		{"id": "user-named-like-group", "name": "tricky", "readers": ["user:gardeners"]},
		{"id": "star-user", "name": "star user", "readers": ["user:*"]},
		{"id": "staff-alice", "name": "staff alice", "readers": ["user@staff:alice"]},
		{"id": "staff-any", "name": "staff any", "readers": ["*@staff"]},
		{"id": "staff-gardeners", "name": "staff gardeners", "readers": ["group@staff:gardeners"]}
	]`)
	s := newStore(t, c)
	manyGroups := make([]string, 256)
	for i := range manyGroups {
		manyGroups[i] = fmt.Sprintf("g%03d", i)
	}
	manyGroups[200] = "admins"
	tests := []struct {
		name   string
		caller plants.Caller
		want   []string // ids in order
	}{
		{"anyone", anyone, []string{"open"}},
		{"no subject", plants.Caller{}, []string{"open"}},
		{"user", plants.Caller{Subject: "alice"}, []string{"alice", "both", "open"}},
		{"group", plants.Caller{Subject: "bob", Groups: []string{"gardeners"}}, []string{"gardeners", "open"}},
		{"group is not user", plants.Caller{Subject: "x", Groups: []string{"alice"}}, []string{"open"}},
		{"user is not group", plants.Caller{Subject: "gardeners"}, []string{"open", "user-named-like-group"}},
		{"literal star user", plants.Caller{Subject: "*"}, []string{"open", "star-user"}},
		{"two groups", plants.Caller{Subject: "x", Groups: []string{"gardeners", "admins"}}, []string{"admins", "both", "gardeners", "open"}},
		{"repeated group", plants.Caller{Subject: "alice", Groups: []string{"admins", "admins"}}, []string{"admins", "alice", "both", "open"}},
		{"many groups", plants.Caller{Subject: "x", Groups: manyGroups}, []string{"admins", "both", "open"}},
		{"no role sees everything", plants.Caller{Subject: "x", Groups: []string{"*", "", "**"}}, []string{"open"}},
		{"named issuer: its own principals only", plants.Caller{Issuer: "staff", Subject: "alice"}, []string{"open", "staff-alice", "staff-any"}},
		{"named issuer: groups", plants.Caller{Issuer: "staff", Subject: "bob", Groups: []string{"gardeners"}}, []string{"open", "staff-any", "staff-gardeners"}},
		{"another issuer's alice", plants.Caller{Issuer: "customers", Subject: "alice", Groups: []string{"gardeners", "admins"}}, []string{"open"}},
		{"NUL in subject and group", plants.Caller{Subject: "alice\x00", Groups: []string{"gardeners\x00"}}, []string{"open"}},
		{"NUL alone", plants.Caller{Subject: "\x00", Groups: []string{"\x00", "admins"}}, []string{"admins", "both", "open"}},
		{"invalid UTF-8", plants.Caller{Subject: "\xff", Groups: []string{"gardeners\xc3", "\xed\xa0\x80"}}, []string{"open"}},
		{"control characters and confusables", plants.Caller{Subject: "alice\u200b", Groups: []string{"gardeners\n", "аdmins"}}, []string{"open"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, limit := range []int{plants.NoLimit, 1, 10} {
				q := plants.Query{Caller: tt.caller, Limit: limit}
				got := list(t, s, q)
				var ids []string
				for _, p := range got {
					ids = append(ids, p.ID)
				}
				wantIDs := tt.want
				if limit >= 0 {
					wantIDs = tt.want[:min(limit, len(tt.want))]
				}
				if !slices.Equal(ids, wantIDs) {
					t.Errorf("List(%+v) ids = %q; want %q", q, ids, wantIDs)
				}
				check(t, q, got, want(c, q))
			}
		})
	}
}

func testEmptyCatalog(t *testing.T, newStore func(*testing.T, *plants.Catalog) plants.Store) {
	s := newStore(t, Catalog(t, `[]`))
	for _, limit := range []int{plants.NoLimit, 0, 1, 10} {
		q := plants.Query{Caller: plants.Caller{Subject: "alice", Groups: []string{"g"}}, Limit: limit}
		if got := list(t, s, q); len(got) != 0 {
			t.Errorf("List(%+v) on an empty catalog =%s; want none", q, format(got))
		}
	}
}

func testReadableSeveralWays(t *testing.T, newStore func(*testing.T, *plants.Catalog) plants.Store) {
	c := Catalog(t, `[
		{"id": "1", "name": "a", "readers": ["*", "user:alice", "group:g", "group:h"]},
		{"id": "2", "name": "b", "readers": ["group:h", "user:alice"]},
		{"id": "3", "name": "c", "readers": ["group:g"]},
		{"id": "4", "name": "d", "readers": ["user:alice", "*"]}
	]`)
	s := newStore(t, c)
	for _, limit := range []int{plants.NoLimit, 1, 2, 3, 4, 5} {
		q := plants.Query{Caller: plants.Caller{Subject: "alice", Groups: []string{"g", "h"}}, Limit: limit}
		check(t, q, list(t, s, q), want(c, q))
	}
}

func testEarlyBreak(t *testing.T, newStore func(*testing.T, *plants.Catalog) plants.Store) {
	var b strings.Builder
	b.WriteString("[")
	for i := range 5000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name": "p%05d", "readers": ["*"]}`, i)
	}
	b.WriteString("]")
	c := Catalog(t, b.String())
	s := newStore(t, c)
	q := plants.Query{Caller: anyone, Limit: plants.NoLimit}
	// Many early breaks in a row: a store that leaks a connection or a
	// goroutine per abandoned listing runs out or hangs here.
	for round := range 50 {
		n := 0
		for p, err := range s.List(t.Context(), q) {
			if err != nil {
				t.Fatalf("round %d: List(%+v): %v", round, q, err)
			}
			if want := fmt.Sprintf("p%05d", n); p.Name != want {
				t.Fatalf("round %d: plant %d is %q; want %q", round, n, p.Name, want)
			}
			n++
			if n == 1+round%3 {
				break
			}
		}
	}
	if got := list(t, s, q); len(got) != 5000 {
		t.Errorf("after early breaks, List(%+v) gave %d plants; want 5000", q, len(got))
	}
}

func testCanceledContext(t *testing.T, newStore func(*testing.T, *plants.Catalog) plants.Store) {
	s := newStore(t, Catalog(t, `[{"name": "a", "readers": ["*"]}]`))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var gotErr error
	for _, err := range s.List(ctx, plants.Query{Caller: anyone, Limit: plants.NoLimit}) {
		if err != nil {
			gotErr = err
		}
	}
	if gotErr == nil {
		t.Errorf("List with a canceled context yielded no error; want one")
	}
	if errors.Is(gotErr, plants.ErrUnavailable) {
		t.Errorf("List with a canceled context: %v; want an error that is not ErrUnavailable", gotErr)
	}
}

func testRandom(t *testing.T, newStore func(*testing.T, *plants.Catalog) plants.Store) {
	rng := rand.New(rand.NewPCG(7, 11))
	principals := []string{"*", "user:u1", "user:u2", "user:u3", "group:g1", "group:g2", "group:g3", "group:g4", "*@i", "user@i:u1", "group@i:g1"}
	nameParts := []string{"a", "A", "b", "é", "É", " ", "z", "0", "日"}
	var b strings.Builder
	b.WriteString("[")
	for i := range 2000 {
		if i > 0 {
			b.WriteString(",")
		}
		var name strings.Builder
		for range 1 + rng.IntN(3) {
			name.WriteString(nameParts[rng.IntN(len(nameParts))])
		}
		var readers []string
		for _, p := range principals {
			if rng.IntN(6) == 0 {
				readers = append(readers, fmt.Sprintf("%q", p))
			}
		}
		if len(readers) == 0 {
			readers = append(readers, `"user:nobody"`)
		}
		id := ""
		if rng.IntN(2) == 0 {
			id = fmt.Sprintf(`"id": "x%d", `, rng.IntN(1_000_000)*10_000+i)
		}
		tag := ""
		if rng.IntN(2) == 0 {
			tag = fmt.Sprintf(`, "tag": "t%d"`, rng.IntN(5))
		}
		fmt.Fprintf(&b, `{%s"name": %q%s, "readers": [%s]}`, id, name.String(), tag, strings.Join(readers, ", "))
	}
	b.WriteString("]")
	c := Catalog(t, b.String())
	s := newStore(t, c)
	callers := []plants.Caller{
		{Subject: "u1"},
		{Subject: "u2", Groups: []string{"g1", "g2"}},
		{Subject: "u3", Groups: []string{"g1", "g2", "g3", "g4"}},
		{Subject: "u9", Groups: []string{"g4"}},
		{Issuer: "i", Subject: "u1", Groups: []string{"g1", "g2"}},
		{Issuer: "j", Subject: "u1", Groups: []string{"g1"}},
	}
	for i, caller := range callers {
		full := plants.Query{Caller: caller, Limit: plants.NoLimit}
		all := list(t, s, full)
		check(t, full, all, want(c, full))
		for _, limit := range []int{0, 1, 2, 10, 99, 100, 101, len(all) - 1, len(all), len(all) + 1} {
			if limit < 0 {
				continue
			}
			q := plants.Query{Caller: caller, Limit: limit}
			got := list(t, s, q)
			if len(got) != min(limit, len(all)) {
				t.Errorf("caller %d: List(limit=%d) gave %d plants; want %d", i, limit, len(got), min(limit, len(all)))
			}
			check(t, q, got, all[:len(got)])
		}
	}
}
