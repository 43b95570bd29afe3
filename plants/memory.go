package plants

import (
	"context"
	"encoding/binary"
	"fmt"
	"iter"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync/atomic"
	"time"
)

// A MemoryStore serves a [Catalog] from memory. [MemoryStore.Replace] swaps
// the catalog atomically (the SIGHUP reload): a listing under way finishes
// on the catalog it started with. A MemoryStore is safe for concurrent use.
//
// The store indexes the catalog by principal: for each principal, the
// ascending positions of the plants it may read in the sorted catalog. A
// listing merges the lists of the caller's principals, so a listing of N
// plants for a caller with k principals costs O(N log k), whatever the
// size of the catalog.
type MemoryStore struct {
	snap    atomic.Pointer[memorySnapshot]
	metrics *Metrics
	store   string // the store label of its listings
}

var _ Store = (*MemoryStore)(nil)

// memorySnapshot is one catalog with its index.
type memorySnapshot struct {
	// gen tells snapshots apart, in every store of the process: no two
	// share one.
	gen     uint64
	catalog *Catalog
	// postings maps a principal to the positions, ascending and without
	// repeats, of the plants it reads.
	postings map[string][]int32
}

// NewMemoryStore returns a store serving c, which may be nil: the store then
// answers [ErrUnavailable] until [MemoryStore.Replace] gives it a catalog. m
// may be nil.
func NewMemoryStore(c *Catalog, m *Metrics) *MemoryStore {
	return NewMemoryStoreAs(c, m, StoreMemory)
}

// NewMemoryStoreAs is NewMemoryStore for a store that serves from this
// index under another name (the PostgreSQL snapshot): its listings are
// recorded with the store label store.
func NewMemoryStoreAs(c *Catalog, m *Metrics, store string) *MemoryStore {
	s := &MemoryStore{metrics: m, store: store}
	s.Replace(c)
	return s
}

// Replace makes s serve c from now on, and sets plantstore_catalog_plants.
// The index is built before the swap, so requests never wait for it. A nil c
// unloads the catalog. Replace panics if c has more than 2^31-1 plants.
func (s *MemoryStore) Replace(c *Catalog) {
	if c == nil {
		s.snap.Store(nil)
		s.metrics.SetCatalogPlants(0)
		return
	}
	if c.Len() > math.MaxInt32 {
		panic("plants: catalog too large for the in-memory index")
	}
	old := s.snap.Swap(&memorySnapshot{gen: generations.Add(1), catalog: c, postings: postingsOf(c)})
	s.metrics.SetCatalogPlants(c.Len())
	if old != nil && old.catalog.Len() >= collectAfter {
		// The catalog just replaced is garbage, as big as the one serving.
		// A collection now frees it before the garbage of requests piles
		// up above both: the heap's goal was set while the two were live,
		// and without it the peak memory of a reload grew up to twice that
		// of serving.
		old = nil
		runtime.GC()
	}
}

// generations numbers the snapshots of every MemoryStore.
var generations atomic.Uint64

// PageKey appends the key of c's listings (see [PagedStore]): the
// snapshot's generation, then each of c's principals that reads any plant
// in it, NUL-terminated (a principal holds no NUL). Callers who differ
// only by principals no plant names (most subjects, say) share a key.
func (s *MemoryStore) PageKey(dst []byte, c Caller) ([]byte, bool) {
	snap := s.snap.Load()
	if snap == nil {
		return dst, false
	}
	dst = binary.LittleEndian.AppendUint64(dst, snap.gen)
	var key [128]byte
	for i := 0; ; i++ {
		p, ok, more := c.principal(i, key[:0])
		if !more {
			return dst, true
		}
		if list := snap.postings[string(p)]; ok && len(list) > 0 {
			dst = append(append(dst, p...), 0)
		}
	}
}

// Served records a listing answered from a page of [MemoryStore.PageKey],
// as taking no time: a map lookup, under the smallest bucket.
func (s *MemoryStore) Served() {
	s.metrics.ObserveStore(s.store, ResultOK, 0)
}

var _ PagedStore = (*MemoryStore)(nil)

// collectAfter is the size of a replaced catalog, in plants, from which
// Replace collects it at once: some tens of MiB. A smaller one is left to
// the collector's pace.
const collectAfter = 1 << 16

// postingsOf returns the index of c: for each principal, the positions of
// the plants it reads. Each principal is looked up once per reader list,
// not once per plant, and every list is made at its final size in one
// array (counted first): growing them one position at a time cost as much
// garbage again as the index, at the moment a reload already holds two
// catalogs.
func postingsOf(c *Catalog) map[string][]int32 {
	perSet := make([]int, len(c.readerSets))
	for i := range c.entries {
		perSet[c.entries[i].readers]++
	}
	inSets := 0
	for _, set := range c.readerSets {
		inSets += len(set)
	}
	// Each principal gets a number; setPrincipals[si] are the numbers of
	// list si, stored in one array.
	number := make(map[string]int32)
	var names []string
	var counts []int
	setStart := make([]int, len(c.readerSets)+1)
	setPrincipals := make([]int32, 0, inSets)
	for si, set := range c.readerSets {
		for _, r := range set {
			n, ok := number[r]
			if !ok {
				n = int32(len(names))
				number[r] = n
				names = append(names, r)
				counts = append(counts, 0)
			}
			counts[n] += perSet[si]
			setPrincipals = append(setPrincipals, n)
		}
		setStart[si+1] = len(setPrincipals)
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	all := make([]int32, total)
	lists := make([][]int32, len(names))
	for n, k := range counts {
		lists[n], all = all[:0:k], all[k:]
	}
	for i := range c.entries {
		si := c.entries[i].readers
		for _, n := range setPrincipals[setStart[si]:setStart[si+1]] { // unique within a plant
			lists[n] = append(lists[n], int32(i))
		}
	}
	postings := make(map[string][]int32, len(names))
	for n, name := range names {
		if len(lists[n]) > 0 {
			postings[name] = lists[n]
		}
	}
	return postings
}

// ReloadFile loads the catalog file at path ([LoadCatalogFile]) and makes
// s serve it, as Replace does, recording the reload in
// plantstore_catalog_reloads_total and
// plantstore_catalog_reload_duration_seconds. A file that does not load is
// refused: s keeps serving what it served, and the [*CatalogError] is
// returned.
func (s *MemoryStore) ReloadFile(path string) (*Catalog, error) {
	start := time.Now()
	c, err := LoadCatalogFile(path)
	if err == nil {
		s.Replace(c)
	}
	s.metrics.ObserveReload(err == nil, time.Since(start))
	return c, err
}

// Catalog returns the catalog s serves, or nil when it has none.
func (s *MemoryStore) Catalog() *Catalog {
	if snap := s.snap.Load(); snap != nil {
		return snap.catalog
	}
	return nil
}

// Ready returns nil when s has a catalog, and an error wrapping
// [ErrUnavailable] otherwise. It is the store's readiness check.
func (s *MemoryStore) Ready(ctx context.Context) error {
	if s.snap.Load() == nil {
		return fmt.Errorf("memory store: %w: no catalog loaded", ErrUnavailable)
	}
	return nil
}

// ctxCheckEvery is how many plants a listing yields between checks of its
// context.
const ctxCheckEvery = 4096

// List yields the plants of the current catalog q.Caller may read, in the
// catalog's order, after q.After (found by binary searches, in the catalog
// and in each principal's list), at most q.Limit of them (any negative Limit means no
// bound). Principals that no plant names contribute nothing. Each iteration reads the
// catalog current when it starts. It yields an error wrapping
// [ErrUnavailable] when no catalog is loaded, and ctx's error when ctx is
// done (checked at the start and every few thousand plants). Each
// iteration's duration is recorded as
// plantstore_store_request_duration_seconds{store="memory"} (or the name
// given to [NewMemoryStoreAs]).
func (s *MemoryStore) List(ctx context.Context, q Query) iter.Seq2[Plant, error] {
	return func(yield func(Plant, error) bool) {
		start, result := time.Now(), ResultOK
		defer func() { s.metrics.ObserveStore(s.store, result, time.Since(start)) }()
		snap := s.snap.Load()
		if snap == nil {
			result = ResultError
			yield(Plant{}, fmt.Errorf("list plants: %w: no catalog loaded", ErrUnavailable))
			return
		}
		if err := ctx.Err(); err != nil {
			result = ResultError
			yield(Plant{}, fmt.Errorf("list plants: %w", err))
			return
		}
		if q.Limit == 0 {
			return
		}
		var (
			// Enough for most callers without allocating.
			heads [8][]int32
			at    [8]int32
			order [8]int32
			m     = merger{lists: heads[:0], at: at[:0], heap: order[:0], last: -1}
			key   [128]byte
		)
		for i := 0; ; i++ {
			p, ok, more := q.Caller.principal(i, key[:0])
			if !more {
				break
			}
			if list := snap.postings[string(p)]; ok && len(list) > 0 {
				m.lists = append(m.lists, list)
				m.at = append(m.at, 0)
			}
		}
		catalog := snap.catalog
		if !q.After.IsZero() {
			m.seek(int32(catalog.after(q.After)))
		}
		for j, list := range m.lists {
			if int(m.at[j]) < len(list) {
				m.heap = append(m.heap, int32(j))
			}
		}
		m.init()
		for n := 1; ; n++ {
			pos, ok := m.next()
			if !ok || !yield(catalog.at(int(pos)), nil) || n == q.Limit {
				return
			}
			if n%ctxCheckEvery == 0 {
				if err := ctx.Err(); err != nil {
					result = ResultError
					yield(Plant{}, fmt.Errorf("list plants: %w", err))
					return
				}
			}
		}
	}
}

// merger merges ascending lists of positions into one ascending sequence
// without repeats. lists are never written once added: the merge moves
// the cursors in at and reorders the list numbers in heap, a binary
// min-heap of the lists not exhausted, ordered by each one's position at
// its cursor. Only integers are stored as it goes, so the arrays behind
// the three slices can live on the caller's stack.
type merger struct {
	lists [][]int32
	at    []int32 // at[j]: the cursor in lists[j]
	heap  []int32 // numbers j of the lists with positions left
	last  int32
}

// seek moves every list's cursor past the positions before pos, by a
// binary search in each: a page deep in a long list costs what the first
// one does. It is called before init.
func (m *merger) seek(pos int32) {
	for j, list := range m.lists {
		i, _ := slices.BinarySearch(list, pos)
		m.at[j] = int32(i)
	}
}

// init orders the heap. The caller fills lists, at and heap itself: an
// append through the receiver would make their arrays escape.
func (m *merger) init() {
	for i := len(m.heap)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
}

// head returns the position at the cursor of list j.
func (m *merger) head(j int32) int32 { return m.lists[j][m.at[j]] }

// next returns the next position, and false when the lists are exhausted.
func (m *merger) next() (int32, bool) {
	for len(m.heap) > 0 {
		top := m.heap[0]
		pos := m.head(top)
		if m.at[top]++; int(m.at[top]) == len(m.lists[top]) {
			last := len(m.heap) - 1
			m.heap[0] = m.heap[last]
			m.heap = m.heap[:last]
		}
		m.down(0)
		if pos != m.last { // a plant several principals read comes once
			m.last = pos
			return pos, true
		}
	}
	return 0, false
}

// down restores the heap order below i.
func (m *merger) down(i int) {
	h := m.heap
	for {
		least := i
		if l := 2*i + 1; l < len(h) && m.head(h[l]) < m.head(h[least]) {
			least = l
		}
		if r := 2*i + 2; r < len(h) && m.head(h[r]) < m.head(h[least]) {
			least = r
		}
		if least == i {
			return
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}

// after returns the position of the first plant of c whose key sorts after
// k, or c.Len() when none does.
func (c *Catalog) after(k Key) int {
	return sort.Search(len(c.entries), func(i int) bool {
		e := &c.entries[i]
		return c.keyOf(*e).Compare(k) > 0
	})
}
