package plants

import (
	"context"
	"fmt"
	"iter"
	"math"
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
}

var _ Store = (*MemoryStore)(nil)

// memorySnapshot is one catalog with its index.
type memorySnapshot struct {
	catalog *Catalog
	// postings maps a principal to the positions, ascending and without
	// repeats, of the plants it reads.
	postings map[string][]int32
}

// NewMemoryStore returns a store serving c, which may be nil: the store then
// answers [ErrUnavailable] until [MemoryStore.Replace] gives it a catalog. m
// may be nil.
func NewMemoryStore(c *Catalog, m *Metrics) *MemoryStore {
	s := &MemoryStore{metrics: m}
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
	postings := make(map[string][]int32)
	for i := range c.entries {
		for _, r := range c.readerSets[c.entries[i].readers] { // unique within a plant
			postings[r] = append(postings[r], int32(i))
		}
	}
	s.snap.Store(&memorySnapshot{catalog: c, postings: postings})
	s.metrics.SetCatalogPlants(c.Len())
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

// List yields the plants of the current catalog visible to q.Principals, in
// the catalog's order, at most q.Limit of them (any negative Limit means no
// bound). Unknown principals contribute nothing. Each iteration reads the
// catalog current when it starts. It yields an error wrapping
// [ErrUnavailable] when no catalog is loaded, and ctx's error when ctx is
// done (checked at the start and every few thousand plants). Each
// iteration's duration is recorded as plantstore_store_request_duration_seconds{store="memory"}.
func (s *MemoryStore) List(ctx context.Context, q Query) iter.Seq2[Plant, error] {
	return func(yield func(Plant, error) bool) {
		start, result := time.Now(), ResultOK
		defer func() { s.metrics.ObserveStore(StoreMemory, result, time.Since(start)) }()
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
			heads [8][]int32 // enough for most callers without allocating
			m     = merger{lists: heads[:0], last: -1}
		)
		for _, p := range q.Principals {
			if list := snap.postings[p]; len(list) > 0 {
				m.lists = append(m.lists, list)
			}
		}
		m.init()
		catalog := snap.catalog
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
// without repeats. lists is a binary min-heap ordered by each list's first
// element; no list in it is empty.
type merger struct {
	lists [][]int32
	last  int32
}

func (m *merger) init() {
	for i := len(m.lists)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
}

// next returns the next position, and false when the lists are exhausted.
func (m *merger) next() (int32, bool) {
	for len(m.lists) > 0 {
		top := m.lists[0]
		pos := top[0]
		if len(top) > 1 {
			m.lists[0] = top[1:]
		} else {
			last := len(m.lists) - 1
			m.lists[0] = m.lists[last]
			m.lists = m.lists[:last]
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
	h := m.lists
	for {
		least := i
		if l := 2*i + 1; l < len(h) && h[l][0] < h[least][0] {
			least = l
		}
		if r := 2*i + 2; r < len(h) && h[r][0] < h[least][0] {
			least = r
		}
		if least == i {
			return
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}
