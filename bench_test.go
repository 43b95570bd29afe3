package main

import (
	"context"
	"crypto"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/jws"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/auth/mint"
	"github.com/plantstore/plantstore/auth/revoke"
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/plants"
)

// benchCatalog returns n plants shaped like the sample catalog: every
// plant has a tag and one to three readers among a few groups, a few
// users and "*".
func benchCatalog(tb testing.TB, n int) *plants.Catalog {
	tb.Helper()
	readerSets := [][]string{
		{"*"},
		{"group:gardeners"},
		{"group:botanists", "user:bob"},
		{"group:gardeners", "group:botanists"},
		{"user:alice"},
		{"group:botanists"},
		{"user:carol", "group:gardeners", "*"},
	}
	tags := []string{"aroid", "succulent", "fern", "herb", "palm"}
	ps := make([]plants.Plant, n)
	for i := range ps {
		ps[i] = plants.Plant{
			Name:    fmt.Sprintf("Plant %06d", (i*7919)%n),
			Tag:     tags[i%len(tags)],
			Readers: readerSets[i%len(readerSets)],
		}
	}
	c, err := plants.NewCatalog(ps)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// benchEngine returns the API handler of the service over catalog, with a
// discarding logger and a real registry, whose verifier trusts one key per
// algorithm in algs, and a token for alice (group gardeners) per algorithm.
func benchEngine(tb testing.TB, catalog *plants.Catalog, logTo io.Writer, algs ...string) (http.Handler, map[string]string) {
	tb.Helper()
	return benchTracedEngine(tb, catalog, logTo, nil, algs...)
}

// benchTracedEngine is benchEngine with tracing's server spans.
func benchTracedEngine(tb testing.TB, catalog *plants.Catalog, logTo io.Writer, tracing *observability.Tracing, algs ...string) (http.Handler, map[string]string) {
	tb.Helper()
	return benchEngineWith(tb, catalog, logTo, tracing, auth.Options{Leeway: 30 * time.Second}, algs...)
}

// benchEngineWith is benchTracedEngine with the verifier's options.
func benchEngineWith(tb testing.TB, catalog *plants.Catalog, logTo io.Writer, tracing *observability.Tracing, opts auth.Options, algs ...string) (http.Handler, map[string]string) {
	tb.Helper()
	h, many := benchEngineTokensWith(tb, catalog, logTo, tracing, opts, 1, algs...)
	tokens := map[string]string{}
	for alg, ts := range many {
		tokens[alg] = ts[0]
	}
	return h, tokens
}

// benchEngineTokens is benchTracedEngine with n tokens per algorithm, each
// for another subject of group gardeners.
func benchEngineTokens(tb testing.TB, catalog *plants.Catalog, logTo io.Writer, tracing *observability.Tracing, n int, algs ...string) (http.Handler, map[string][]string) {
	tb.Helper()
	return benchEngineTokensWith(tb, catalog, logTo, tracing, auth.Options{Leeway: 30 * time.Second}, n, algs...)
}

// benchEngineTokensWith is benchEngineTokens with the verifier's options.
func benchEngineTokensWith(tb testing.TB, catalog *plants.Catalog, logTo io.Writer, tracing *observability.Tracing, opts auth.Options, n int, algs ...string) (http.Handler, map[string][]string) {
	tb.Helper()
	gin.SetMode(gin.ReleaseMode)
	log, access, err := observability.NewLogger(logTo, "info", "json")
	if err != nil {
		tb.Fatal(err)
	}
	reg := observability.NewRegistry("bench", "bench")
	am := auth.NewMetrics(reg)
	pm := plants.NewMetrics(reg)
	var (
		verify []keys.Key
		tokens = map[string][]string{}
	)
	for _, alg := range algs {
		priv, _, err := mint.GenerateKey(alg)
		if err != nil {
			tb.Fatal(err)
		}
		kid, err := keys.Thumbprint(priv.Public())
		if err != nil {
			tb.Fatal(err)
		}
		verify = append(verify, keys.Key{ID: kid, Algorithm: alg, Public: priv.Public()})
		tokens[alg] = append(tokens[alg], benchToken(tb, priv, alg, "alice", "gardeners"))
		for i := 1; i < n; i++ {
			tokens[alg] = append(tokens[alg], benchToken(tb, priv, alg, fmt.Sprintf("caller-%d", i), "gardeners"))
		}
	}
	cfg := auth.Config{
		Issuer:        "https://issuer.example",
		Audiences:     []string{"plantstore"},
		RequiredScope: "plants:read",
	}
	v, err := auth.NewVerifier(opts, auth.Issuer{Config: cfg, JWS: jws.New(keys.NewKeySet(verify))})
	if err != nil {
		tb.Fatal(err)
	}
	store := plants.NewMemoryStore(catalog, pm)
	return newAPIHandler(apiOptions{
		log: log, reg: reg, access: access, tracing: tracing,
		verifier: v, authMetrics: am, store: store, writeTimeout: time.Minute,
	}), tokens
}

func benchToken(tb testing.TB, priv crypto.Signer, alg, sub string, groups ...string) string {
	tb.Helper()
	token, err := mint.Mint(priv, alg, mint.Claims{
		Subject:  sub,
		Issuer:   "https://issuer.example",
		Audience: []string{"plantstore"},
		Groups:   groups,
		Scope:    "plants:read openid",
		TTL:      time.Hour,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return token
}

// discardWriter is a minimal http.ResponseWriter that keeps nothing but
// the status, so the benchmark measures the handler chain and not a
// recorder.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(s int)   { w.status = s }
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.n += len(p)
	return len(p), nil
}

// BenchmarkAPI serves GET /plants?limit=10 through the whole gin engine
// of the service (access log, metrics, error rendering, header limit,
// token verification, listing, encoding) with a real token per signing
// algorithm, over a 1,000-plant catalog. The target is at most 10
// allocations and 2 KiB per request; allocs/op and B/op are the figures.
func BenchmarkAPI(b *testing.B) {
	algs := []string{"RS256", "ES256", "EdDSA"}
	h, tokens := benchEngine(b, benchCatalog(b, 1_000), io.Discard, algs...)
	for _, alg := range algs {
		b.Run("alg="+alg, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/plants?limit=10", nil)
			req.Header.Set("Authorization", "Bearer "+tokens[alg])
			req.Header.Set("User-Agent", "bench")
			w := &discardWriter{h: http.Header{}}
			serve := func() {
				clear(w.h)
				w.status, w.n = 0, 0
				h.ServeHTTP(w, req)
			}
			allocs, bytes := checkBudget(b, serve)
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				w.status, w.n = 0, 0
				h.ServeHTTP(w, req)
				if w.status != http.StatusOK {
					b.Fatalf("GET /plants?limit=10: status %d, want 200", w.status)
				}
			}
			b.SetBytes(int64(w.n))
			// After the loop, which clears reported metrics when it starts.
			b.ReportMetric(allocs, "allocs/req")
			b.ReportMetric(bytes, "B/req")
		})
	}
}

// The budget of one GET /plants?limit=10 through the whole engine.
const (
	maxAllocsPerRequest = 10
	maxBytesPerRequest  = 2 << 10
)

// checkBudget measures the allocations and bytes of one call of serve
// (after a warm-up that fills the pools and the token cache) and fails the
// benchmark when they are over the budget.
func checkBudget(b *testing.B, serve func()) (allocs, bytes float64) {
	b.Helper()
	const runs = 1000
	serve()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		serve()
	}
	runtime.ReadMemStats(&after)
	allocs = float64(after.Mallocs-before.Mallocs) / runs
	bytes = float64(after.TotalAlloc-before.TotalAlloc) / runs
	if allocs > maxAllocsPerRequest || bytes > maxBytesPerRequest {
		b.Errorf("a request costs %.1f allocations and %.0f bytes; the budget is %d and %d", allocs, bytes, maxAllocsPerRequest, maxBytesPerRequest)
	}
	return allocs, bytes
}

// BenchmarkAPITraced is BenchmarkAPI for RS256 with tracing on as the
// OTEL_* variables set it: 1% of requests sampled, the spans exported over
// OTLP/HTTP to a receiver on 127.0.0.1. Set beside BenchmarkAPI/alg=RS256,
// it is the cost of a server span that is mostly not sampled.
func BenchmarkAPITraced(b *testing.B) {
	recv := newOTLPReceiver(b)
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
	b.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
	b.Setenv("OTEL_TRACES_SAMPLER_ARG", "0.01")
	tracing, err := observability.NewTracing(b.Context(), observability.TracingOptions{Getenv: os.Getenv, Version: "bench"})
	if err != nil || !tracing.Enabled() {
		b.Fatalf("NewTracing: enabled %t, %v", tracing.Enabled(), err)
	}
	b.Cleanup(func() { _ = tracing.Shutdown(context.Background()) })
	h, tokens := benchTracedEngine(b, benchCatalog(b, 1_000), io.Discard, tracing, "RS256")
	serveLoop(b, h, tokens["RS256"])
}

// serveLoop serves GET /plants?limit=10 with token through h for the
// benchmark's iterations, failing on any other status than 200.
func serveLoop(b *testing.B, h http.Handler, token string) {
	req := httptest.NewRequest(http.MethodGet, "/plants?limit=10", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("User-Agent", "bench")
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		w.status = 0
		h.ServeHTTP(w, req)
		if w.status != http.StatusOK {
			b.Fatalf("status %d, want 200", w.status)
		}
	}
}

// BenchmarkAPILogFile is BenchmarkAPI for RS256 with the access log
// written to a file through a LogOutput, as the service writes stderr:
// the difference is the price of the writes.
func BenchmarkAPILogFile(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "access.log"))
	if err != nil {
		b.Fatal(err)
	}
	out := observability.NewLogOutput(f)
	b.Cleanup(func() {
		out.Close()
		f.Close()
	})
	h, tokens := benchEngine(b, benchCatalog(b, 1_000), out, "RS256")
	serveLoop(b, h, tokens["RS256"])
}

// BenchmarkAPIParallel is BenchmarkAPI for RS256 with the requests spread
// over GOMAXPROCS goroutines, for contention in the shared state (metrics,
// pools, the token cache).
func BenchmarkAPIParallel(b *testing.B) {
	h, tokens := benchEngine(b, benchCatalog(b, 1_000), io.Discard, "RS256")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest(http.MethodGet, "/plants?limit=10", nil)
		req.Header.Set("Authorization", "Bearer "+tokens["RS256"])
		w := &discardWriter{h: http.Header{}}
		for pb.Next() {
			clear(w.h)
			w.status = 0
			h.ServeHTTP(w, req)
			if w.status != http.StatusOK {
				b.Errorf("status %d, want 200", w.status)
				return
			}
		}
	})
}

// BenchmarkAPIRevocations is BenchmarkAPI for ES256 with no revocations
// and with 10,000 in force (subjects, clients and jtis of the issuer, none
// the caller's): the promise that revocations cost a request within 2 % compares the two.
func BenchmarkAPIRevocations(b *testing.B) {
	now := time.Now()
	var many []revoke.Entry
	for i := range 10000 {
		id := fmt.Sprintf("3f0e1c52-9a4b-4d7e-8c21-%012d", i)
		switch i % 3 {
		case 0:
			many = append(many, revoke.Entry{Sub: id, Before: now})
		case 1:
			many = append(many, revoke.Entry{Client: id, Before: now})
		case 2:
			many = append(many, revoke.Entry{JTI: id, Until: now.Add(time.Hour)})
		}
	}
	catalog := benchCatalog(b, 1_000)
	// serve returns a function that makes one request of a server with
	// the first n revocations.
	serve := func(b *testing.B, n int) func() {
		opts := auth.Options{Leeway: 30 * time.Second}
		if n > 0 {
			r := revoke.New(revoke.Options{})
			r.Replace(many[:n], now)
			opts.Revocations = r
		}
		h, tokens := benchEngineWith(b, catalog, io.Discard, nil, opts, "ES256")
		req := httptest.NewRequest(http.MethodGet, "/plants?limit=10", nil)
		req.Header.Set("Authorization", "Bearer "+tokens["ES256"])
		w := &discardWriter{h: http.Header{}}
		return func() {
			clear(w.h)
			w.status, w.n = 0, 0
			h.ServeHTTP(w, req)
			if w.status != http.StatusOK {
				b.Fatalf("GET /plants?limit=10: status %d, want 200", w.status)
			}
		}
	}
	for _, n := range []int{0, len(many)} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			do := serve(b, n)
			b.ReportAllocs()
			for b.Loop() {
				do()
			}
		})
	}
	// The two in turns, each request timed: the medians' ratio is the
	// cost of the revocations, which a busy machine shifts for both alike.
	b.Run("in-turns", func(b *testing.B) {
		with, without := serve(b, len(many)), serve(b, 0)
		var dWith, dWithout []time.Duration
		for i := 0; b.Loop(); i++ {
			first, second := with, without
			if i%2 == 1 {
				first, second = without, with
			}
			t0 := time.Now()
			first()
			t1 := time.Now()
			second()
			t2 := time.Now()
			if i%2 == 1 {
				dWithout, dWith = append(dWithout, t1.Sub(t0)), append(dWith, t2.Sub(t1))
			} else {
				dWith, dWithout = append(dWith, t1.Sub(t0)), append(dWithout, t2.Sub(t1))
			}
		}
		median := func(d []time.Duration) float64 {
			slices.Sort(d)
			return float64(d[len(d)/2])
		}
		b.ReportMetric(median(dWith), "ns/op")
		b.ReportMetric(median(dWith)/median(dWithout), "x-none")
	})
}

// BenchmarkAPIRotating is BenchmarkAPI for RS256 with each request
// carrying the next of 1,000 tokens, all cached after the first round, as
// .ci/bench's rotation row sends them; set beside BenchmarkAPI/alg=RS256
// (one token) it is what rotating costs the service: a token cache hit on
// an entry that is not in the CPU's caches.
func BenchmarkAPIRotating(b *testing.B) {
	h, tokens := benchEngineTokens(b, benchCatalog(b, 1_000), io.Discard, nil, 1_000, "RS256")
	reqs := make([]*http.Request, len(tokens["RS256"]))
	for i, token := range tokens["RS256"] {
		reqs[i] = httptest.NewRequest(http.MethodGet, "/plants?limit=10", nil)
		reqs[i].Header.Set("Authorization", "Bearer "+token)
		reqs[i].Header.Set("User-Agent", "bench")
	}
	w := &discardWriter{h: http.Header{}}
	for _, req := range reqs { // fill the token cache
		h.ServeHTTP(w, req)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		clear(w.h)
		w.status = 0
		h.ServeHTTP(w, reqs[i])
		if w.status != http.StatusOK {
			b.Fatalf("status %d, want 200", w.status)
		}
		i = (i + 1) % len(reqs)
	}
}
