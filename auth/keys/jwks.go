package keys

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"

	"github.com/plantstore/plantstore/observability/setting"
)

// Defaults of [JWKSOptions].
const (
	DefaultJWKSRefresh    = 15 * time.Minute
	DefaultJWKSMinRefresh = 30 * time.Second
	defaultJWKSTimeout    = 10 * time.Second
	defaultJWKSMinBackoff = time.Second
	defaultJWKSMaxBackoff = 30 * time.Second
)

// jwksAccept is the Accept header of a JWKS request: RFC 7517 §8.5 names
// application/jwk-set+json, and most servers answer application/json.
const jwksAccept = "application/jwk-set+json, application/json"

// JWKSOptions configures a remote JWKS key source. Zero fields take their
// defaults.
type JWKSOptions struct {
	// URL is the JWKS URL (http or https). When it is empty and Issuer is
	// set, the URL is found by OIDC discovery ([Discover]).
	URL string
	// Issuer is the issuer whose discovery document names the JWKS URL. It
	// is used only when URL is empty.
	Issuer string
	// Refresh is the background refresh period, 15m by default. Each wait
	// is drawn within ±10% of it so that replicas spread their fetches.
	Refresh time.Duration
	// MinRefresh is the shortest time between the end of a fetch and a
	// fetch triggered by an unknown kid, 30s by default.
	MinRefresh time.Duration
	// Timeout bounds one fetch, discovery included, 10s by default.
	Timeout time.Duration
	// MaxBytes is the largest document accepted, 1 MiB by default.
	MaxBytes int64
	// MinBackoff is the first wait after a failed fetch, 1s by default; it
	// doubles after each further failure.
	MinBackoff time.Duration
	// MaxBackoff caps the wait after failed fetches, 30s by default.
	MaxBackoff time.Duration
	// Algorithms are the algorithms the keys must serve: a fetched set
	// with no key for any of them counts as a failed fetch. Empty means
	// any: a set with a usable key serves.
	Algorithms []string
	// Client makes the requests. The default has Timeout as its timeout and
	// follows redirects only to http and https URLs, never from https down
	// to http. A given Client is used as it is.
	Client *http.Client
	// TracerProvider makes the spans of fetches (see [JWKS]); nil makes
	// none.
	TracerProvider trace.TracerProvider
	// Name is the issuer's name in the issuers file, for spans; "" for the
	// unnamed issuer of the flags.
	Name string
	// Now is the clock of fetches: when they end, and so when one last
	// confirmed the keys (see [HoldFresh]); nil is time.Now.
	Now func() time.Time
}

// JWKS is a key source backed by a remote JWK Set (RFC 7517), kept fresh
// by a background loop. It is safe for concurrent use.
//
// Until the first fetch that yields a usable key, the loop retries with
// exponential backoff from MinBackoff to MaxBackoff and [JWKS.Key] returns
// [ErrNoKeys]. Afterwards it refreshes every Refresh (±10%); a failed
// refresh keeps the last good keys and is retried with the same backoff,
// never later than the next regular refresh. How long they may serve
// unconfirmed is the caller's to bound, per issuer ([HoldFresh]). A fetch fails on a transport
// error, a status other than 200, a document over MaxBytes, a document
// that is not a JWK Set, or a set without a usable key.
//
// With OIDC discovery, the discovered JWKS URL is kept once a fetch from it
// succeeded and discovered again after any failed fetch, so an issuer that
// moves its jwks_uri is followed without doubling the requests of every
// refresh.
//
// With a TracerProvider each fetch is a span auth.jwks.refresh, with the
// client spans auth.oidc.discovery and auth.jwks.fetch of its requests
// below it (url.full with its secrets redacted, http.response.status_code);
// the requests carry its traceparent. A fetch triggered by a token with an
// unknown kid is a child of that request's span; the background refreshes
// are traces of their own.
type JWKS struct {
	ctx    context.Context
	opts   JWKSOptions
	tracer trace.Tracer
	client *http.Client
	log    *zap.Logger
	m      Recorder
	source string // URL or issuer, for logs and errors

	keys    atomic.Pointer[KeySet]
	gen     atomic.Uint64 // see Generation
	stopped chan struct{} // closed when the loop and its fetches have ended
	// now is the clock of fetches: when they end, and when one last
	// succeeded (JWKSOptions.Now).
	now func() time.Time
	// confirmed is when the last successful fetch ended, in Unix
	// nanoseconds by now; 0 before the first.
	confirmed atomic.Int64
	// refreshCap, when positive, shortens the refresh period to itself
	// (see keepFresh); kick wakes the loop when it changes.
	refreshCap atomic.Int64
	kick       chan struct{}

	mu       sync.Mutex
	inflight chan struct{} // closed when the running fetch ends; nil when none runs
	closed   bool          // no fetch may start any more
	lastEnd  time.Time     // end of the last fetch
	lastErr  error         // result of the last fetch
	jwksURL  string        // URL to fetch; "" until discovery succeeds
}

var _ Keys = (*JWKS)(nil)

// NewJWKS returns a JWKS key source and starts its background loop, which
// ends when ctx is done. It never waits for the network: the first fetch
// runs in the loop, so an identity provider that is down at start does not
// stop the service from starting (see [JWKS.Ready]). It returns an error
// only for bad options: no URL and no issuer, a URL or issuer that is not
// an absolute http or https URL or a negative refresh period (a
// *[setting.Error]), or another negative duration or size. A nil log logs
// nothing; a nil m records nothing.
func NewJWKS(ctx context.Context, opts JWKSOptions, log *zap.Logger, m Recorder) (*JWKS, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	j := &JWKS{
		ctx:     ctx,
		opts:    opts,
		client:  opts.Client,
		log:     log,
		m:       recorderOf(m),
		stopped: make(chan struct{}),
		kick:    make(chan struct{}, 1),
		jwksURL: opts.URL,
		now:     opts.Now,
	}
	if opts.URL != "" {
		j.source = setting.RedactURL(opts.URL)
	} else {
		j.source = setting.RedactURL(opts.Issuer)
	}
	if j.client == nil {
		j.client = &http.Client{Timeout: opts.Timeout, CheckRedirect: checkRedirect}
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	j.tracer = tp.Tracer(tracerName)
	go j.run()
	return j, nil
}

func (o *JWKSOptions) setDefaults() error {
	switch {
	case o.URL != "":
		if _, err := parseHTTPURL(o.URL); err != nil {
			return &setting.Error{Issuer: o.Name, Key: "jwks_url", Err: err}
		}
	case o.Issuer != "":
		if _, err := parseHTTPURL(o.Issuer); err != nil {
			return &setting.Error{Issuer: o.Name, Key: "issuer", Err: fmt.Errorf("OIDC discovery: %w", err)}
		}
	default:
		return errors.New("jwks: no URL and no issuer")
	}
	// The refresh periods are the caller's settings; the other durations
	// are tuning that only tests change.
	if o.Refresh < 0 {
		return setting.Errorf("refresh", "negative duration %v", o.Refresh)
	}
	if o.MinRefresh < 0 {
		return setting.Errorf("min_refresh", "negative duration %v", o.MinRefresh)
	}
	if o.Refresh == 0 {
		o.Refresh = DefaultJWKSRefresh
	}
	if o.MinRefresh == 0 {
		o.MinRefresh = DefaultJWKSMinRefresh
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"timeout", &o.Timeout, defaultJWKSTimeout},
		{"min backoff", &o.MinBackoff, defaultJWKSMinBackoff},
		{"max backoff", &o.MaxBackoff, defaultJWKSMaxBackoff},
	} {
		if *d.v < 0 {
			return fmt.Errorf("jwks %s: negative duration %v", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if o.MinBackoff > o.MaxBackoff {
		return fmt.Errorf("jwks: min backoff %v over max backoff %v", o.MinBackoff, o.MaxBackoff)
	}
	if o.MaxBytes < 0 {
		return fmt.Errorf("jwks max bytes: negative size %d", o.MaxBytes)
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = defaultMaxBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// checkRedirect follows at most 10 redirects, only to http and https, and
// never from https to http, so a redirect cannot lower the transport's
// protection of the keys.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	switch req.URL.Scheme {
	case "https":
	case "http":
		if via[0].URL.Scheme == "https" {
			return errors.New("redirect from https to http refused")
		}
	default:
		return fmt.Errorf("redirect to scheme %q refused", req.URL.Scheme)
	}
	return nil
}

// Key returns the key for a token with the given kid and alg, with the
// errors of [KeySet.Lookup]. Before the first usable key set it returns
// [ErrNoKeys] at once.
//
// An unknown kid triggers one fetch, which this call waits for (bounded by
// Timeout and ctx) before it looks again, but only when no fetch is running
// and none ended within the last MinRefresh; otherwise the call returns
// [ErrUnknownKey] at once and never waits. A token without kid that fits no
// key does not trigger a fetch: key rotation is announced by new kids.
func (j *JWKS) Key(ctx context.Context, kid, alg string) (Key, error) {
	ks := j.keys.Load()
	if ks == nil {
		return Key{}, ErrNoKeys
	}
	k, err := ks.Lookup(kid, alg)
	if kid == "" || !errors.Is(err, ErrUnknownKey) {
		return k, err
	}
	done := j.startFetch(true, trace.SpanContextFromContext(ctx))
	if done == nil {
		return Key{}, ErrUnknownKey
	}
	select {
	case <-done:
	case <-ctx.Done():
		return Key{}, ErrUnknownKey
	}
	return j.keys.Load().Lookup(kid, alg)
}

// Ready returns nil once a fetch yielded a usable key set, and nil from
// then on even when later fetches fail (the last good keys serve). Before
// that it returns an error that wraps [ErrNoKeys] and the cause of the last
// failed fetch.
func (j *JWKS) Ready() error {
	if j.keys.Load() != nil {
		return nil
	}
	j.mu.Lock()
	err := j.lastErr
	j.mu.Unlock()
	if err == nil {
		return fmt.Errorf("jwks %s: %w: first fetch pending", j.source, ErrNoKeys)
	}
	return fmt.Errorf("jwks %s: %w: %w", j.source, ErrNoKeys, err)
}

// Done returns a channel that is closed when the background loop and its
// last fetch have ended (after the context given to [NewJWKS] is done).
func (j *JWKS) Done() <-chan struct{} { return j.stopped }

// startFetch starts a fetch and returns a channel closed when it ends. When
// a fetch is already running, it returns that fetch's channel, or nil when
// limited (on demand). A limited call also returns nil inside MinRefresh
// after the last fetch. It returns nil once the loop has stopped. The
// fetch's span is a child of parent when parent is valid.
func (j *JWKS) startFetch(limited bool, parent trace.SpanContext) <-chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	if j.inflight != nil {
		if limited {
			return nil
		}
		return j.inflight
	}
	if limited && !j.lastEnd.IsZero() && j.now().Sub(j.lastEnd) < j.opts.MinRefresh {
		return nil
	}
	done := make(chan struct{})
	j.inflight = done
	go j.fetch(done, parent)
	return done
}

// fetch runs one fetch, installs its keys when it succeeded, and closes
// done after the keys are in place.
func (j *JWKS) fetch(done chan struct{}, parent trace.SpanContext) {
	ctx, cancel := context.WithTimeout(j.ctx, j.opts.Timeout)
	defer cancel()
	ctx, span := j.tracer.Start(trace.ContextWithSpanContext(ctx, parent), "auth.jwks.refresh",
		trace.WithAttributes(sourceKey.String(j.source)))
	if j.opts.Name != "" {
		span.SetAttributes(issuerKey.String(j.opts.Name))
	}
	defer span.End()
	keys, err := j.fetchHedged(ctx)
	endSpan(span, err)
	if err == nil {
		span.SetAttributes(keysKey.Int(len(keys)))
	}
	if err != nil {
		j.m.Refresh(false)
		j.log.Warn("jwks fetch failed", zap.String("source", j.source), zap.Error(err),
			zap.Bool("keeping_old_keys", j.keys.Load() != nil))
	} else {
		j.m.Refresh(true)
		j.install(keys)
		j.confirmed.Store(j.now().UnixNano())
	}
	j.mu.Lock()
	j.inflight = nil
	j.lastEnd = j.now()
	j.lastErr = err
	j.mu.Unlock()
	close(done)
}

// A fetch that has had no answer for hedgeEvery while the keys are past
// their max_stale (refused) sends another request, and so on every
// hedgeEvery, at most maxHedges in all within the fetch's timeout, and
// takes the first that succeeds: an identity provider that hung and comes
// back is seen within about hedgeEvery, not once the hung request times
// out. While the keys serve, a fetch is one request.
const (
	hedgeEvery = time.Second
	maxHedges  = 4
)

// fetchHedged is fetchKeys, hedged while the keys are refused as stale.
func (j *JWKS) fetchHedged(ctx context.Context) ([]Key, error) {
	stale := func() bool {
		c := time.Duration(j.refreshCap.Load())
		return c > 0 && j.staleAt(j.now(), 2*c)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		keys []Key
		err  error
	}
	results := make(chan result, maxHedges) // never blocks a request that ends late
	start := func() {
		go func() {
			keys, err := j.fetchKeys(ctx)
			results <- result{keys, err}
		}()
	}
	start()
	sent, running := 1, 1
	t := time.NewTicker(hedgeEvery)
	defer t.Stop()
	var err error
	for running > 0 {
		select {
		case r := <-results:
			running--
			if r.err == nil {
				// The requests still running give up, and end before the
				// fetch does.
				cancel()
				for ; running > 0; running-- {
					<-results
				}
				return r.keys, nil
			}
			err = r.err
		case <-t.C:
			if sent < maxHedges && ctx.Err() == nil && stale() {
				start()
				sent++
				running++
			}
		}
	}
	return nil, err
}

// fetchKeys discovers the JWKS URL when needed, fetches it and decodes it.
func (j *JWKS) fetchKeys(ctx context.Context) ([]Key, error) {
	j.mu.Lock()
	u := j.jwksURL
	j.mu.Unlock()
	if u == "" {
		var err error
		dctx, span := j.tracer.Start(ctx, "auth.oidc.discovery", trace.WithSpanKind(trace.SpanKindClient))
		u, err = Discover(dctx, j.client, j.opts.Issuer, j.opts.MaxBytes)
		endSpan(span, err)
		span.End()
		if err != nil {
			return nil, err
		}
	}
	keys, err := j.fetchURL(ctx, u)
	j.mu.Lock()
	switch {
	case j.opts.URL != "":
	case err != nil && errors.Is(err, context.Canceled) && ctx.Err() != nil:
		// A hedged request given up once another answered.
	case err != nil:
		j.jwksURL = "" // discover again: the issuer may have moved its keys
	default:
		j.jwksURL = u
	}
	j.mu.Unlock()
	return keys, err
}

func (j *JWKS) fetchURL(ctx context.Context, u string) ([]Key, error) {
	ctx, span := j.tracer.Start(ctx, "auth.jwks.fetch", trace.WithSpanKind(trace.SpanKindClient))
	doc, err := getDocument(ctx, j.client, u, jwksAccept, j.opts.MaxBytes)
	endSpan(span, err)
	span.End()
	if err != nil {
		return nil, err
	}
	keys, skipped, err := decodeJWKS(doc)
	for _, s := range skipped {
		fields := []zap.Field{zap.String("source", j.source), zap.Int("index", s.Index), zap.String("kid", s.KID), zap.String("reason", s.Reason)}
		if s.Warn {
			j.log.Warn("jwks key skipped", fields...)
		} else {
			j.log.Debug("jwks key skipped", fields...)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("JWKS from %s: %w", setting.RedactURL(u), err)
	}
	if len(j.opts.Algorithms) > 0 && !NewKeySet(keys).fitsAny(j.opts.Algorithms) {
		return nil, fmt.Errorf("JWKS from %s: no key for the allowed algorithms %s", setting.RedactURL(u), strings.Join(j.opts.Algorithms, ","))
	}
	return keys, nil
}

// install moves the key gauge and makes keys the current set. Fetches
// run one at a time, so nothing else stores between the load and the
// store.
func (j *JWKS) install(keys []Key) {
	ks := NewKeySet(keys)
	old := j.keys.Load()
	if d := ks.Len() - old.Len(); d != 0 {
		j.m.AddKeys(d)
	}
	j.keys.Store(ks)
	if !sameKeys(old, ks) {
		// After the store: a verification that sees the new generation
		// sees the new keys.
		j.gen.Add(1)
	}
	if !slices.Equal(keyIDs(old), keyIDs(ks)) {
		j.log.Info("jwks keys updated", zap.String("source", j.source), zap.Strings("kids", keyIDs(ks)))
	}
}

func keyIDs(ks *KeySet) []string {
	if ks == nil {
		return nil
	}
	out := make([]string, 0, len(ks.all))
	for _, k := range ks.all {
		out = append(out, k.ID)
	}
	slices.Sort(out)
	return out
}

// run is the background loop: fetch, wait, fetch again, until ctx is done.
func (j *JWKS) run() {
	defer close(j.stopped)
	backoff := j.opts.MinBackoff
	for j.ctx.Err() == nil {
		if done := j.startFetch(false, trace.SpanContext{}); done != nil {
			select {
			case <-done:
			case <-j.ctx.Done():
			}
		}
		j.mu.Lock()
		failed := j.lastErr != nil
		j.mu.Unlock()
		wait := jitter(j.refreshPeriod())
		if failed {
			wait = min(wait, clamp(jitter(backoff), j.opts.MinBackoff, j.opts.MaxBackoff))
			backoff = min(2*backoff, j.opts.MaxBackoff)
		} else {
			backoff = j.opts.MinBackoff
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-j.kick:
			// The period was shortened: the next fetch is due that long
			// after the last one ended.
			t.Stop()
			if rest := j.refreshPeriod() - j.sinceLastEnd(); rest > 0 {
				t = time.NewTimer(rest)
				select {
				case <-t.C:
				case <-j.ctx.Done():
					t.Stop()
				}
			}
		case <-j.ctx.Done():
			t.Stop()
		}
	}
	j.mu.Lock()
	j.closed = true
	done := j.inflight
	j.mu.Unlock()
	if done != nil {
		<-done
	}
}

// refreshPeriod is the background refresh period: Refresh, or the cap
// keepFresh set when it is shorter.
func (j *JWKS) refreshPeriod() time.Duration {
	if c := time.Duration(j.refreshCap.Load()); c > 0 && c < j.opts.Refresh {
		return c
	}
	return j.opts.Refresh
}

// sinceLastEnd is how long ago the last fetch ended, by j's clock.
func (j *JWKS) sinceLastEnd() time.Duration {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.lastEnd.IsZero() {
		return 0
	}
	return j.now().Sub(j.lastEnd)
}

// keepFresh makes the background loop refresh often enough that, while
// fetches succeed, the keys are never older than maxAge: a period of half
// of it, when that is shorter than Refresh. Zero restores Refresh.
func (j *JWKS) keepFresh(maxAge time.Duration) {
	var c int64
	if maxAge > 0 {
		c = int64(maxAge / 2)
	}
	if j.refreshCap.Swap(c) != c {
		select {
		case j.kick <- struct{}{}:
		default:
		}
	}
}

// jitter returns d moved by a random amount within ±10%.
func jitter(d time.Duration) time.Duration {
	span := int64(d / 5)
	if span <= 0 {
		return d
	}
	return d - time.Duration(span/2) + time.Duration(rand.Int64N(span+1))
}

func clamp(d, lo, hi time.Duration) time.Duration {
	return max(lo, min(d, hi))
}
