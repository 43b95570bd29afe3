package redisstate

import (
	"hash/maphash"
	"sync"
	"time"
)

// A caller far below its shared rate takes most of its requests from a
// lease: tokens that the admission script took from the caller's bucket
// in Redis for this replica, as many as this replica saw of the caller in
// the last leaseLife less those its calls under way ask for already (at
// most maxLease a call), granted only while the bucket stays at least
// half full after the grant. A lease's tokens are used by this replica
// alone, within leaseLife of the call that asked for them being sent;
// those left then are dropped (admitting less, never more).
//
// Why the bound holds, with leases, on every replica together: take a
// time s, and let Q be the caller's bucket in Redis (the requests it may
// take now) plus the tokens granted after s - leaseLife and not yet used.
// At s - leaseLife, Q is the bucket alone, at most the burst. A grant
// moves tokens from the bucket to a lease and leaves Q as it was; a
// request, from the bucket or a lease, takes one from Q; an expiry drops
// some; only the bucket's refill, at the rate, adds to it. Q is never
// below 0, since a grant, as a request, must fit in the bucket. So Q at s
// is at most burst + rate x leaseLife, and it holds every token usable at
// s (one granted before s - leaseLife expired by s); over any period t
// from s, a caller gets at most Q at s plus the refill: rate x
// (t + leaseLife) + burst, whatever the number of replicas. A lease's
// clock starts when its call is sent, before Redis grants it, so its
// tokens never outlive leaseLife after the grant. That a grant leaves
// half the bucket is not needed for the bound: it keeps leases to callers
// far below their rate, so that near the limit every request is decided
// by Redis, one at a time, as without leases, and so that tokens leased
// and left unused (demand that stopped) come from the bucket's upper half
// only: they can take half the burst from a caller, never its rate.

// leaseLife is how long a lease's tokens may be used after the call that
// asked for them was sent. It is the period the bound exceeds the rate
// by (rate x leaseLife more requests at most): 0.1 s, a tenth of the
// rate over any second or more. It is also the period the demand that
// sizes a lease is counted over: a caller sending fewer than one request
// in it (about 10 a second) to this replica asks for no lease.
const leaseLife = 100 * time.Millisecond

// maxLease is the most requests a lease is asked for: the fewest round
// trips of a caller far below its rate are 1 in maxLease requests.
const maxLease = 64

// leaseShards is how many locks the lease table is split under, and
// maxLeaseCallers the most callers it holds: past that a new caller gets
// no lease (one call a request, as without leases) until the callers seen
// last are idle for two lease lives.
const (
	leaseShards     = 64
	maxLeaseCallers = 1 << 16
	shardCallers    = maxLeaseCallers / leaseShards
)

// leases is this replica's lease and recent demand of each caller. It is
// safe for concurrent use.
type leases struct {
	start  time.Time // times are nanoseconds since start, on the monotonic clock
	seed   maphash.Seed
	shards [leaseShards]leaseShard
}

type leaseShard struct {
	mu     sync.Mutex
	m      map[[16]byte]*lease
	pruned int64 // when the shard was last pruned
	_      [40]byte
}

// A lease is a caller's tokens on this replica and the demand it is sized
// by.
type lease struct {
	tokens  int64 // left to take, until expires
	expires int64
	// seen is the requests of the caller since window began, last those
	// of the window before when it ended at most a lease life before
	// this one began (0 otherwise).
	window, seen, last int64
	// asked is the requests that the calls under way ask for: a call
	// meanwhile asks for the demand they leave (or one request), so that
	// one demand is not granted twice over.
	asked int64
}

func newLeases() *leases {
	l := &leases{start: time.Now(), seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = make(map[[16]byte]*lease)
	}
	return l
}

// now is the time of the table's clock.
func (l *leases) now() int64 { return int64(time.Since(l.start)) }

func (l *leases) shard(caller [16]byte) *leaseShard {
	return &l.shards[maphash.Comparable(l.seed, caller)%leaseShards]
}

// take counts one request of caller at now and takes a token of its
// lease when one is left and unexpired (took). Otherwise want is the
// requests the request's call asks for: the caller's recent demand less
// what the calls under way ask for, at most maxLease, or 1; when it is
// more than 1, the call's answer must be reported with granted.
func (l *leases) take(caller [16]byte, now int64) (took bool, want int64) {
	sh := l.shard(caller)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[caller]
	if e == nil {
		if len(sh.m) >= shardCallers && !sh.prune(now) {
			return false, 1
		}
		e = &lease{window: now}
		sh.m[caller] = e
	}
	if d := now - e.window; d >= int64(leaseLife) {
		e.last = 0
		if d < 2*int64(leaseLife) {
			e.last = e.seen
		}
		e.window, e.seen = now, 0
	}
	e.seen++
	if e.tokens > 0 {
		if now < e.expires {
			e.tokens--
			return true, 0
		}
		e.tokens = 0
	}
	want = min(max(e.last, e.seen)-e.asked, maxLease)
	if want <= 1 {
		return false, 1
	}
	e.asked += want
	return false, want
}

// granted reports the answer to the call of caller sent at sent that
// asked for want requests: the tokens it left (granted less the
// request's own; 0 or less when the call failed or was limited), usable
// until a lease life after sent.
func (l *leases) granted(caller [16]byte, want, tokens, sent, now int64) {
	sh := l.shard(caller)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[caller]
	if e == nil {
		return
	}
	e.asked -= want
	if tokens <= 0 {
		return
	}
	expires := sent + int64(leaseLife)
	if e.tokens > 0 && now < e.expires {
		// Tokens of an earlier lease keep their own end, and the new
		// ones go with them: none outlives its grant's.
		e.tokens += tokens
		e.expires = min(e.expires, expires)
		return
	}
	e.tokens, e.expires = tokens, expires
}

// prune drops the callers of a full shard that hold no lease, ask for
// none and whose demand is stale (seen two lease lives ago or more), at
// most once a lease life, so that a shard full of active callers costs a
// new caller no scan each; it reports whether there is room after it.
func (sh *leaseShard) prune(now int64) bool {
	if now-sh.pruned < int64(leaseLife) && sh.pruned != 0 {
		return false
	}
	sh.pruned = now
	for k, e := range sh.m {
		if e.asked == 0 && (e.tokens == 0 || now >= e.expires) && now-e.window >= 2*int64(leaseLife) {
			delete(sh.m, k)
		}
	}
	return len(sh.m) < shardCallers
}

// outstanding returns the tokens of caller's lease left and unexpired.
func (l *leases) outstanding(caller [16]byte) int64 {
	sh := l.shard(caller)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[caller]; e != nil && l.now() < e.expires {
		return e.tokens
	}
	return 0
}
