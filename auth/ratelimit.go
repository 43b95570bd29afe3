package auth

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/plantstore/plantstore/observability/setting"
)

// maxRateKeys bounds the keys a [RateLimit] tracks in each of its two
// generations, so its memory stays bounded (a few MiB) whatever callers
// send.
const maxRateKeys = 1 << 15

// RateLimit is a token bucket per key (a hash of a caller): each
// bucket holds up to burst tokens and gains rate tokens a second; a request
// takes one. It is safe for concurrent use.
//
// Buckets live in two generations of at most 32768 keys each. When the
// current one is full it becomes the previous one and the one before is
// dropped; a key found in the previous generation moves to the current one.
// A key unused for two generations so starts again with a full bucket,
// which is what it would have by then at any rate worth setting.
type RateLimit struct {
	limit rate.Limit
	burst int

	mu       sync.Mutex
	cur, old map[uint64]*rate.Limiter
}

// NewRateLimit returns a RateLimit of perSecond tokens a second with
// buckets of burst tokens. It returns an error unless perSecond is positive
// and finite and burst is at least 1.
func NewRateLimit(perSecond float64, burst int) (*RateLimit, error) {
	if !(perSecond > 0) || math.IsInf(perSecond, 0) {
		return nil, setting.Errorf("rate", "want a positive number of requests a second")
	}
	if burst < 1 {
		return nil, setting.Errorf("burst", "must be at least 1")
	}
	return &RateLimit{
		limit: rate.Limit(perSecond),
		burst: burst,
		cur:   make(map[uint64]*rate.Limiter),
	}, nil
}

// Allow takes a token from key's bucket. It returns nil when there was
// one, and otherwise a *[RateLimitError] saying when there will be one; a
// refused request takes nothing.
func (l *RateLimit) Allow(key uint64) error {
	now := time.Now()
	r := l.bucket(key).ReserveN(now, 1)
	if !r.OK() {
		return &RateLimitError{RetryAfter: time.Duration(math.MaxInt64)}
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return &RateLimitError{RetryAfter: d}
	}
	return nil
}

// bucket returns key's limiter, creating it with a full bucket.
func (l *RateLimit) bucket(key uint64) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.cur[key]; ok {
		return b
	}
	b, ok := l.old[key]
	if !ok {
		b = rate.NewLimiter(l.limit, l.burst)
	}
	if len(l.cur) >= maxRateKeys {
		l.old, l.cur = l.cur, make(map[uint64]*rate.Limiter)
	}
	l.cur[key] = b
	return b
}

// keys returns the number of keys l tracks.
func (l *RateLimit) keys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.cur) + len(l.old)
}

// RateLimitError is a request refused by a [RateLimit]. Its HTTPStatus is
// 429 Too Many Requests; RetryAfter is how long until the caller's bucket
// has a token again. Issuer and Subject name the caller when the
// [Verifier] refused it, for the access log.
type RateLimitError struct {
	RetryAfter      time.Duration
	Issuer, Subject string
}

// Error returns a fixed text: the key (a subject or an address) is left to
// the access log.
func (e *RateLimitError) Error() string { return "rate limit exceeded" }

// HTTPStatus returns 429.
func (e *RateLimitError) HTTPStatus() int { return http.StatusTooManyRequests }

// RetryAfterHeader returns the Retry-After value for e.
func (e *RateLimitError) RetryAfterHeader() string { return retryAfter(e.RetryAfter) }

// retryAfter returns the Retry-After value for d: whole seconds, rounded
// up, at least 1 (RFC 9110 §10.2.3) and at most a day.
func retryAfter(d time.Duration) string {
	s := math.Ceil(d.Seconds())
	switch {
	case s < 1:
		s = 1
	case s > 86400:
		s = 86400
	}
	return strconv.Itoa(int(s))
}
