package auth

import (
	"hash/maphash"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"
	"unsafe"
)

// cacheWays is the number of entries per set of the cache.
const cacheWays = 8

// cacheSlotBytes is the memory the cache assumes per slot when it sizes
// its table: tokens in the wild are 0.5 to 2 KiB, so a budget fills about
// when its slots do.
const cacheSlotBytes = 1 << 10

// cacheEntry is a token that passed every check, with what a request needs
// of it. It is immutable once built, and shared by every request that
// presents the same token while it is cached.
type cacheEntry struct {
	// token is the token; when digest is set it is "", and hash2 a second
	// keyed hash of the token, which with hash identifies it.
	token  string
	digest bool
	hash2  uint64
	hash   uint64
	id     Identity
	// iss is the issuer the token was routed to, src its Authenticator
	// that accepted it, with the verdict's stamp: a hit needs the issuer
	// current and the verdict to hold.
	iss   *issuer
	src   Authenticator
	stamp uint64
	// bound is what the token is bound to (cnf); for a token bound to a
	// DPoP key, ath is the ath its proofs carry and client the hash of
	// its key.
	bound  binding
	ath    string
	client [16]byte
	// caller is the hash of the issuer and subject rates are kept by.
	caller [16]byte
	// clientID and jti are what revocations may name besides the issuer,
	// the subject and iat.
	clientID, jti string
	// exp, nbf and iat are the time claims in Unix nanoseconds; nbf and
	// iat are math.MinInt64 when the token has none.
	exp, nbf, iat int64
	// size is what the entry costs the cache's budget.
	size int64
}

// current reports whether e's issuer is still configured and the verdict
// that accepted e still holds at now.
func (e *cacheEntry) current(now time.Time) bool {
	return !e.iss.retired.Load() && e.src.Holds(e.stamp, now)
}

// validAt reports whether e's time claims still hold at now with leeway:
// the checks of exp, nbf and iat made when the token was verified, made
// again.
func (e *cacheEntry) validAt(now time.Time, leeway time.Duration) bool {
	t := now.UnixNano()
	l := int64(leeway)
	return t < satAdd(e.exp, l) && t >= satAdd(e.nbf, -l) && t >= satAdd(e.iat, -l)
}

// entrySize returns the bytes e holds: the entry itself, the token, and
// the identity's strings and slices, each rounded up for the allocator.
func entrySize(e *cacheEntry) int64 {
	const strHeader = int64(unsafe.Sizeof(""))
	n := int64(unsafe.Sizeof(*e)) + alloc(len(e.token)) + alloc(len(e.id.Subject)) + alloc(len(e.bound.jkt)) + alloc(len(e.bound.x5t)) + alloc(len(e.ath)) + alloc(len(e.clientID)) + alloc(len(e.jti))
	// The audited refusals: reasons are constants, the claim's path a
	// string of the Config.
	n += alloc(cap(e.id.audit.reasons) * int(strHeader))
	for _, list := range [][]string{e.id.Groups, e.id.Scopes} {
		n += alloc(cap(list) * int(strHeader))
		for _, s := range list {
			n += alloc(len(s))
		}
	}
	return n
}

// alloc returns at least the bytes an allocation of n bytes takes: the
// allocator's size classes waste at most an eighth of a large object and
// 16 bytes of a small one.
func alloc(n int) int64 {
	if n == 0 {
		return 0
	}
	return int64(n + n/8 + 16)
}

// satAdd returns a+b, held within the int64 range (b is small against
// either end: a leeway).
func satAdd(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// tokenCache is a bounded, set-associative cache of verified tokens.
// A token's 64-bit hash, keyed with a per-cache random seed, picks a set
// of cacheWays entries; a hit needs the whole token to be equal, so a
// hash collision is a miss, never another caller's identity. Reads take
// no lock: each slot is an atomic pointer to an immutable *cacheEntry. A
// full set loses a random entry.
//
// The cache holds at most budget bytes, counting its table and every
// entry's token and identity: an entry that would go over evicts random
// others, and is not kept when that does not free enough.
type tokenCache struct {
	seed maphash.Seed
	// seed2 keys the second hash of the tokens kept as a digest.
	seed2 maphash.Seed
	// hash is maphash.String with seed; tests replace it to force
	// collisions.
	hash   func(seed maphash.Seed, s string) uint64
	sets   []cacheSet
	mask   uint64
	budget int64 // for entries: the whole budget less the table
	used   atomic.Int64
}

type cacheSet [cacheWays]atomic.Pointer[cacheEntry]

// newTokenCache returns a cache of budget bytes, or nil for a budget under
// one set.
func newTokenCache(budget int64) *tokenCache {
	setBytes := int64(unsafe.Sizeof(cacheSet{}))
	if budget < setBytes+cacheSlotBytes {
		return nil
	}
	n := int64(1)
	for 2*n*cacheWays*cacheSlotBytes <= budget {
		n *= 2
	}
	return &tokenCache{
		seed:   maphash.MakeSeed(),
		seed2:  maphash.MakeSeed(),
		hash:   maphash.String,
		sets:   make([]cacheSet, n),
		mask:   uint64(n - 1),
		budget: budget - n*setBytes,
	}
}

// fill returns the bytes the cache holds, its table included, and the most
// it may hold (the budget it was made with); 0 and 0 when it is off (nil).
// It is plantstore_token_cache_bytes and ..._limit_bytes.
func (c *tokenCache) fill() (used, limit int64) {
	if c == nil {
		return 0, 0
	}
	table := int64(len(c.sets)) * int64(unsafe.Sizeof(cacheSet{}))
	return table + c.used.Load(), table + c.budget
}

// hashOf returns the hash that picks token's set.
func (c *tokenCache) hashOf(token string) uint64 { return c.hash(c.seed, token) }

// get returns the entry of token, or nil. The second hash of token is
// made only for an entry kept as a digest whose hash is token's.
func (c *tokenCache) get(token string, h uint64) *cacheEntry {
	set := &c.sets[h&c.mask]
	for i := range set {
		if e := set[i].Load(); e != nil && e.hash == h && (e.token == token && !e.digest || e.digest && e.hash2 == c.hash2Of(token)) {
			return e
		}
	}
	return nil
}

// hash2Of returns the second hash of token, which an entry kept as a
// digest holds in its place: keyed with a seed of its own, so that with
// the first it is 128 bits no one without the seeds can aim at.
func (c *tokenCache) hash2Of(token string) uint64 { return maphash.String(c.seed2, token) }

// sameToken reports whether e and o are entries of the same token.
func (e *cacheEntry) sameToken(o *cacheEntry) bool {
	return e.hash == o.hash && e.digest == o.digest && e.token == o.token && e.hash2 == o.hash2
}

// put stores e in the set of its hash: in place of an empty entry, one no
// longer current at now or one of the same token, else of a random one;
// then, while the cache is over its budget, it evicts random entries, and
// takes e out again when a few tries did not make room.
func (c *tokenCache) put(e *cacheEntry, now time.Time) {
	e.size = entrySize(e)
	if e.size > c.budget {
		return
	}
	set := &c.sets[e.hash&c.mask]
	slot := &set[rand.IntN(cacheWays)]
	for i := range set {
		old := set[i].Load()
		if old == nil || !old.current(now) || old.sameToken(e) {
			slot = &set[i]
			break
		}
	}
	c.used.Add(e.size)
	if old := slot.Swap(e); old != nil {
		c.used.Add(-old.size)
	}
	for try := 0; c.used.Load() > c.budget; try++ {
		if try == 16 {
			if slot.CompareAndSwap(e, nil) {
				c.used.Add(-e.size)
			}
			return
		}
		victim := &c.sets[rand.Uint64()&c.mask][rand.IntN(cacheWays)]
		if old := victim.Load(); old != nil && old != e && victim.CompareAndSwap(old, nil) {
			c.used.Add(-old.size)
		}
	}
}
