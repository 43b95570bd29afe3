// Package redisstate keeps the state that the replicas of a deployment
// share in Redis or Valkey: the rate of each caller and the DPoP proofs
// used anywhere (an [auth.SharedState]).
//
// An admission is at most one call of a script, and the admissions
// waiting at once share one round trip (a pipeline of their calls): one
// script takes requests from the caller's rate (GCRA, by the server's
// clock, so the replicas' clocks do not matter) and, for a caller within
// its rate, records the proof unless it is there already, or the caller
// holds its share of the store ([Options.CallerProofs]), with the proof's
// remaining life as expiry. A caller far below its rate (its bucket at
// least half full once they are taken) is granted a lease of as many
// requests as this replica saw of it in the last 100 ms, up to 64, which
// this replica admits for 100 ms without asking Redis: a bearer request
// from a lease makes no call, a DPoP request sends its proof alone. A
// caller then gets at most the rate x (t + 0.1 s) + the burst in any
// period t, whatever the number of replicas, and one sending fewer than
// about 10 requests a second to a replica makes one call a request.
// Keys are fixed-size hashes under the prefix "plantstore:", each with an
// expiry, keyed by the deployment's secret ([Options.Secret]); nothing in
// Redis names a caller, a key or a proof readably, and without the secret
// a guessed subject cannot be confirmed.
//
// A call that fails or outlasts the timeout turns the state down: calls
// stop going to Redis at once (the Verifier's own limiter and replay cache
// answer, and no lease is taken or granted), a probe tries Redis every
// [Options.Probe], and the first answer within the timeout turns it up
// again. Each change is logged once and
// shown by the plantstore_shared_state_up gauge.
package redisstate

import (
	"context"
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

// DefaultCallerProofs is the most DPoP proofs one caller (issuer and
// subject) may hold in the shared store at once, whatever its keys and
// however many replicas it sends to: about 550 proofs a second over the
// default window and twice the leeway (2 min), and at most about 13 MiB
// of Redis (200 bytes a proof, BenchmarkCallerShare's figure).
const DefaultCallerProofs = 1 << 16

// skew is how much the replicas' clocks may differ, which a caller's proof
// counts outlive their period by.
const skew = 2 * time.Second

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
	// CallerProofs is the most DPoP proofs one caller may hold in Redis at
	// once; past it, its proofs are refused (dpop_quota) until some
	// expire. 0 or less means DefaultCallerProofs.
	CallerProofs int
	// Secret, when set, returns the deployment's secret (the same on every
	// replica) that every key derived from a caller or a proof is hashed
	// under (see [KeyFile]); it is asked at each call, so a rotated secret
	// is used at once. Nil leaves the plain hashes, which whoever reads
	// Redis can test a guessed subject against.
	Secret func() []byte
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
	// callerProofs is the most proofs a caller may hold.
	callerProofs int64
	keys         *keyer
	// leases are this replica's leases of each caller's rate.
	leases *leases

	up atomic.Bool

	// queue holds the admissions waiting for a round trip (see batcher);
	// roundTrips counts the round trips made.
	queue      chan *pending
	roundTrips atomic.Int64

	requests *prometheus.CounterVec
	upGauge  prometheus.Gauge
	// db is the Redis database number the keys are in.
	db int

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
	if o.CallerProofs <= 0 {
		o.CallerProofs = DefaultCallerProofs
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
		client:       redis.NewClient(ro),
		where:        setting.RedactURL(o.URL),
		timeout:      o.Timeout,
		probe:        o.Probe,
		log:          o.Log,
		burst:        int64(o.Burst),
		callerProofs: int64(o.CallerProofs),
		keys:         newKeyer(o.Secret),
		leases:       newLeases(),
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
		if err := o.Registerer.Register(storeCollector{s}); err != nil {
			return nil, err
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.queue = make(chan *pending, maxBatch)
	s.wg.Add(batchers)
	for range batchers {
		go s.batcher()
	}
	if err := s.try(s.ctx); err != nil {
		s.fail(err)
	} else {
		s.up.Store(true)
		s.upGauge.Set(1)
		s.log.Info("shared state available", zap.String("redis", s.where))
		s.checkPolicy(s.ctx)
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

// admitScript takes requests from a caller's rate and records a proof.
// KEYS are the caller's rate key when ARGV[1] (the time one request
// takes, in microseconds) is positive, then, when ARGV[3] (the proof's
// life in milliseconds) is positive, the proof's key and the caller's two
// proof counts: the proofs it recorded that expire in this period of the
// counts and in the next. ARGV[2] is the burst, ARGV[4] the most proofs a
// caller may hold (the two counts together), ARGV[5] which count the
// proof goes to (1 or 2), ARGV[6] how long that count must live in
// milliseconds, and ARGV[7] the time until the first count expires, in
// microseconds. When ARGV[8] is 1, the last key is the proof's key under
// the previous secret, which makes it a replay too. ARGV[9] is the
// requests wanted (a lease, see lease.go): as many of them as leave at
// least half the burst's room are taken, else one, as GCRA does. The
// answer is {admitted, retry after in microseconds, replay or full (1
// replay, 2 the caller's share full), requests taken}: a caller over its
// rate takes nothing and records nothing, and so does a caller whose
// share is full.
var admitScript = redis.NewScript(`
local k = 1
local taken = 0
local interval = tonumber(ARGV[1])
if interval > 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local v = redis.call('GET', KEYS[1])
  local tat = now
  if v then tat = math.max(tonumber(v), now) end
  local tolerance = interval * tonumber(ARGV[2])
  local n = math.min(tonumber(ARGV[9]), math.floor((tolerance / 2 - (tat - now)) / interval))
  if n < 2 then n = 1 end
  local ahead = tat + n * interval - now
  if ahead > tolerance then
    return {0, ahead - tolerance, 0, 0}
  end
  redis.call('SET', KEYS[1], string.format('%.0f', now + ahead), 'PX', math.max(1, math.ceil(ahead / 1000)))
  k = 2
  taken = n
end
if tonumber(ARGV[3]) > 0 then
  if redis.call('EXISTS', KEYS[k]) == 1 or ARGV[8] == '1' and redis.call('EXISTS', KEYS[k + 3]) == 1 then
    return {1, 0, 1, taken}
  end
  local held = tonumber(redis.call('GET', KEYS[k + 1]) or '0') + tonumber(redis.call('GET', KEYS[k + 2]) or '0')
  if held >= tonumber(ARGV[4]) then
    return {1, tonumber(ARGV[7]), 2, taken}
  end
  redis.call('SET', KEYS[k], '1', 'PX', ARGV[3])
  local c = KEYS[k + tonumber(ARGV[5])]
  if redis.call('INCR', c) == 1 then
    redis.call('PEXPIRE', c, ARGV[6])
  end
end
return {1, 0, 0, taken}
`)

// countKey is the key of the count of the proofs of the caller whose key
// is callerKey that expire in the period the number names.
func countKey(callerKey string, period int64) string {
	return callerKey + ":" + strconv.FormatInt(period, 10)
}

// shareArgs returns the keys and arguments of the caller's share for the
// proof of a: the proofs live at most a.Life (at least a second), so
// those of the caller alive now expire in this period of that length or
// the next, and the two counts of the proofs recorded to expire in each
// bound how many it holds. A count lives until its period ends (and a
// little more, for the replicas' clocks), when none of its proofs is left.
func shareArgs(a auth.Admission, callerKey string) (keys []string, which, life, wait int64) {
	// An Admission whose Life is short of its own proof's life (unset)
	// gets a period that holds that proof at least.
	period := max(a.Life, a.Expires.Sub(a.Now), time.Second).Milliseconds()
	now, expires := a.Now.UnixMilli(), a.Expires.UnixMilli()
	first := now / period
	which = 1
	if expires/period > first {
		which = 2
	}
	life = (first+which)*period - now + skew.Milliseconds()
	wait = ((first+1)*period - now) * 1000
	return []string{countKey(callerKey, first), countKey(callerKey, first+1)}, which, life, wait
}

// Admit takes a request from the caller's rate, when there is one, and
// records a's proof, unless the caller holds its share of the store
// ([Options.CallerProofs]), in one round trip at most. A request that
// finds a token of its caller's lease on this replica takes it instead of
// the rate in Redis: a bearer request then makes no call. It returns an
// error without calling Redis while the state is down, and when the call
// fails.
func (s *State) Admit(ctx context.Context, a auth.Admission) (auth.SharedVerdict, error) {
	rate := s.interval > 0
	if !rate && !a.DPoP {
		return auth.SharedVerdict{}, nil
	}
	if !s.up.Load() {
		return auth.SharedVerdict{}, errDown
	}
	want := int64(1)
	if rate {
		sent := s.leases.now()
		var leased bool
		leased, want = s.leases.take(a.Caller, sent)
		switch {
		case leased && !a.DPoP:
			return auth.SharedVerdict{}, nil
		case leased:
			// The proof still goes to Redis, without the rate.
			rate = false
		case want > 1:
			var taken int64
			defer func() { s.leases.granted(a.Caller, want, taken-1, sent, s.leases.now()) }()
			v, n, err := s.admit(ctx, a, rate, want)
			if err == nil && !v.Limited {
				taken = n
			}
			return v, err
		}
	}
	v, _, err := s.admit(ctx, a, rate, want)
	return v, err
}

// admit makes a's call, with the rate part when rate is set, asking for
// want requests of the rate, and returns the verdict and the requests
// taken.
func (s *State) admit(ctx context.Context, a auth.Admission, rate bool, want int64) (auth.SharedVerdict, int64, error) {
	cur, prev := s.keys.secrets(a.Now, a.Life)
	keys := make([]string, 0, 5)
	var interval, ttl, which, life, wait int64
	if rate {
		keys = append(keys, key(cur, "r", a.Caller))
		interval = s.interval
	}
	previous := 0
	if a.DPoP {
		var counts []string
		counts, which, life, wait = shareArgs(a, key(cur, "c", a.Caller))
		keys = append(keys, key(cur, "p", a.Proof))
		keys = append(keys, counts...)
		if prev != nil {
			keys = append(keys, key(prev, "p", a.Proof))
			previous = 1
		}
		ttl = max(1, a.Expires.Sub(a.Now).Milliseconds())
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	res, err := s.call(ctx, keys, []any{interval, s.burst, ttl, s.callerProofs, which, life, wait, previous, want})
	if err == nil && len(res) != 4 {
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
		return auth.SharedVerdict{}, 0, err
	}
	return auth.SharedVerdict{
		Limited:    res[0] == 0,
		RetryAfter: time.Duration(res[1]) * time.Microsecond,
		Replay:     res[2] == 1,
		Full:       res[2] == 2,
	}, res[3], nil
}

// batchers is how many round trips may be under way at once.
const batchers = 2

// maxBatch is the most admissions one round trip carries.
const maxBatch = 256

// A pending is one admission waiting for its batch's round trip.
type pending struct {
	keys []string
	args []any
	res  []int64
	err  error
	done chan struct{}
}

// call runs the admission script with keys and args in the next round
// trip to Redis, with whatever other admissions are waiting for one, and
// returns its answer; it gives up when ctx ends.
func (s *State) call(ctx context.Context, keys []string, args []any) ([]int64, error) {
	p := &pending{keys: keys, args: args, done: make(chan struct{})}
	select {
	case s.queue <- p:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.ctx.Done():
		return nil, errDown
	}
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.ctx.Done():
		return nil, errDown
	}
}

// batcher sends the admissions waiting in the queue to Redis, all those
// waiting in one pipeline (one write, one round trip), until the State is
// closed. A batch goes as soon as there is one admission and this batcher
// is free, so an admission alone waits for nothing but its own round
// trip, and admissions that arrive during a round trip go together in
// the next.
func (s *State) batcher() {
	defer s.wg.Done()
	batch := make([]*pending, 0, maxBatch)
	for {
		batch = batch[:0]
		select {
		case <-s.ctx.Done():
			return
		case p := <-s.queue:
			batch = append(batch, p)
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case p := <-s.queue:
				batch = append(batch, p)
			default:
				break drain
			}
		}
		s.send(batch)
	}
}

// send runs the script for each admission of batch in one pipeline,
// bounded by the timeout, and answers each. A script Redis does not hold
// (after a restart of Redis) is sent whole in a second round trip for the
// admissions that needed it.
func (s *State) send(batch []*pending) {
	s.roundTrips.Add(1)
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	cmds := make([]*redis.Cmd, len(batch))
	pipe := s.client.Pipeline()
	for i, p := range batch {
		cmds[i] = admitScript.EvalSha(ctx, pipe, p.keys, p.args...)
	}
	_, err := pipe.Exec(ctx)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		s.roundTrips.Add(1)
		pipe = s.client.Pipeline()
		for i, p := range batch {
			if redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
				cmds[i] = admitScript.Eval(ctx, pipe, p.keys, p.args...)
			}
		}
		_, _ = pipe.Exec(ctx)
	}
	for i, p := range batch {
		p.res, p.err = cmds[i].Int64Slice()
		close(p.done)
	}
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
		s.checkPolicy(s.ctx)
		return
	}
}

// try writes a short-lived key within the timeout (Redis answers, and
// takes writes), then loads the admission script, so that even the first
// admission after a start or a restart of Redis is one round trip (a
// script Redis does not hold costs a second, to send it whole).
func (s *State) try(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.client.Set(ctx, prefix+"probe", "1", time.Second).Err(); err != nil {
		return err
	}
	return admitScript.Load(ctx, s.client).Err()
}

// Info is what Redis reports of itself that the shared store's size and
// safety depend on (INFO).
type Info struct {
	// Keys is the number of keys in the database the State uses, Memory
	// the bytes the server uses in all (used_memory).
	Keys, Memory int64
	// Policy is the server's maxmemory-policy and MaxMemory its maxmemory
	// (0: none).
	Policy    string
	MaxMemory int64
}

// Evicts reports whether the policy lets Redis evict keys that have an
// expiry, as every key of a State has: a proof key evicted is a proof
// that can be replayed at another replica. Only noeviction keeps them
// (Redis then refuses writes when full, and each replica falls back to
// its own state).
func (i Info) Evicts() bool { return i.Policy != "" && i.Policy != "noeviction" }

// Info asks Redis for its Info, within the timeout.
func (s *State) Info(ctx context.Context) (Info, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	text, err := s.client.Info(ctx).Result()
	if err != nil {
		return Info{}, err
	}
	return parseInfo(text, s.db), nil
}

// parseInfo reads an Info from INFO's answer, for database db.
func parseInfo(text string, db int) Info {
	var i Info
	dbName := "db" + strconv.Itoa(db)
	for line := range strings.Lines(text) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch name {
		case "used_memory":
			i.Memory, _ = strconv.ParseInt(value, 10, 64)
		case "maxmemory":
			i.MaxMemory, _ = strconv.ParseInt(value, 10, 64)
		case "maxmemory_policy":
			i.Policy = value
		case dbName:
			for kv := range strings.SplitSeq(value, ",") {
				if n, ok := strings.CutPrefix(kv, "keys="); ok {
					i.Keys, _ = strconv.ParseInt(n, 10, 64)
				}
			}
		}
	}
	return i
}

// checkPolicy warns when Redis reports a maxmemory-policy that can evict
// proof keys.
func (s *State) checkPolicy(ctx context.Context) {
	i, err := s.Info(ctx)
	if err != nil {
		s.log.Info("shared state: cannot read Redis's INFO; its maxmemory-policy is unknown", zap.Error(err))
		return
	}
	if i.Evicts() {
		s.log.Warn("shared state: Redis's maxmemory-policy can evict DPoP proof keys, and an evicted proof can be replayed at another replica; run Redis with maxmemory-policy noeviction",
			zap.String("redis", s.where), zap.String("maxmemory_policy", i.Policy), zap.Int64("maxmemory", i.MaxMemory))
	}
}

// storeCollector shows the size of the shared store and whether Redis
// may evict from it, read from INFO at each scrape while the state is up.
type storeCollector struct{ s *State }

var (
	keysDesc = prometheus.NewDesc("plantstore_shared_state_keys",
		"Keys in the Redis database of the shared state (every replica's rate and proof keys, and any other user's of that database).", nil, nil)
	memoryDesc = prometheus.NewDesc("plantstore_shared_state_memory_bytes",
		"Memory the Redis server of the shared state uses (used_memory).", nil, nil)
	evictsDesc = prometheus.NewDesc("plantstore_shared_state_evicts",
		"1 when the Redis server's maxmemory-policy can evict the shared state's keys (anything but noeviction), which lets an evicted DPoP proof be replayed at another replica.", nil, nil)
)

func (storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- keysDesc
	ch <- memoryDesc
	ch <- evictsDesc
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.s.up.Load() {
		return
	}
	i, err := c.s.Info(c.s.ctx)
	if err != nil {
		return
	}
	evicts := 0.0
	if i.Evicts() {
		evicts = 1
	}
	ch <- prometheus.MustNewConstMetric(keysDesc, prometheus.GaugeValue, float64(i.Keys))
	ch <- prometheus.MustNewConstMetric(memoryDesc, prometheus.GaugeValue, float64(i.Memory))
	ch <- prometheus.MustNewConstMetric(evictsDesc, prometheus.GaugeValue, evicts)
}
