package dpop

import (
	"hash/maphash"
	"sync"
	"time"
)

// Defaults of a [Failures].
const (
	// FailureBudget is how many proofs of one caller (issuer and subject),
	// or of one client key, may fail their signature check within
	// FailurePeriod of the first: past it, the caller's and the key's
	// proofs are refused before any signature work until the period ends.
	// A client that signs its proofs never fails one; 16 leaves room for a
	// client that lost its key and keeps trying.
	FailureBudget = 16
	// FailurePeriod is how long a budget lasts from its first failure,
	// and so the longest a caller or key is refused once it spent it.
	FailurePeriod = time.Minute
	// FailureEntries bounds the callers and keys counted at once: about
	// 4 MiB. When it is full, an entry whose period ended makes room, else
	// any.
	FailureEntries = 1 << 16
)

// Failures counts the proofs whose signature failed, by caller and by
// client key, so that a holder of a bound token cannot make the service
// verify signatures without end, with or without a rate limit: once
// either has spent its [FailureBudget], its proofs are refused cheaply
// for the rest of the period. It is safe for concurrent use.
type Failures struct {
	mu      sync.Mutex
	seed    maphash.Seed
	entries map[uint64]failure
	budget  int32
	period  time.Duration
	max     int
}

// failure is one caller's or key's count, within the period that started
// at its first failure.
type failure struct {
	count int32
	ends  int64 // Unix nanoseconds
}

// NewFailures returns a Failures of budget failures per period, counting
// at most max callers and keys.
func NewFailures(budget int, period time.Duration, max int) *Failures {
	return &Failures{seed: maphash.MakeSeed(), entries: make(map[uint64]failure), budget: int32(budget), period: period, max: max}
}

// keys returns the map keys of a caller and a client key, apart.
func (f *Failures) keys(caller, client [16]byte) (uint64, uint64) {
	return maphash.Comparable(f.seed, [2][16]byte{caller, {}}), maphash.Comparable(f.seed, [2][16]byte{{}, client})
}

// Blocked reports whether the caller or the client key spent its budget
// by now, and then how long until its period ends.
func (f *Failures) Blocked(caller, client [16]byte, now time.Time) (bool, time.Duration) {
	a, b := f.keys(caller, client)
	t := now.UnixNano()
	f.mu.Lock()
	defer f.mu.Unlock()
	var wait int64
	for _, k := range [2]uint64{a, b} {
		if e, ok := f.entries[k]; ok && e.ends > t && e.count >= f.budget {
			wait = max(wait, e.ends-t)
		}
	}
	return wait > 0, time.Duration(wait)
}

// Fail counts a proof of caller and client whose signature failed.
func (f *Failures) Fail(caller, client [16]byte, now time.Time) {
	a, b := f.keys(caller, client)
	t := now.UnixNano()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range [2]uint64{a, b} {
		e, ok := f.entries[k]
		if !ok || e.ends <= t {
			if !ok && len(f.entries) >= f.max {
				f.makeRoom(t)
			}
			e = failure{ends: t + int64(f.period)}
		}
		e.count++
		f.entries[k] = e
	}
}

// makeRoom drops an entry whose period ended among a few the map gives
// first (in an order of its own), or else the first of them: a few steps,
// whatever the size. f.mu is held.
func (f *Failures) makeRoom(t int64) {
	var first uint64
	n := 0
	for k, e := range f.entries {
		if e.ends <= t {
			delete(f.entries, k)
			return
		}
		if n == 0 {
			first = k
		}
		if n++; n == 8 {
			break
		}
	}
	delete(f.entries, first)
}

// Fill returns the callers and keys counted, and the most that may be:
// plantstore_dpop_failure_entries and ..._limit.
func (f *Failures) Fill() (entries, limit int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.entries), f.max
}
