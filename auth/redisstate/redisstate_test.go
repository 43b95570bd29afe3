package redisstate_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/jws"
	"github.com/plantstore/plantstore/auth/redisstate"
	"github.com/plantstore/plantstore/auth/redisstate/redistest"
	"github.com/plantstore/plantstore/observability/metricstest"
	"github.com/plantstore/plantstore/observability/setting"
)

// publicURL is the resource every test replica serves.
const publicURL = "https://plants.example.com/plants"

// timeout is the replicas' -redis-timeout: longer than the default, so
// that a loaded test machine (or -race) does not make a Redis that
// answers look slow.
const timeout = 500 * time.Millisecond

// replica is one service replica as the verification sees it: a Verifier
// with its shared State, and the State's metrics and log.
type replica struct {
	v     *auth.Verifier
	state *redisstate.State
	reg   *prometheus.Registry
	logs  *observer.ObservedLogs
}

// newReplica returns a replica of issuer on the Redis at url, with the
// rate given (0: none).
func newReplica(t testing.TB, issuer authtest.Key, url string, rate float64, burst int) replica {
	t.Helper()
	return newReplicaOf(t, issuer, redisstate.Options{URL: url, Rate: rate, Burst: burst}, rate, burst)
}

// newState returns the State of o (its timeout the tests' unless o has
// one), closed when the test ends.
func newState(t testing.TB, o redisstate.Options) *redisstate.State {
	t.Helper()
	if o.Timeout == 0 {
		o.Timeout = timeout
	}
	s, err := redisstate.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newReplicaOf returns a replica of issuer with the State of so (its
// probe, log and registry set here, and its timeout unless so has one)
// and a limiter of its own of rate and burst (rate 0: none).
func newReplicaOf(t testing.TB, issuer authtest.Key, so redisstate.Options, rate float64, burst int) replica {
	t.Helper()
	reg := prometheus.NewRegistry()
	core, logs := observer.New(zap.InfoLevel)
	so.Probe, so.Log, so.Registerer = 20*time.Millisecond, zap.New(core), reg
	state := newState(t, so)
	o := auth.Options{Shared: state, PublicURL: mustURL(t, "https://plants.example.com")}
	if rate > 0 {
		var err error
		if o.RateLimit, err = auth.NewRateLimit(rate, burst); err != nil {
			t.Fatal(err)
		}
	}
	v, err := auth.NewVerifier(o, auth.Issuer{JWS: jws.New(authtest.KeySet(issuer))})
	if err != nil {
		t.Fatal(err)
	}
	return replica{v: v, state: state, reg: reg, logs: logs}
}

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// send authenticates a GET of /plants with the token and proof given ("" for
// a bearer request) and returns the refusal, nil when accepted.
func (r replica) send(token, proof string) error {
	req := httptest.NewRequest(http.MethodGet, publicURL, nil)
	if proof == "" {
		req.Header.Set("Authorization", "Bearer "+token)
	} else {
		req.Header.Set("Authorization", "DPoP "+token)
		req.Header.Set("DPoP", proof)
	}
	_, err := r.v.Authenticate(req)
	return err
}

// requests returns plantstore_shared_state_requests_total of op and result.
func (r replica) requests(t testing.TB, op, result string) float64 {
	t.Helper()
	return metricstest.Sum(t, r.reg, "plantstore_shared_state_requests_total", map[string]string{"op": op, "result": result})
}

func (r replica) up(t testing.TB) float64 {
	t.Helper()
	return metricstest.Sum(t, r.reg, "plantstore_shared_state_up", nil)
}

// bound returns a token of issuer bound to client's key.
func bound(t testing.TB, issuer, client authtest.Key, sub string) string {
	t.Helper()
	c := authtest.Claims(map[string]any{"sub": sub})
	c["cnf"] = map[string]any{"jkt": client.Thumbprint(t)}
	return authtest.Token(t, issuer, nil, c)
}

// reason returns the auth reason of err, "" for nil.
func reason(err error) string {
	var ae *auth.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ae):
		return string(ae.Reason)
	}
	var rl *auth.RateLimitError
	if errors.As(err, &rl) {
		return "rate"
	}
	return err.Error()
}

// TestReplayAcrossReplicas: a proof used at one replica is a replay at
// the other and at itself; a forged proof with a genuine one's jti spends
// nothing anywhere.
func TestReplayAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	a, b := newReplica(t, issuer, srv.URL(), 0, 0), newReplica(t, issuer, srv.URL(), 0, 0)
	token := bound(t, issuer, client, "alice")

	proof := authtest.Proof(t, client, "GET", publicURL, token, nil, nil)
	if err := a.send(token, proof); err != nil {
		t.Fatalf("first use at replica a: %v", err)
	}
	for name, r := range map[string]replica{"b": b, "a": a} {
		if got := reason(r.send(token, proof)); got != string(auth.ReasonDPoPReplay) {
			t.Errorf("replay at replica %s: %q; want %s", name, got, auth.ReasonDPoPReplay)
		}
	}

	genuine := authtest.Proof(t, client, "GET", publicURL, token, nil, nil)
	forged := genuine[:strings.LastIndexByte(genuine, '.')+1] + strings.Repeat("A", 86)
	if got := reason(a.send(token, forged)); got != string(auth.ReasonDPoPInvalid) {
		t.Fatalf("forged proof: %q; want %s", got, auth.ReasonDPoPInvalid)
	}
	if err := b.send(token, genuine); err != nil {
		t.Errorf("genuine proof after a forged one with its jti: %v; want accepted", err)
	}
	if got := reason(a.send(token, genuine)); got != string(auth.ReasonDPoPReplay) {
		t.Errorf("genuine proof again at a: %q; want %s", got, auth.ReasonDPoPReplay)
	}
	// a's calls: the first use, and the genuine proof b used; the replay
	// a saw itself and the forged proof cost none.
	if got := a.requests(t, redisstate.OpReplay, redisstate.ResultOK); got != 2 {
		t.Errorf("replica a counted %v replay calls ok; want 2", got)
	}
	if a.up(t) != 1 || b.up(t) != 1 {
		t.Errorf("up gauges %v, %v; want 1", a.up(t), b.up(t))
	}
}

// TestKeys: every key in Redis is a hash under the prefix, with an
// expiry, and a bearer request without a rate costs no call.
func TestKeys(t *testing.T) {
	srv := redistest.Start(t)
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	limited := newReplica(t, issuer, srv.URL(), 10, 5)
	for _, sub := range []string{"alice", "bob"} {
		token := bound(t, issuer, client, sub)
		if err := limited.send(token, authtest.Proof(t, client, "GET", publicURL, token, nil, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if err := limited.send(authtest.Token(t, issuer, nil, authtest.Claims(nil)), ""); err != nil {
		t.Fatal(err)
	}
	if got := limited.requests(t, redisstate.OpRate, redisstate.ResultOK); got != 3 {
		t.Errorf("%v rate calls; want 3, one a request", got)
	}

	plain := newReplica(t, issuer, srv.URL(), 0, 0)
	if err := plain.send(authtest.Token(t, issuer, nil, authtest.Claims(nil)), ""); err != nil {
		t.Fatal(err)
	}
	calls := 0.0
	for _, op := range []string{redisstate.OpRate, redisstate.OpReplay} {
		for _, res := range []string{redisstate.ResultOK, redisstate.ResultError, redisstate.ResultTimeout} {
			calls += plain.requests(t, op, res)
		}
	}
	if calls != 0 {
		t.Errorf("a bearer request without a rate made %v calls; want none", calls)
	}

	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	keys, err := c.Keys(t.Context(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	valid := regexp.MustCompile(`^plantstore:([rp]:[0-9a-f]{32}|c:[0-9a-f]{32}:[0-9]{1,16}|probe)$`)
	var rate, proofs int
	for _, k := range keys {
		if !valid.MatchString(k) {
			t.Errorf("key %q; want plantstore: and a hash", k)
		}
		if ttl := c.PTTL(t.Context(), k).Val(); ttl <= 0 {
			t.Errorf("key %q has no expiry (%v)", k, ttl)
		}
		switch {
		case strings.HasPrefix(k, "plantstore:r:"):
			rate++
		case strings.HasPrefix(k, "plantstore:p:"):
			proofs++
		}
	}
	if rate != 2 || proofs != 2 {
		t.Errorf("%d rate keys and %d proof keys in %v; want 2 and 2 (the bearer caller is the first DPoP one)", rate, proofs, keys)
	}
}

// TestRateShared: two replicas share each caller's rate: a caller sending
// far faster than its rate, to both in turn, gets the rate within 10 %
// once its burst is spent.
func TestRateShared(t *testing.T) {
	srv := redistest.Start(t)
	issuer := authtest.NewKey(t, "ES256")
	const rate, burst = 100.0, 20
	replicas := []replica{newReplica(t, issuer, srv.URL(), rate, burst), newReplica(t, issuer, srv.URL(), rate, burst)}
	caller := auth.CallerKey("", "alice")
	// The burst first, at once: a full bucket loses what time would add
	// to it, so the measure starts from an empty one.
	for range burst + 5 {
		if _, err := replicas[0].state.Admit(t.Context(), auth.Admission{Caller: caller}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	var ok, tries int
	// full is how long the bucket takes to fill: a pause of the test
	// longer than that (a busy machine) lets tokens overflow, which the
	// lower bound must not count as the limiter's.
	full := time.Duration(float64(burst) / rate * float64(time.Second))
	var lost time.Duration
	last := start
	for i := 0; time.Since(start) < 500*time.Millisecond; i++ {
		tries++
		v, err := replicas[i%2].state.Admit(t.Context(), auth.Admission{Caller: caller})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if gap := now.Sub(last); gap > full {
			lost += gap - full
		}
		last = now
		if !v.Limited {
			ok++
		} else if v.RetryAfter <= 0 || v.RetryAfter > time.Second/rate {
			t.Fatalf("retry after %v; want within one interval", v.RetryAfter)
		}
	}
	elapsed := time.Since(start)
	want := rate * elapsed.Seconds()
	if tries < 2*int(want) {
		t.Fatalf("%d requests in %v; the test needs at least twice the rate", tries, elapsed)
	}
	least := rate * (elapsed - lost).Seconds()
	if float64(ok) > want*1.1+burst || float64(ok) < least*0.9 {
		t.Errorf("%d of %d admitted in %v over two replicas after the burst (%v of pauses past a full bucket); want %.0f within 10%% (plus the burst of %d), at least %.0f", ok, tries, elapsed, lost, want, burst, least*0.9)
	}
}

// TestDown: with Redis stopped, requests are served by each replica's own
// state (a replay to the same replica refused), the failure is counted
// and logged once, the gauge reads 0; when Redis is back, the shared state
// is used again.
func TestDown(t *testing.T) {
	srv := redistest.Start(t)
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	a, b := newReplica(t, issuer, srv.URL(), 1000, 100), newReplica(t, issuer, srv.URL(), 1000, 100)
	token := bound(t, issuer, client, "alice")
	before := authtest.Proof(t, client, "GET", publicURL, token, nil, nil)
	if err := a.send(token, before); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	for i := range 5 {
		if err := a.send(token, authtest.Proof(t, client, "GET", publicURL, token, nil, nil)); err != nil {
			t.Fatalf("request %d with Redis stopped: %v", i, err)
		}
	}
	if got := reason(a.send(token, before)); got != string(auth.ReasonDPoPReplay) {
		t.Errorf("replay at the same replica with Redis stopped: %q; want %s", got, auth.ReasonDPoPReplay)
	}
	if a.state.Up() || a.up(t) != 0 {
		t.Errorf("up %v, gauge %v with Redis stopped; want down, 0", a.state.Up(), a.up(t))
	}
	if got := a.requests(t, redisstate.OpReplay, redisstate.ResultError) + a.requests(t, redisstate.OpReplay, redisstate.ResultTimeout); got != 1 {
		t.Errorf("%v failed calls counted; want 1: the state is down after it", got)
	}
	if n := a.logs.FilterMessageSnippet("shared state unavailable").Len(); n != 1 {
		t.Errorf("%d warnings; want 1", n)
	}
	if w := a.logs.FilterMessageSnippet("shared state unavailable").All(); len(w) == 1 && w[0].Level != zap.WarnLevel {
		t.Errorf("level %v; want warn", w[0].Level)
	}

	srv.Start()
	waitUp(t, a)
	if n := a.logs.FilterMessage("shared state restored").Len(); n != 1 {
		t.Errorf("%d restored lines; want 1", n)
	}
	// Redis restarted empty: a proof used now is shared again.
	fresh := authtest.Proof(t, client, "GET", publicURL, token, nil, nil)
	if err := a.send(token, fresh); err != nil {
		t.Fatal(err)
	}
	waitUp(t, b)
	if got := reason(b.send(token, fresh)); got != string(auth.ReasonDPoPReplay) {
		t.Errorf("replay at the other replica once Redis is back: %q; want %s", got, auth.ReasonDPoPReplay)
	}
}

// waitUp waits for r's state to be up again (its probe runs every 20ms).
func waitUp(t testing.TB, r replica) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !r.state.Up() {
		if time.Now().After(deadline) {
			t.Fatal("shared state not restored within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r.up(t) != 1 {
		t.Errorf("gauge %v once restored; want 1", r.up(t))
	}
}

// TestPaused: a Redis that stops answering (SIGSTOP) makes a call time out
// after the timeout, counted as a timeout; the request is served.
func TestPaused(t *testing.T) {
	srv := redistest.Start(t)
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	a := newReplica(t, issuer, srv.URL(), 0, 0)
	token := bound(t, issuer, client, "alice")
	if err := a.send(token, authtest.Proof(t, client, "GET", publicURL, token, nil, nil)); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	start := time.Now()
	if err := a.send(token, authtest.Proof(t, client, "GET", publicURL, token, nil, nil)); err != nil {
		t.Fatalf("request with Redis paused: %v", err)
	}
	if d := time.Since(start); d < timeout || d > 4*timeout {
		t.Errorf("request took %v with Redis paused; want about the timeout, %v", d, timeout)
	}
	if got := a.requests(t, redisstate.OpReplay, redisstate.ResultTimeout); got != 1 {
		t.Errorf("%v timeouts counted; want 1", got)
	}
	start = time.Now()
	if err := a.send(token, authtest.Proof(t, client, "GET", publicURL, token, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d >= timeout {
		t.Errorf("a request while the state is down took %v; want no wait for Redis", d)
	}
	srv.Resume()
	waitUp(t, a)
}

// TestStartDown: a State whose Redis does not answer at start is down,
// never an error, and comes up once Redis does.
func TestStartDown(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	issuer := authtest.NewKey(t, "ES256")
	a := newReplica(t, issuer, srv.URL(), 0, 0)
	if a.state.Up() || a.up(t) != 0 {
		t.Fatal("up with Redis stopped")
	}
	if _, err := a.state.Admit(context.Background(), auth.Admission{DPoP: true}); err == nil {
		t.Error("Admit answered with the state down")
	}
	srv.Start()
	waitUp(t, a)
}

// TestRateBeforeProof: a caller over its shared rate is refused before its
// proof is recorded: Redis holds only the proofs of admitted requests.
func TestRateBeforeProof(t *testing.T) {
	srv := redistest.Start(t)
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	a, b := newReplica(t, issuer, srv.URL(), 1.0/3600, 2), newReplica(t, issuer, srv.URL(), 1.0/3600, 2)
	token := bound(t, issuer, client, "alice")
	for i, r := range []replica{a, b} {
		if err := r.send(token, authtest.Proof(t, client, "GET", publicURL, token, nil, nil)); err != nil {
			t.Fatalf("request %d within the burst: %v", i, err)
		}
	}
	err := a.send(token, authtest.Proof(t, client, "GET", publicURL, token, nil, nil))
	var rl *auth.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter < time.Hour-time.Minute || rl.RetryAfter > time.Hour {
		t.Fatalf("third request over two replicas: %v; want a rate refusal retrying after about an hour", err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	keys, err := c.Keys(t.Context(), "plantstore:p:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Errorf("%d proofs recorded; want the 2 admitted ones", len(keys))
	}
}

// BenchmarkAdmit is one admission of a DPoP request with a rate: one
// round trip to a loopback redis-server, from parallel callers.
func BenchmarkAdmit(b *testing.B) {
	srv := redistest.Start(b)
	state := newState(b, redisstate.Options{URL: srv.URL(), Rate: 1e6, Burst: 1e6})
	var n atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			a := auth.Admission{Caller: auth.CallerKey("", "alice"), DPoP: true, Now: time.Now(), Expires: time.Now().Add(2 * time.Minute), Life: 2 * time.Minute}
			a.Proof[0], a.Proof[1], a.Proof[2], a.Proof[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
			v, err := state.Admit(context.Background(), a)
			if err != nil || v.Limited || v.Replay {
				b.Fatalf("admission %d: %+v, %v", i, v, err)
			}
		}
	})
}

// redisKeys returns the keys in the Redis at addr that match pattern.
func redisKeys(t testing.TB, addr, pattern string) []string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	keys, err := c.Keys(t.Context(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestCallerShare: one caller with many keys of its own and a fresh jti
// for every proof, sent to two replicas, cannot hold more than its share
// of Redis: past it, its proofs are refused with dpop_quota and write
// nothing, while another caller is served; the store's keys and memory
// are metrics.
func TestCallerShare(t *testing.T) {
	srv := redistest.Start(t)
	issuer := authtest.NewKey(t, "ES256")
	const share = 40
	so := redisstate.Options{URL: srv.URL(), CallerProofs: share}
	replicas := []replica{newReplicaOf(t, issuer, so, 0, 0), newReplicaOf(t, issuer, so, 0, 0)}
	var accepted, quota int
	for i := range 8 {
		client := authtest.NewKey(t, "ES256")
		token := bound(t, issuer, client, "mallory")
		for j := range 15 {
			switch err := replicas[(i+j)%2].send(token, authtest.Proof(t, client, "GET", publicURL, token, nil, nil)); reason(err) {
			case "":
				accepted++
			case string(auth.ReasonDPoPQuota):
				quota++
				var ae *auth.Error
				if errors.As(err, &ae) && (ae.RetryAfter <= 0 || ae.RetryAfter > 3*time.Minute) {
					t.Errorf("dpop_quota retry after %v; want within the proofs' life", ae.RetryAfter)
				}
			default:
				t.Fatalf("proof %d of key %d: %v", j, i, err)
			}
		}
	}
	if accepted != share || quota != 8*15-share {
		t.Errorf("%d accepted, %d dpop_quota; want %d and %d", accepted, quota, share, 8*15-share)
	}
	if keys := redisKeys(t, srv.Addr(), "plantstore:p:*"); len(keys) != share {
		t.Errorf("%d proof keys in Redis from one caller; want its share, %d", len(keys), share)
	}
	client := authtest.NewKey(t, "ES256")
	token := bound(t, issuer, client, "alice")
	if err := replicas[0].send(token, authtest.Proof(t, client, "GET", publicURL, token, nil, nil)); err != nil {
		t.Errorf("another caller: %v; want accepted", err)
	}
	if n := metricstest.Sum(t, replicas[0].reg, "plantstore_shared_state_keys", nil); n < share+1 {
		t.Errorf("plantstore_shared_state_keys %v; want at least the %d proofs", n, share+1)
	}
	if n := metricstest.Sum(t, replicas[0].reg, "plantstore_shared_state_memory_bytes", nil); n <= 0 {
		t.Errorf("plantstore_shared_state_memory_bytes %v; want Redis's used memory", n)
	}
	if n := metricstest.Sum(t, replicas[0].reg, "plantstore_shared_state_evicts", nil); n != 0 {
		t.Errorf("plantstore_shared_state_evicts %v with noeviction; want 0", n)
	}
}

// TestLocalRateBeforeRedis: a caller over this replica's own rate is
// refused before anything is written to Redis, even when the shared state
// limits no rate.
func TestLocalRateBeforeRedis(t *testing.T) {
	srv := redistest.Start(t)
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	a := newReplicaOf(t, issuer, redisstate.Options{URL: srv.URL()}, 1.0/3600, 2)
	token := bound(t, issuer, client, "alice")
	var limited int
	for range 10 {
		var rl *auth.RateLimitError
		if err := a.send(token, authtest.Proof(t, client, "GET", publicURL, token, nil, nil)); errors.As(err, &rl) {
			limited++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if limited != 8 {
		t.Errorf("%d of 10 refused for the rate; want 8 past the burst of 2", limited)
	}
	if keys := redisKeys(t, srv.Addr(), "plantstore:p:*"); len(keys) != 2 {
		t.Errorf("%d proofs in Redis; want the 2 admitted", len(keys))
	}
	if got := a.requests(t, redisstate.OpReplay, redisstate.ResultOK); got != 2 {
		t.Errorf("%v calls to Redis; want 2, none for a refused request", got)
	}
}

// TestEvictionPolicyWarned: a Redis whose maxmemory-policy can evict
// proof keys is warned of at start and shown by a metric.
func TestEvictionPolicyWarned(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	if err := c.ConfigSet(t.Context(), "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	a := newReplica(t, authtest.NewKey(t, "ES256"), srv.URL(), 0, 0)
	w := a.logs.FilterMessageSnippet("maxmemory-policy can evict").All()
	if len(w) != 1 || w[0].Level != zap.WarnLevel || w[0].ContextMap()["maxmemory_policy"] != "volatile-lru" {
		t.Errorf("warnings %v; want one naming volatile-lru", w)
	}
	if n := metricstest.Sum(t, a.reg, "plantstore_shared_state_evicts", nil); n != 1 {
		t.Errorf("plantstore_shared_state_evicts %v; want 1", n)
	}
}

// redisCalls returns the commands the Redis at addr ran, INFO left out, a
// script's own commands included; with scripts set, the scripts alone
// (EVALSHA and EVAL): the round trips of a State.
func redisCalls(t testing.TB, addr string, scripts bool) int64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	text, err := c.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, m := range regexp.MustCompile(`(?m)^cmdstat_([^:]+):calls=(\d+)`).FindAllStringSubmatch(text, -1) {
		if m[1] == "info" || m[1] == "hello" || m[1] == "client|setinfo" || scripts && m[1] != "evalsha" && m[1] != "eval" {
			continue
		}
		var calls int64
		if _, err := fmt.Sscan(m[2], &calls); err != nil {
			t.Fatal(err)
		}
		n += calls
	}
	return n
}

// TestOneRoundTrip: 1,000 DPoP requests whose proofs fail their signature
// cost Redis nothing, and each accepted one a single command (the
// script), counted by Redis itself.
func TestOneRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	issuer := authtest.NewKey(t, "ES256")
	a := newReplica(t, issuer, srv.URL(), 1000, 1000)
	before := redisCalls(t, srv.Addr(), false)
	// Forged proofs from 63 callers, each with a key of its own, 16 each
	// (the budget of failed signatures, past which they would be refused
	// before their signature), and 8 more from the first.
	forged := 0
	for i := 0; forged < 1000; i++ {
		client := authtest.NewKey(t, "ES256")
		token := bound(t, issuer, client, fmt.Sprintf("mallory-%d", i))
		for range min(16, 1000-forged) {
			genuine := authtest.Proof(t, client, "GET", publicURL, token, nil, nil)
			proof := genuine[:strings.LastIndexByte(genuine, '.')+1] + strings.Repeat("A", 86)
			if got := reason(a.send(token, proof)); got != string(auth.ReasonDPoPInvalid) {
				t.Fatalf("forged proof %d: %q; want %s", forged, got, auth.ReasonDPoPInvalid)
			}
			forged++
		}
	}
	if got := redisCalls(t, srv.Addr(), false) - before; got != 0 {
		t.Errorf("1,000 forged proofs cost Redis %d commands; want none", got)
	}
	client := authtest.NewKey(t, "ES256")
	token := bound(t, issuer, client, "alice")
	before = redisCalls(t, srv.Addr(), true)
	for i := range 100 {
		if err := a.send(token, authtest.Proof(t, client, "GET", publicURL, token, nil, nil)); err != nil {
			t.Fatalf("valid proof %d: %v", i, err)
		}
	}
	if got := redisCalls(t, srv.Addr(), true) - before; got != 100 {
		t.Errorf("100 valid proofs cost Redis %d scripts; want 100, one round trip each", got)
	}
}

// TestKeyedHashes: with a secret, no key in Redis holds the plain hash of
// a caller (what anyone can compute from a guessed subject) nor of a
// proof; after the secret is rotated, on every replica, a proof used
// under the previous one is still a replay at the other replica, and the
// caller is served under the new keys.
func TestKeyedHashes(t *testing.T) {
	srv := redistest.Start(t)
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	var secret atomic.Pointer[[]byte]
	first := []byte(strings.Repeat("s", 32))
	secret.Store(&first)
	so := redisstate.Options{URL: srv.URL(), Rate: 100, Burst: 100, Secret: func() []byte { return *secret.Load() }}
	a, b := newReplicaOf(t, issuer, so, 100, 100), newReplicaOf(t, issuer, so, 100, 100)
	token := bound(t, issuer, client, "alice@example.com")
	used := authtest.Proof(t, client, "GET", publicURL, token, nil, nil)
	if err := a.send(token, used); err != nil {
		t.Fatal(err)
	}
	caller := auth.CallerKey("", "alice@example.com")
	plain := []string{hex.EncodeToString(caller[:])}
	keys := redisKeys(t, srv.Addr(), "*")
	for _, k := range keys {
		for _, p := range plain {
			if strings.Contains(k, p) {
				t.Errorf("key %q holds the plain hash of the caller", k)
			}
		}
	}
	if len(keys) < 3 {
		t.Errorf("keys %v; want the caller's rate, its proof and its count", keys)
	}

	second := []byte(strings.Repeat("t", 32))
	secret.Store(&second)
	if got := reason(b.send(token, used)); got != string(auth.ReasonDPoPReplay) {
		t.Errorf("a proof used before the rotation, at the other replica after it: %q; want %s", got, auth.ReasonDPoPReplay)
	}
	fresh := authtest.Proof(t, client, "GET", publicURL, token, nil, nil)
	if err := b.send(token, fresh); err != nil {
		t.Fatalf("a new proof after the rotation: %v", err)
	}
	if got := reason(a.send(token, fresh)); got != string(auth.ReasonDPoPReplay) {
		t.Errorf("its replay at the first replica: %q; want %s", got, auth.ReasonDPoPReplay)
	}
}

// TestKeyFile: -redis-key-file's secret is read at start and again on
// Reload; a short one is refused at start, and kept out on Reload.
func TestKeyFile(t *testing.T) {
	path := t.TempDir() + "/redis.key"
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var se *setting.Error
	if _, err := redisstate.LoadKeyFile(path); !errors.As(err, &se) || se.Key != "redis_key_file" || strings.Contains(err.Error(), "short") {
		t.Fatalf("a short secret: %v; want a redis_key_file error that does not show it", err)
	}
	one := strings.Repeat("1", 32)
	if err := os.WriteFile(path, []byte(one+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := redisstate.LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(f.Secret()) != one {
		t.Fatalf("secret %q; want the file's, its newline dropped", f.Secret())
	}
	core, logs := observer.New(zap.InfoLevel)
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.Reload(zap.New(core))
	if string(f.Secret()) != one || logs.FilterMessageSnippet("refused").Len() != 1 {
		t.Errorf("after a short secret: %q, %d refusals logged; want the previous secret kept, 1", f.Secret(), logs.FilterMessageSnippet("refused").Len())
	}
	two := strings.Repeat("2", 40)
	if err := os.WriteFile(path, []byte(two), 0o600); err != nil {
		t.Fatal(err)
	}
	f.Reload(zap.New(core))
	if string(f.Secret()) != two || logs.FilterMessageSnippet("rotated").Len() != 1 {
		t.Errorf("after a new secret: %q; want it", f.Secret())
	}
}
