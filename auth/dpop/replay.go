package dpop

import (
	"hash/maphash"
	"sync"
	"time"
)

// A ReplayCache remembers the DPoP proofs accepted within their window, so
// that none is accepted twice on this replica. It never forgets a proof
// before its window ends, since a forgotten proof could be replayed: its
// memory is bounded by refusing new proofs instead, and it shares its room
// fairly. A proof is refused room when the cache is full, or when its
// caller (issuer and subject) or its client key already holds as many
// proofs as the cache has free places. So one caller, with any number of
// keys, or one key, with any number of callers, holds at most half of it;
// k of them flooding at once leave a place free for every k they hold
// (each holds at most maxSize/(k+1)); and a caller holding fewer proofs
// than there are free places, one that has none among them, is never
// refused for room. Filling the cache takes as many callers, each with
// keys of its own, as it has places.
//
// The entries sit in a ring in the order they were added, which grows up
// to maxSize; an entry leaves from the front once it has expired. A proof
// added again after its window leaves its old entry behind, dead, to be
// dropped when it reaches the front. It is safe for concurrent use.
type ReplayCache struct {
	mu      sync.Mutex
	index   map[[16]byte]int // proof → its live entry's position in ring
	callers map[uint64]int32 // live entries by caller
	clients map[uint64]int32 // live entries by client key
	ring    []replayEntry
	head    int // the position of the oldest entry
	n       int // entries in the ring, dead ones included
	seed    maphash.Seed
	maxSize int
}

type replayEntry struct {
	key            [16]byte
	caller, client uint64
	expires        int64 // Unix nanoseconds
	dead           bool
}

// ReplayEntries is the most proofs a replica's cache remembers: at most
// about 40 MiB (BenchmarkReplayCacheMemory), or about 2,000 DPoP requests
// a second per replica over the default window and twice the leeway (2
// min).
const ReplayEntries = 1 << 18

// NewReplayCache returns an empty ReplayCache of at most maxSize proofs.
func NewReplayCache(maxSize int) *ReplayCache {
	return &ReplayCache{
		index: make(map[[16]byte]int), callers: make(map[uint64]int32), clients: make(map[uint64]int32),
		seed: maphash.MakeSeed(), maxSize: maxSize,
	}
}

// A Use is one use of a proof, as a ReplayCache sees it: fixed-size
// hashes that name no caller, key or proof readably.
type Use struct {
	// Proof is the hash of the proof ([ProofKey]), Caller that of the
	// caller (its issuer and subject), Client that of the proof's key
	// ([ClientKey]): the shares of the cache are kept by these two.
	Proof, Caller, Client [16]byte
	// Expires is when the proof stops being accepted, after which it needs
	// no remembering; Now is the time of the request.
	Expires, Now time.Time
}

// Check reports what Add would find for u's proof, recording nothing: no
// problem, [Replayed], or [Full] with wait, how long until the oldest
// proof it remembers expires, the first time there can be more room.
func (c *ReplayCache) Check(u Use) (p Problem, wait time.Duration) {
	caller, client := c.hash(u.Caller), c.hash(u.Client)
	t := u.Now.UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.find(u.Proof, caller, client, t)
}

// Add records u's proof as used until u.Expires, unless it was seen
// before and has not expired ([Replayed]), or there is no room for it
// ([Full]).
func (c *ReplayCache) Add(u Use) (p Problem, wait time.Duration) {
	caller, client := c.hash(u.Caller), c.hash(u.Client)
	t := u.Now.UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, wait = c.find(u.Proof, caller, client, t); p != 0 {
		return p, wait
	}
	if i, ok := c.index[u.Proof]; ok {
		// Expired but not yet at the front: its entry stays, dead, so
		// that dropping it later cannot forget the proof recorded now.
		c.forget(i)
	}
	if c.n == len(c.ring) {
		c.grow()
	}
	i := (c.head + c.n) % len(c.ring)
	c.ring[i] = replayEntry{key: u.Proof, caller: caller, client: client, expires: u.Expires.UnixNano()}
	c.n++
	c.index[u.Proof] = i
	c.callers[caller]++
	c.clients[client]++
	return 0, 0
}

// find drops the entries that expired by t at the front, and says whether
// the proof key is live, and else whether caller and client have room for
// it. c.mu is held.
func (c *ReplayCache) find(key [16]byte, caller, client uint64, t int64) (Problem, time.Duration) {
	for c.n > 0 && (c.ring[c.head].dead || c.ring[c.head].expires <= t) {
		c.forget(c.head)
		c.head = (c.head + 1) % len(c.ring)
		c.n--
	}
	if i, ok := c.index[key]; ok && c.ring[i].expires > t {
		return Replayed, 0
	}
	free := int32(c.maxSize - c.n)
	if free <= 0 || c.callers[caller] >= free || c.clients[client] >= free {
		return Full, time.Duration(c.ring[c.head].expires - t)
	}
	return 0, 0
}

// Fill returns the proofs the cache remembers, less those at its front
// that have expired (the next check drops them), and the most it may
// hold, at which every new proof is refused: plantstore_dpop_replay_entries
// and ..._limit. It changes nothing.
func (c *ReplayCache) Fill() (entries, limit int) {
	t := time.Now().UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	entries = len(c.index)
	for j := 0; j < c.n; j++ {
		e := &c.ring[(c.head+j)%len(c.ring)]
		if !e.dead && e.expires > t {
			break
		}
		if !e.dead {
			entries--
		}
	}
	return entries, c.maxSize
}

// hash returns the key of a caller or client hash in c's maps: seeded, so
// that no one can choose hashes that meet.
func (c *ReplayCache) hash(h [16]byte) uint64 { return maphash.Comparable(c.seed, h) }

// forget marks the entry at i dead and drops it from the index and its
// caller's and key's counts, if it was live. c.mu is held.
func (c *ReplayCache) forget(i int) {
	e := &c.ring[i]
	if e.dead {
		return
	}
	e.dead = true
	delete(c.index, e.key)
	decrement(c.callers, e.caller)
	decrement(c.clients, e.client)
}

// decrement takes one from m[k], dropping k at zero.
func decrement(m map[uint64]int32, k uint64) {
	if n := m[k] - 1; n > 0 {
		m[k] = n
	} else {
		delete(m, k)
	}
}

// grow doubles the ring, up to maxSize, keeping the entries in order from
// position 0. c.mu is held and the ring is full.
func (c *ReplayCache) grow() {
	ring := make([]replayEntry, min(max(2*len(c.ring), 64), c.maxSize))
	for j := range c.n {
		e := c.ring[(c.head+j)%len(c.ring)]
		ring[j] = e
		if !e.dead {
			c.index[e.key] = j
		}
	}
	c.ring, c.head = ring, 0
}
