package auth

import (
	"hash/maphash"
	"sync"
	"time"
)

// replayCache remembers the DPoP proofs accepted within their window, so
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
type replayCache struct {
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

// replayCacheEntries is the most proofs remembered: at most about 40 MiB
// (BenchmarkReplayCacheMemory), or about 2,000 DPoP requests a second per
// replica over the default window and twice the leeway (2 min).
const replayCacheEntries = 1 << 18

func newReplayCache(maxSize int) *replayCache {
	return &replayCache{
		index: make(map[[16]byte]int), callers: make(map[uint64]int32), clients: make(map[uint64]int32),
		seed: maphash.MakeSeed(), maxSize: maxSize,
	}
}

// What a replayCache found.
type replayVerdict int

const (
	replayFresh replayVerdict = iota // not seen: recorded, or there is room to
	replaySeen                       // seen within its window: a replay
	replayFull                       // not seen, but there is no room for it
)

// check reports what add would find for a's proof, recording nothing;
// with replayFull, wait is how long until the oldest proof it remembers
// expires, the first time there can be more room.
func (c *replayCache) check(a Admission) (v replayVerdict, wait time.Duration) {
	caller, client := c.hash(a.Caller), c.hash(a.Client)
	t := a.Now.UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.find(a.Proof, caller, client, t)
}

// add records a's proof as used until a.Expires, unless it was seen
// before and has not expired, or there is no room for it.
func (c *replayCache) add(a Admission) (v replayVerdict, wait time.Duration) {
	caller, client := c.hash(a.Caller), c.hash(a.Client)
	t := a.Now.UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, wait = c.find(a.Proof, caller, client, t); v != replayFresh {
		return v, wait
	}
	if i, ok := c.index[a.Proof]; ok {
		// Expired but not yet at the front: its entry stays, dead, so
		// that dropping it later cannot forget the proof recorded now.
		c.forget(i)
	}
	if c.n == len(c.ring) {
		c.grow()
	}
	i := (c.head + c.n) % len(c.ring)
	c.ring[i] = replayEntry{key: a.Proof, caller: caller, client: client, expires: a.Expires.UnixNano()}
	c.n++
	c.index[a.Proof] = i
	c.callers[caller]++
	c.clients[client]++
	return replayFresh, 0
}

// find drops the entries that expired by t at the front, and says whether
// the proof key is live, and else whether caller and client have room for
// it. c.mu is held.
func (c *replayCache) find(key [16]byte, caller, client uint64, t int64) (replayVerdict, time.Duration) {
	for c.n > 0 && (c.ring[c.head].dead || c.ring[c.head].expires <= t) {
		c.forget(c.head)
		c.head = (c.head + 1) % len(c.ring)
		c.n--
	}
	if i, ok := c.index[key]; ok && c.ring[i].expires > t {
		return replaySeen, 0
	}
	free := int32(c.maxSize - c.n)
	if free <= 0 || c.callers[caller] >= free || c.clients[client] >= free {
		return replayFull, time.Duration(c.ring[c.head].expires - t)
	}
	return replayFresh, 0
}

// fill returns the proofs the cache remembers, less those at its front
// that have expired (the next check drops them), and the most it may
// hold, at which every new proof is refused: plantstore_dpop_replay_entries
// and ..._limit. It changes nothing.
func (c *replayCache) fill() (entries, limit int) {
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
func (c *replayCache) hash(h [16]byte) uint64 { return maphash.Comparable(c.seed, h) }

// forget marks the entry at i dead and drops it from the index and its
// caller's and key's counts, if it was live. c.mu is held.
func (c *replayCache) forget(i int) {
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
func (c *replayCache) grow() {
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
