package introspect

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/observability/setting"
)

// Defaults of [Options].
const (
	DefaultMaxRate     = 50
	DefaultMaxInflight = 16
	DefaultTimeout     = 2 * time.Second
)

// negativeFor is the longest an inactive answer is remembered: a token
// the issuer said no to is not asked about again for that long, and a
// token activated since waits at most that long.
const negativeFor = 5 * time.Second

// Options are the bounds of a replica's calls to introspection
// endpoints, whichever issuer they ask.
type Options struct {
	// MaxRate is the most calls a second; 0 means DefaultMaxRate.
	MaxRate float64
	// MaxInflight is the most calls at once; 0 means DefaultMaxInflight.
	MaxInflight int
	// Timeout bounds each call; 0 means DefaultTimeout.
	Timeout time.Duration
	// Transport makes the calls; nil means http.DefaultTransport.
	Transport http.RoundTripper
	// Now is the clock of the rate; nil means time.Now.
	Now func() time.Time
	// Registerer takes the metrics of the calls; nil registers none.
	Registerer prometheus.Registerer
	// TracerProvider makes a span of each call; nil makes none.
	TracerProvider trace.TracerProvider
}

// Limits bound the calls of a replica to introspection endpoints: a token
// bucket of MaxRate a second (a burst of one second's worth), MaxInflight
// at once, each within Timeout. A call over a bound is not made: its
// request is refused at once, never queued. It is safe for concurrent use.
type Limits struct {
	mu       sync.Mutex
	rate     float64
	burst    float64
	tokens   float64
	last     time.Time
	now      func() time.Time
	inflight chan struct{}
	timeout  time.Duration
	client   *http.Client
	obs      *observer
}

// NewLimits returns the limits of o, or the *setting.Error of a bound
// that is not positive.
func NewLimits(o Options) (*Limits, error) {
	switch {
	case o.MaxRate < 0:
		return nil, setting.Errorf("introspection_max_rate", "want a positive number of calls a second")
	case o.MaxInflight < 0:
		return nil, setting.Errorf("introspection_max_inflight", "want a positive number of calls")
	case o.Timeout < 0:
		return nil, setting.Errorf("introspection_timeout", "negative duration %s", o.Timeout)
	}
	if o.MaxRate == 0 {
		o.MaxRate = DefaultMaxRate
	}
	if o.MaxInflight == 0 {
		o.MaxInflight = DefaultMaxInflight
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	burst := max(1, o.MaxRate)
	return &Limits{
		rate: o.MaxRate, burst: burst, tokens: burst, now: o.Now, last: o.Now(),
		inflight: make(chan struct{}, o.MaxInflight),
		timeout:  o.Timeout,
		obs:      newObserver(o.Registerer, o.TracerProvider),
		client: &http.Client{
			Transport: o.Transport,
			// An endpoint that redirects is not followed: the token would
			// go where the configuration does not say.
			CheckRedirect: func(*http.Request, []*http.Request) error { return errRedirect },
		},
	}, nil
}

// errRedirect: the endpoint answered with a redirect, which is not
// followed.
var errRedirect = errors.New("redirect not followed")

// take reserves a call: a place among those in flight, then one of the
// rate's; false, with nothing taken, when either is out. release gives
// the place back.
func (l *Limits) take() (release func(), ok bool) {
	select {
	case l.inflight <- struct{}{}:
	default:
		return nil, false
	}
	l.mu.Lock()
	now := l.now()
	if d := now.Sub(l.last); d > 0 {
		l.tokens = min(l.burst, l.tokens+d.Seconds()*l.rate)
		l.last = now
	}
	ok = l.tokens >= 1
	if ok {
		l.tokens--
	}
	l.mu.Unlock()
	if !ok {
		<-l.inflight
		return nil, false
	}
	return func() { <-l.inflight }, true
}

// negatives remembers the tokens an issuer refused, by their SHA-256, for
// a few seconds: a fixed table, so that what it holds is bounded whatever
// is sent; a newer refusal takes the slot of an older one.
type negatives struct {
	mu    sync.Mutex
	slots [1024]negative
}

type negative struct {
	digest [sha256.Size]byte
	until  time.Time
	reason auth.Reason
}

// get returns the reason the token of digest d was refused for, while
// that is remembered at now.
func (n *negatives) get(d [sha256.Size]byte, now time.Time) (auth.Reason, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := &n.slots[slotOf(d, len(n.slots))]
	if s.digest == d && now.Before(s.until) {
		return s.reason, true
	}
	return "", false
}

// put remembers that the token of digest d was refused for r, until.
func (n *negatives) put(d [sha256.Size]byte, r auth.Reason, until time.Time) {
	n.mu.Lock()
	n.slots[slotOf(d, len(n.slots))] = negative{digest: d, until: until, reason: r}
	n.mu.Unlock()
}

func slotOf(d [sha256.Size]byte, n int) int {
	return int(binary.LittleEndian.Uint64(d[:8]) % uint64(n))
}
