// Package redisstate keeps the state that the replicas of a deployment
// share in Redis or Valkey: the rate of each caller and the DPoP proofs
// used anywhere (an [auth.SharedState]).
//
// Each admission is one round trip: one script takes a request from the
// caller's rate (GCRA, by the server's clock, so the replicas' clocks do
// not matter) and, for a caller within its rate, records the proof unless
// it is there already (SET NX with the proof's remaining life as expiry).
// Keys are fixed-size hashes under the prefix "plantstore:", each with an
// expiry; nothing in Redis names a caller, a key or a proof readably.
//
// A call that fails or outlasts the timeout turns the state down: calls
// stop going to Redis at once (the Verifier's own limiter and replay cache
// answer), a probe tries Redis every [Options.Probe], and the first answer
// within the timeout turns it up again. Each change is logged once and
// shown by the plantstore_shared_state_up gauge.
package redisstate

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"go.uber.org/zap"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/observability/setting"
)

// Defaults of [Options].
const (
	DefaultTimeout = 50 * time.Millisecond
	DefaultProbe   = time.Second
)

// prefix starts every key this package writes.
const prefix = "plantstore:"

// Options configure a [State].
type Options struct {
	// URL is the server: redis://[user:password@]host[:port][/db] or
	// rediss:// for TLS, with go-redis's query options.
	URL string
	// Timeout bounds each call, a connection's dial included; 0 or less
	// means DefaultTimeout.
	Timeout time.Duration
	// Rate is the requests a second each caller may send, shared by every
	// replica, and Burst how many at once, as [auth.NewRateLimit] accepts
	// them; a Rate of 0 or less limits nothing.
	Rate  float64
	Burst int
	// Probe is how often Redis is tried while it is down; 0 or less means
	// DefaultProbe.
	Probe time.Duration
	// Log gets a line at each change of state; nil logs nothing.
	Log *zap.Logger
	// Registerer gets plantstore_shared_state_requests_total{op,result}
	// and plantstore_shared_state_up; nil registers nothing.
	Registerer prometheus.Registerer
}

// Values of the labels of plantstore_shared_state_requests_total.
const (
	OpReplay      = "replay"
	OpRate        = "rate"
	ResultOK      = "ok"
	ResultError   = "error"
	ResultTimeout = "timeout"
)

// errURL is the refusal of a URL that is neither redis:// nor rediss://,
// or that go-redis cannot read.
var errURL = errors.New("want a redis:// or rediss:// URL")

// parseURL returns the client options of a redis:// or rediss:// URL.
// Its errors never show the URL, which may carry a password.
func parseURL(s string) (*redis.Options, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "redis" && u.Scheme != "rediss" || u.Host == "" {
		return nil, errURL
	}
	o, err := redis.ParseURL(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", errURL, redactedCause(err, s))
	}
	return o, nil
}

// redactedCause returns go-redis's reason for refusing s, unless it
// shows the URL's password or query.
func redactedCause(err error, s string) string {
	msg := err.Error()
	u, _ := url.Parse(s)
	if u != nil {
		if p, ok := u.User.Password(); ok && p != "" && strings.Contains(msg, p) || u.RawQuery != "" && strings.Contains(msg, u.RawQuery) {
			return "options it cannot read"
		}
	}
	return msg
}

// clientLog is where go-redis's own lines go (a failed dial, a
// connection closed), at debug level since a State logs each change of
// state itself: the log of the State made last. go-redis's log is global.
var (
	clientLog     atomic.Pointer[zap.Logger]
	clientLogOnce sync.Once
)

// debugLog is go-redis's log, writing to clientLog.
type debugLog struct{}

func (debugLog) Printf(_ context.Context, format string, v ...any) {
	if l := clientLog.Load(); l != nil {
		l.Debug("redis client", zap.String("detail", fmt.Sprintf(format, v...)))
	}
}

// State is an [auth.SharedState] in Redis. It is safe for concurrent use.
type State struct {
	client  *redis.Client
	where   string // the URL, redacted
	timeout time.Duration
	probe   time.Duration
	log     *zap.Logger
	// interval is the time one request takes from a caller's rate, in
	// microseconds, 0 for no rate; burst is the requests a caller may send
	// at once.
	interval int64
	burst    int64

	up atomic.Bool

	requests *prometheus.CounterVec
	upGauge  prometheus.Gauge

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ auth.SharedState = (*State)(nil)

// New returns the State of o and tries Redis once, within the timeout:
// a Redis that does not answer leaves the State down (logged) and probed,
// never an error. It returns the *[setting.Error] of redis_url for a URL
// that is neither redis:// nor rediss://, or that go-redis cannot read;
// the error never shows the URL, which may carry a password.
func New(o Options) (*State, error) {
	ro, err := parseURL(o.URL)
	if err != nil {
		return nil, &setting.Error{Key: "redis_url", Err: err}
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Probe <= 0 {
		o.Probe = DefaultProbe
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	clientLog.Store(o.Log)
	clientLogOnce.Do(func() { redis.SetLogger(debugLog{}) })
	// One try per call, bounded by the timeout: a failure falls back at
	// once rather than retrying while the request waits.
	ro.MaxRetries = -1
	ro.DialerRetries = 1
	ro.DialTimeout = o.Timeout
	ro.ReadTimeout = o.Timeout
	ro.WriteTimeout = o.Timeout
	ro.PoolTimeout = o.Timeout
	ro.ContextTimeoutEnabled = true
	ro.DisableIdentity = true
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	s := &State{
		client:  redis.NewClient(ro),
		where:   setting.RedactURL(o.URL),
		timeout: o.Timeout,
		probe:   o.Probe,
		log:     o.Log,
		burst:   int64(o.Burst),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "plantstore_shared_state_requests_total",
			Help: "Calls to the shared state (Redis), by what they served (replay, rate) and result (ok, error, timeout).",
		}, []string{"op", "result"}),
		upGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "plantstore_shared_state_up",
			Help: "1 while the shared state (Redis) answers, 0 while each replica uses its own state.",
		}),
	}
	if o.Rate > 0 {
		s.interval = max(1, int64(math.Round(1e6/o.Rate)))
	}
	for _, op := range []string{OpReplay, OpRate} {
		for _, r := range []string{ResultOK, ResultError, ResultTimeout} {
			s.requests.WithLabelValues(op, r)
		}
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(s.requests); err != nil {
			return nil, err
		}
		if err := o.Registerer.Register(s.upGauge); err != nil {
			return nil, err
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if err := s.try(s.ctx); err != nil {
		s.fail(err)
	} else {
		s.up.Store(true)
		s.upGauge.Set(1)
		s.log.Info("shared state available", zap.String("redis", s.where))
	}
	return s, nil
}

// Close stops the probe and closes the connections.
func (s *State) Close() error {
	s.cancel()
	s.wg.Wait()
	return s.client.Close()
}

// Up reports whether the state is in use: Redis answered the last call.
func (s *State) Up() bool { return s.up.Load() }

// errDown is the answer of every call while the state is down.
var errDown = errors.New("shared state unavailable")

// admitScript takes a request from a caller's rate and records a proof.
// KEYS are the caller's rate key when ARGV[1] (the time one request
// takes, in microseconds) is positive, then the proof's key when ARGV[3]
// (its life in milliseconds) is positive; ARGV[2] is the burst, ARGV[4]
// the admission's ID. The answer is {admitted, retry after in
// microseconds, replay}: a caller over its rate takes nothing and
// records nothing.
var admitScript = redis.NewScript(`
local k = 1
local interval = tonumber(ARGV[1])
if interval > 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local v = redis.call('GET', KEYS[1])
  local tat = now
  if v then tat = math.max(tonumber(v), now) end
  local ahead = tat + interval - now
  local tolerance = interval * tonumber(ARGV[2])
  if ahead > tolerance then
    return {0, ahead - tolerance, 0}
  end
  redis.call('SET', KEYS[1], string.format('%.0f', now + ahead), 'PX', math.max(1, math.ceil(ahead / 1000)))
  k = 2
end
if tonumber(ARGV[3]) > 0 then
  if not redis.call('SET', KEYS[k], ARGV[4], 'NX', 'PX', ARGV[3]) then
    return {1, 0, 1}
  end
end
return {1, 0, 0}
`)

// forgetScript deletes the proof key KEYS[1] if ARGV[1], an admission's
// ID, recorded it.
var forgetScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

func rateKey(caller [16]byte) string { return prefix + "r:" + hex.EncodeToString(caller[:]) }
func proofKey(proof [16]byte) string { return prefix + "p:" + hex.EncodeToString(proof[:]) }

// Admit takes a request from the caller's rate, when there is one, and
// records a's proof, in one round trip. It returns an error without
// calling Redis while the state is down, and when the call fails.
func (s *State) Admit(ctx context.Context, a auth.Admission) (auth.SharedVerdict, error) {
	rate := s.interval > 0
	if !rate && !a.DPoP {
		return auth.SharedVerdict{}, nil
	}
	if !s.up.Load() {
		return auth.SharedVerdict{}, errDown
	}
	keys := make([]string, 0, 2)
	var ttl int64
	if rate {
		keys = append(keys, rateKey(a.Caller))
	}
	if a.DPoP {
		keys = append(keys, proofKey(a.Proof))
		ttl = max(1, a.Expires.Sub(a.Now).Milliseconds())
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	res, err := admitScript.Run(ctx, s.client, keys, s.interval, s.burst, ttl, strconv.FormatUint(a.ID, 10)).Int64Slice()
	if err == nil && len(res) != 3 {
		err = fmt.Errorf("unexpected answer %v", res)
	}
	result := s.result(err)
	if rate {
		s.requests.WithLabelValues(OpRate, result).Inc()
	}
	if a.DPoP {
		s.requests.WithLabelValues(OpReplay, result).Inc()
	}
	if err != nil {
		s.down(err)
		return auth.SharedVerdict{}, err
	}
	return auth.SharedVerdict{
		Limited:    res[0] == 0,
		RetryAfter: time.Duration(res[1]) * time.Microsecond,
		Replay:     res[2] == 1,
	}, nil
}

// Forget deletes a's proof if a's Admit recorded it.
func (s *State) Forget(ctx context.Context, a auth.Admission) error {
	if !a.DPoP {
		return nil
	}
	if !s.up.Load() {
		return errDown
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	err := forgetScript.Run(ctx, s.client, []string{proofKey(a.Proof)}, strconv.FormatUint(a.ID, 10)).Err()
	s.requests.WithLabelValues(OpReplay, s.result(err)).Inc()
	if err != nil {
		s.down(err)
	}
	return err
}

// callContext bounds a call by the timeout alone: a request whose caller
// went away still finishes its call, so that it never counts as Redis
// failing.
func (s *State) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
}

// result is the result label of a call that ended with err.
func (s *State) result(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return ResultTimeout
	}
	return ResultError
}

// down turns the state down after a failed call, once per change.
func (s *State) down(err error) {
	if s.up.CompareAndSwap(true, false) {
		s.fail(err)
	}
}

// fail shows and logs the state down and starts probing Redis.
func (s *State) fail(err error) {
	if s.ctx.Err() != nil {
		return // closed
	}
	s.upGauge.Set(0)
	s.log.Warn("shared state unavailable: each replica keeps its own replay cache and rate limit until it answers",
		zap.String("redis", s.where), zap.String("result", s.result(err)), zap.Error(err))
	s.wg.Add(1)
	go s.probeLoop()
}

// probeLoop tries Redis every probe period until it answers, then turns
// the state up.
func (s *State) probeLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.probe)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if s.try(s.ctx) != nil {
			continue
		}
		// Shown and logged before calls may turn it down again, so that
		// the gauge and the log end on the last change.
		s.upGauge.Set(1)
		s.log.Info("shared state restored", zap.String("redis", s.where))
		s.up.Store(true)
		return
	}
}

// try writes a short-lived key within the timeout: Redis answers, and
// takes writes.
func (s *State) try(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.client.Set(ctx, prefix+"probe", "1", time.Second).Err()
}
