package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth/mint"
	"github.com/plantstore/plantstore/observability/testenv"
	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
	"github.com/plantstore/plantstore/plants/postgres/pgtest"
)

// abuseCatalog writes a catalog of 1,000 plants: a third open to "*", the
// rest read by one of 20 groups, and returns its path.
func abuseCatalog(t testing.TB) (string, *plants.Catalog) {
	t.Helper()
	var sb strings.Builder
	sb.WriteString("[")
	for i := range 1000 {
		if i > 0 {
			sb.WriteString(",")
		}
		reader := "*"
		if i%3 != 0 {
			reader = fmt.Sprintf("group:g%02d", i%20)
		}
		fmt.Fprintf(&sb, `{"name":"Plant %04d","tag":"t","readers":[%q]}`, i, reader)
	}
	sb.WriteString("]")
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := plants.LoadCatalogFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, c
}

// signer mints tokens for the tests of this file with a key pair made by
// the keygen command.
type signer struct {
	key     any
	keyFile string // the public JWKS
}

func newSigner(t testing.TB) signer {
	t.Helper()
	prefix := filepath.Join(t.TempDir(), "key")
	if err := run(context.Background(), []string{"keygen", "-alg", "EdDSA", "-out", prefix}, nil, nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(prefix + ".key")
	if err != nil {
		t.Fatal(err)
	}
	key, err := mint.ParsePrivateKey(data)
	if err != nil {
		t.Fatal(err)
	}
	return signer{key: key, keyFile: prefix + ".jwks.json"}
}

func (s signer) token(t testing.TB, sub string, groups []string) string {
	t.Helper()
	tok, err := mint.Mint(s.key, "EdDSA", mint.Claims{Subject: sub, Groups: groups, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// maxGroups returns the 256 groups of a largest valid token: names as long
// as the 8 KiB header allows, that no plant names.
func maxGroups(seed int) []string {
	g := make([]string, 256)
	for i := range g {
		g[i] = fmt.Sprintf("hostile-%d-%03d-%s", seed, i, strings.Repeat("x", 4))
	}
	return g
}

// latencies sends GET url with token n times, one after another, and
// returns the sorted latencies.
func latencies(t testing.TB, client *http.Client, url, token string, n int) []time.Duration {
	t.Helper()
	out := make([]time.Duration, 0, n)
	for range n {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d", url, resp.StatusCode)
		}
		out = append(out, time.Since(start))
	}
	slices.Sort(out)
	return out
}

func pct(d []time.Duration, p float64) time.Duration { return d[int(float64(len(d)-1)*p)] }

// TestHostileTokensCost measures what the largest valid tokens (256 groups
// of long names, each loop its own token) cost an ordinary caller (2
// groups), on the memory store, on PostgreSQL read per request and on a
// snapshot of PostgreSQL: the
// ordinary caller's p50 and p99 alone, while 64 loops send ordinary
// tokens, and while 64 loops send the largest tokens. The goal, that the
// largest tokens cost it under 3 times what the same load of ordinary
// tokens does, is a figure to read in the log (-v), not a pass mark: the
// p99 of 400 requests on a shared machine wanders past it now and then
// (the snapshot read 1.6x to 2.2x alone, and 3.15x once inside a whole
// go test ./..., whose other tests shared the cores). What fails the test
// is a cost that grows with the groups, as the per-request query's did
// before the groups were bounded (hundreds of times the ordinary p99): 10
// times the ordinary load's p99.
func TestHostileTokensCost(t *testing.T) {
	testenv.Soak(t)
	data, _ := abuseCatalog(t)
	sg := newSigner(t)
	type store struct {
		name string
		args []string
	}
	stores := []store{{"memory", []string{"-data", data}}}
	dsn := pgtest.NewSchema(t)
	if _, err := postgres.Migrate(t.Context(), dsn); err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), []string{"import", "-database-url", dsn, data}, nil, nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	stores = append(stores,
		store{"postgres, read per request", []string{"-database-url", dsn, "-database-snapshot=false"}},
		store{"postgres snapshot", []string{"-database-url", dsn}})

	ordinary := sg.token(t, "ordinary", []string{"g01", "g02"})
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			in, _ := startQuiet(t, append([]string{"-jwt-key-file", sg.keyFile}, st.args...)...)
			waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
			client := loadClient(t, 70)
			url := in.api + "/plants?limit=10"
			latencies(t, client, url, ordinary, 50) // warm up
			measure := func(loopToken func(i int) string) (p50, p99 time.Duration) {
				ctx, cancel := context.WithCancel(t.Context())
				var wg sync.WaitGroup
				// The measure starts once the loops have sent ten requests
				// each: they are at their pace by then.
				var sent atomic.Int64
				paced := make(chan struct{})
				for i := range 64 {
					if loopToken == nil {
						break
					}
					tok := loopToken(i)
					wg.Go(func() {
						for ctx.Err() == nil {
							req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
							req.Header.Set("Authorization", "Bearer "+tok)
							if resp, err := client.Do(req); err == nil {
								io.Copy(io.Discard, resp.Body)
								resp.Body.Close()
							}
							if sent.Add(1) == 640 {
								close(paced)
							}
						}
					})
				}
				if loopToken != nil {
					<-paced
				}
				d := latencies(t, client, url, ordinary, 400)
				cancel()
				wg.Wait()
				return pct(d, 0.5), pct(d, 0.99)
			}
			q50, q99 := measure(nil)
			l50, l99 := measure(func(i int) string { return sg.token(t, fmt.Sprintf("loop-%d", i), []string{"g03", "g04"}) })
			a50, a99 := measure(func(i int) string { return sg.token(t, fmt.Sprintf("hostile-%d", i), maxGroups(i)) })
			t.Logf("ordinary caller, p50/p99: alone %v/%v; 64 loops of ordinary tokens %v/%v; 64 loops of 256-group tokens %v/%v; p99 ratio %.2fx (goal < 3x)",
				q50, q99, l50, l99, a50, a99, float64(a99)/float64(l99))
			if a99 > 10*l99 {
				t.Errorf("p99 under the largest tokens %v, over 10 x %v under the same load of ordinary tokens: their cost grows with their groups", a99, l99)
			}
		})
	}
}

// TestTokenMemoryBounded sends 20,000 distinct valid tokens of 4 KiB with
// 70 groups each, then 20,000 subjects of 5 KiB with -rate-limit on, to a
// service in its own process, and checks that its peak resident memory
// stays under 128 MiB above what it held at rest.
func TestTokenMemoryBounded(t *testing.T) {
	testenv.Soak(t)
	sg := newSigner(t)
	c := startChild(t, nil, "-jwt-key-file", sg.keyFile, "-rate-limit", "1000")
	waitFor(t, patience, "/readyz 200", answers(c.admin+"/readyz", http.StatusOK))
	client := loadClient(t, 8)
	send := func(tokens []string) {
		var wg sync.WaitGroup
		next := make(chan string)
		for range 8 {
			wg.Go(func() {
				for tok := range next {
					req, _ := http.NewRequest(http.MethodGet, c.api+"/plants?limit=1", nil)
					req.Header.Set("Authorization", "Bearer "+tok)
					resp, err := client.Do(req)
					if err != nil {
						t.Error(err)
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Errorf("status %d, want 200", resp.StatusCode)
					}
				}
			})
		}
		for _, tok := range tokens {
			next <- tok
		}
		close(next)
		wg.Wait()
	}
	send([]string{sg.token(t, "warm", nil)})
	idle := c.status(t, "VmRSS")

	groups := make([]string, 70)
	for i := range groups {
		groups[i] = fmt.Sprintf("group-with-a-name-of-some-length-%02d", i)
	}
	const n = 20000
	var big []string
	for i := range n {
		sub := fmt.Sprintf("user-%05d-%s", i, strings.Repeat("s", 250))
		tok := sg.token(t, sub, groups)
		if i == 0 && (len(tok) < 3800 || len(tok) > 4400) {
			t.Fatalf("a token of %d bytes, want about 4 KiB", len(tok))
		}
		big = append(big, tok)
	}
	send(big)
	big = nil
	var subjects []string
	for i := range n {
		subjects = append(subjects, sg.token(t, fmt.Sprintf("%05d%s", i, strings.Repeat("u", 5<<10)), nil))
	}
	send(subjects)
	peak := c.status(t, "VmHWM")
	t.Logf("resident memory: %d KiB at rest, %d KiB at the peak: %d KiB for %d large tokens and %d large subjects",
		idle, peak, peak-idle, n, n)
	if peak-idle > 128<<10 {
		t.Errorf("peak resident memory %d KiB above rest, want under 128 MiB", peak-idle)
	}
	var metrics bytes.Buffer
	resp, err := http.Get(c.admin + "/metrics")
	if err == nil {
		io.Copy(&metrics, resp.Body)
		resp.Body.Close()
	}
	for _, m := range regexp.MustCompile(`(?m)^(go_memstats_heap_inuse_bytes|go_gc_heap_goal_bytes|go_memstats_heap_alloc_bytes) .*$`).FindAllString(metrics.String(), -1) {
		t.Log(m)
	}
}
