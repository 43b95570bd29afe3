package main

import (
	"bufio"
	"bytes"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth/mint"
	"github.com/plantstore/plantstore/observability/logtest"
	"github.com/plantstore/plantstore/observability/testenv"
	"github.com/plantstore/plantstore/plants"
)

// loadUser is one caller of the load test, with its valid token and the
// list the service must send it.
type loadUser struct {
	id    plants.Caller
	token string
	want  []wirePlant
}

// loadFixture is a catalog file, a key file and the callers of a load test.
type loadFixture struct {
	data, keyFile string
	users         []loadUser
	invalid       []string // tokens that must be refused with 401
}

// newLoadFixture writes a catalog of n plants read by users u0..u(users-1)
// through their own name, ten groups and "*", and mints a token for each
// user and a set of invalid tokens.
func newLoadFixture(t testing.TB, n, users int) loadFixture {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	var sb strings.Builder
	sb.WriteString("[")
	for i := range n {
		if i > 0 {
			sb.WriteString(",\n")
		}
		var readers []string
		switch rng.IntN(4) {
		case 0:
			readers = append(readers, "*")
		case 1:
			readers = append(readers, fmt.Sprintf("group:g%d", rng.IntN(10)))
		}
		for range rng.IntN(3) {
			readers = append(readers, fmt.Sprintf("user:u%d", rng.IntN(users)))
		}
		if len(readers) == 0 {
			readers = append(readers, "user:nobody")
		}
		r, _ := json.Marshal(readers)
		tag := ""
		if i%3 == 0 {
			tag = fmt.Sprintf(`,"tag":"t%d"`, i%7)
		}
		fmt.Fprintf(&sb, `{"name":"Plant %05d"%s,"readers":%s}`, rng.IntN(n), tag, r)
	}
	sb.WriteString("]")
	f := loadFixture{data: filepath.Join(dir, "catalog.json")}
	if err := os.WriteFile(f.data, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	catalog, err := plants.LoadCatalogFile(f.data)
	if err != nil {
		t.Fatal(err)
	}

	prefix := filepath.Join(dir, "key")
	if err := run(t.Context(), []string{"keygen", "-alg", "EdDSA", "-out", prefix}, envOf(nil), nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	f.keyFile = prefix + ".jwks.json"
	pem, err := os.ReadFile(prefix + ".key")
	if err != nil {
		t.Fatal(err)
	}
	key, err := mint.ParsePrivateKey(pem)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(c mint.Claims) string {
		t.Helper()
		tok, err := mint.Mint(key, "EdDSA", c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for i := range users {
		id := plants.Caller{Subject: fmt.Sprintf("u%d", i), Groups: []string{fmt.Sprintf("g%d", i%10)}}
		if i%4 == 0 {
			id.Groups = append(id.Groups, fmt.Sprintf("g%d", (i+3)%10))
		}
		f.users = append(f.users, loadUser{
			id:    id,
			token: sign(mint.Claims{Subject: id.Subject, Groups: id.Groups, TTL: time.Hour}),
			want:  expectedPlants(catalog, id),
		})
	}
	other, _, err := mint.GenerateKey("EdDSA")
	if err != nil {
		t.Fatal(err)
	}
	good := f.users[0].token
	f.invalid = []string{
		sign(mint.Claims{Subject: "u1", TTL: time.Hour, Now: time.Now().Add(-3 * time.Hour)}), // expired
		good[:len(good)-4] + "AAAA",                                    // signature changed
		good[:strings.LastIndexByte(good, '.')] + ".",                  // signature stripped
		mustMint(t, other, mint.Claims{Subject: "u2", TTL: time.Hour}), // unknown key
		"eyJhbGciOiJub25lIn0.eyJzdWIiOiJ1MyJ9.",                        // alg none
		"not-a-jwt",
	}
	return f
}

func mustMint(t testing.TB, key crypto.PrivateKey, c mint.Claims) string {
	t.Helper()
	tok, err := mint.Mint(key, "", c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// loadStats counts the outcomes of a load run.
type loadStats struct {
	requests, ok, refused atomic.Int64
	mu                    sync.Mutex
	failures              []string
}

func (s *loadStats) fail(format string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failures) < 20 {
		s.failures = append(s.failures, fmt.Sprintf(format, a...))
	}
}

func (s *loadStats) report(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.failures {
		t.Error(f)
	}
}

// loadRequest sends one request of the load mix: most from a valid user
// with a random limit, the rest with an invalid or no token. It records
// any answer that is not exactly what the caller must get.
func loadRequest(client *http.Client, base string, f loadFixture, rng *rand.Rand, s *loadStats) {
	s.requests.Add(1)
	url := base + "/plants"
	var (
		token string
		want  []wirePlant
		valid = rng.IntN(5) != 0
	)
	if valid {
		u := f.users[rng.IntN(len(f.users))]
		token, want = u.token, u.want
		switch limit := []int{-1, 0, 1, 7, 100}[rng.IntN(5)]; {
		case limit >= 0:
			url += "?limit=" + strconv.Itoa(limit)
			want = want[:min(limit, len(want))]
		}
	} else if i := rng.IntN(len(f.invalid) + 1); i < len(f.invalid) {
		token = f.invalid[i]
	}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		s.fail("new request: %v", err)
		return
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		s.fail("GET %s: %v", url, err)
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		s.fail("GET %s: read body after %d bytes: %v", url, len(body), err)
		return
	}
	if !valid {
		if resp.StatusCode != http.StatusUnauthorized {
			s.fail("GET %s with an invalid token: %d %.200s; want 401", url, resp.StatusCode, body)
			return
		}
		s.refused.Add(1)
		return
	}
	var got []wirePlant
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &got) != nil || !slices.Equal(got, want) {
		s.fail("GET %s as a valid user: %d %.200s; want 200 with the user's %d plants", url, resp.StatusCode, body, len(want))
		return
	}
	s.ok.Add(1)
}

// loadClient returns a client that keeps up to conns connections open.
// hammer calls f(worker, i) over and over in n goroutines, i counting one
// worker's calls from 0, until the returned stop is called. stop waits for
// the goroutines and may be called more than once; the test's cleanup calls
// it too.
func hammer(t testing.TB, n int, f func(worker, i int)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				f(w, i)
			}
		})
	}
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

func loadClient(t testing.TB, conns int) *http.Client {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// loadDuration is how long TestLoad drives load before draining.
const loadDuration = 10 * time.Second

// TestLoad drives 64 connections for 10 s against a service on 127.0.0.1
// with a mix of 50 users (a catalog of 5,000 plants) and invalid tokens,
// and checks that every answer is exactly right: no 5xx, no request that
// fails, each user's list and nobody else's, 401 for every invalid token.
// The heap after a forced GC must stay within 16 MiB of where it was after
// the warm-up. Then, under the same load, the run context is cancelled (as
// SIGTERM does): /readyz turns 503, the clients stop sending as a gateway
// would within the -shutdown-delay, and every request in flight, slow
// readers of long lists included, completes; serve returns nil.
func TestLoad(t *testing.T) {
	testenv.Soak(t)
	if testing.Short() {
		t.Skip("load test skipped with -short")
	}
	const (
		conns      = 64
		heapBudget = 16 << 20
	)
	f := newLoadFixture(t, 5000, 50)
	in, logs := startQuiet(t, "-jwt-key-file", f.keyFile, "-data", f.data, "-shutdown-delay", "1s", "-shutdown-timeout", "15s")
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	client := loadClient(t, conns)

	drive := func(s *loadStats) (stop func()) {
		rngs := make([]*rand.Rand, conns)
		for w := range rngs {
			rngs[w] = rand.New(rand.NewPCG(uint64(w), 7))
		}
		return hammer(t, conns, func(w, _ int) { loadRequest(client, in.api, f, rngs[w], s) })
	}

	// Warm-up: every user once, so caches and pools are at their size.
	var warm loadStats
	for i := range 10 * len(f.users) {
		loadRequest(client, in.api, f, rand.New(rand.NewPCG(uint64(i), 1)), &warm)
	}
	warm.report(t)
	before := heapInUse()

	var stats loadStats
	start := time.Now()
	stop := drive(&stats)
	time.Sleep(loadDuration)
	stop()
	elapsed := time.Since(start)
	after := heapInUse()
	stats.report(t)
	t.Logf("load: %d requests in %s (%.0f/s) over %d connections: %d lists, %d refusals; heap %d KiB after warm-up, %d KiB after load",
		stats.requests.Load(), elapsed.Round(time.Millisecond), float64(stats.requests.Load())/elapsed.Seconds(), conns,
		stats.ok.Load(), stats.refused.Load(), before>>10, after>>10)
	if after > before+heapBudget {
		t.Errorf("heap after load %d KiB; want within %d KiB of %d KiB", after>>10, heapBudget>>10, before>>10)
	}
	if stats.ok.Load() == 0 || stats.refused.Load() == 0 {
		t.Fatalf("load made %d lists and %d refusals; want both", stats.ok.Load(), stats.refused.Load())
	}

	// Drain under load.
	var drain loadStats
	stop = drive(&drain)
	slow := slowReaders(t, in.api, f.users, 4, &drain)
	time.Sleep(500 * time.Millisecond)
	in.stop()
	waitFor(t, patience, "/readyz 503", answers(in.admin+"/readyz", http.StatusServiceUnavailable))
	// The gateway stops sending well within -shutdown-delay.
	time.Sleep(300 * time.Millisecond)
	stop()
	slow.Wait()
	drain.report(t)
	select {
	case err := <-in.done:
		in.done <- err // for startServe's cleanup
		if err != nil {
			t.Errorf("serve after draining under load = %v; want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return within 30s of the stop")
	}
	t.Logf("drain: %d requests during the drain, %d slow readers, none failed", drain.requests.Load(), 4)
	if n := logs.errors.Load(); n != 0 {
		t.Errorf("the service logged %d lines at error level; want none", n)
	}
}

// quietLog keeps the first 64 KiB the service logs, enough for its startup
// lines, and counts the rest by level, so a long load test does not hold
// every access log line in the heap it measures.
type quietLog struct {
	kept   logtest.Buffer
	size   atomic.Int64
	errors atomic.Int64
}

func (q *quietLog) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"level":"error"`)) {
		q.errors.Add(1)
	}
	if q.size.Add(int64(len(p))) <= 64<<10 {
		q.kept.Write(p)
	}
	return len(p), nil
}

// startQuiet is startServe with the service's log going to a quietLog.
func startQuiet(t testing.TB, args ...string) (*instance, *quietLog) {
	t.Helper()
	logs := &quietLog{}
	return startLogging(t, nil, logs, &logs.kept, args...), logs
}

// slowReaders starts n requests for the longest list, read 2 KiB every
// 100ms (over two seconds for the load catalog), so that they are in
// flight when the listener closes.
func slowReaders(t testing.TB, base string, users []loadUser, n int, s *loadStats) *sync.WaitGroup {
	t.Helper()
	longest := slices.MaxFunc(users, func(a, b loadUser) int { return len(a.want) - len(b.want) })
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			s.requests.Add(1)
			req, _ := http.NewRequest(http.MethodGet, base+"/plants", nil)
			req.Header.Set("Authorization", "Bearer "+longest.token)
			// A connection of its own, so the drain closes it mid-body.
			tr := &http.Transport{DisableKeepAlives: true, ReadBufferSize: 1024}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				s.fail("slow reader: %v", err)
				return
			}
			defer resp.Body.Close()
			var body []byte
			buf := make([]byte, 2048)
			for {
				k, err := resp.Body.Read(buf)
				body = append(body, buf[:k]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					s.fail("slow reader: read after %d bytes: %v", len(body), err)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			var got []wirePlant
			if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &got) != nil || !slices.Equal(got, longest.want) {
				s.fail("slow reader: %d, %d bytes; want 200 with %d plants", resp.StatusCode, len(body), len(longest.want))
			}
		})
	}
	return &wg
}

// inFlight returns plantstore_http_requests_in_flight from the admin
// listener's /metrics.
func inFlight(t testing.TB, admin string) float64 {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "plantstore_http_requests_in_flight "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("in-flight gauge %q: %v", v, err)
			}
			return f
		}
	}
	t.Fatal("no plantstore_http_requests_in_flight on /metrics")
	return 0
}

// TestSlowloris trickles the headers of 8 requests one byte every 50ms (a
// header that would take over a minute) while a well-behaved client keeps
// asking: the server cuts each slow connection at its 5s read-header
// timeout, and serves the other client promptly all along.
func TestSlowloris(t *testing.T) {
	testenv.Soak(t)
	if testing.Short() {
		t.Skip("slowloris test (about 6s) skipped with -short")
	}
	token, keyFile := mintTestToken(t, "EdDSA", "-sub", "patient")
	in := startServe(t, nil, "-jwt-key-file", keyFile)
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	host := strings.TrimPrefix(in.api, "http://")

	const slow = 8
	header := "GET /plants HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + token + "\r\nX-Pad: " + strings.Repeat("a", 2000) + "\r\n\r\n"
	type cut struct {
		after time.Duration
		got   int // bytes the server sent
		sent  int // header bytes written before the cut
	}
	cuts := make(chan cut, slow)
	start := time.Now()
	for range slow {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		var sent atomic.Int64
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			n, _ := io.Copy(io.Discard, conn)
			cuts <- cut{after: time.Since(start), got: int(n), sent: int(sent.Load())}
		}()
		go func() {
			for i := range len(header) {
				select {
				case <-closed:
					return
				case <-time.After(50 * time.Millisecond):
				}
				if _, err := conn.Write([]byte{header[i]}); err != nil {
					return
				}
				sent.Add(1)
			}
		}()
	}

	served := 0
	var got []cut
	deadline := time.After(12 * time.Second)
	for len(got) < slow {
		select {
		case c := <-cuts:
			got = append(got, c)
			continue
		case <-deadline:
			t.Fatalf("%d of %d slow connections still open after 12s; want each cut at the 5s read-header timeout", slow-len(got), slow)
		case <-time.After(200 * time.Millisecond):
		}
		t0 := time.Now()
		if status, body, _ := get(t, in.api+"/plants", token); status != http.StatusOK {
			t.Fatalf("well-behaved client during the slowloris: %d %s; want 200", status, body)
		}
		if d := time.Since(t0); d > time.Second {
			t.Errorf("well-behaved client during the slowloris waited %s; want well under 1s", d)
		}
		served++
	}
	for _, c := range got {
		if c.after < 4500*time.Millisecond || c.after > 7*time.Second || c.sent >= len(header) {
			t.Errorf("slow connection cut after %s with %d of %d header bytes sent; want a cut at about 5s, mid-header", c.after, c.sent, len(header))
		}
		if c.got > 0 && c.got < 12 {
			t.Errorf("slow connection got %d bytes; want nothing or a whole status line", c.got)
		}
	}
	if served < 10 {
		t.Errorf("well-behaved client served %d times during the slowloris; want at least 10", served)
	}
	t.Logf("slowloris: %d connections cut after %s..%s; the other client was served %d times meanwhile", slow,
		slices.MinFunc(got, func(a, b cut) int { return int(a.after - b.after) }).after.Round(10*time.Millisecond),
		slices.MaxFunc(got, func(a, b cut) int { return int(a.after - b.after) }).after.Round(10*time.Millisecond), served)
}

// TestStalledReader asks for a 6 MB list on a connection with a 4 KiB
// receive buffer, reads the first bytes and stops reading. With
// -write-timeout the handler gives up and the request leaves the in-flight
// gauge; without one it would wait for the client for ever.
func TestStalledReader(t *testing.T) {
	testenv.Soak(t)
	if testing.Short() {
		t.Skip("stalled reader test skipped with -short")
	}
	data := writeOpenCatalog(t, 200000, "t")
	token, keyFile := mintTestToken(t, "EdDSA", "-sub", "stalled")
	tests := []struct {
		writeTimeout string
		wantFreed    bool
	}{
		{writeTimeout: "1s", wantFreed: true},
		{writeTimeout: "0", wantFreed: false},
	}
	for _, tt := range tests {
		t.Run("write-timeout "+tt.writeTimeout, func(t *testing.T) {
			in := startServe(t, nil, "-jwt-key-file", keyFile, "-data", data, "-write-timeout", tt.writeTimeout)
			waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
			d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
				var serr error
				err := c.Control(func(fd uintptr) {
					serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
				})
				return errors.Join(err, serr)
			}}
			conn, err := d.DialContext(t.Context(), "tcp", strings.TrimPrefix(in.api, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := fmt.Fprintf(conn, "GET /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", token); err != nil {
				t.Fatal(err)
			}
			first := make([]byte, 64)
			if _, err := io.ReadFull(conn, first); err != nil || !strings.HasPrefix(string(first), "HTTP/1.1 200") {
				t.Fatalf("first bytes %q, %v; want a 200 status line", first, err)
			}
			// Now the client reads nothing more.
			waitFor(t, patience, "the stalled request to be in flight", func() bool { return inFlight(t, in.admin) == 1 })
			deadline := time.Now().Add(4 * time.Second)
			for time.Now().Before(deadline) && inFlight(t, in.admin) != 0 {
				time.Sleep(50 * time.Millisecond)
			}
			if freed := inFlight(t, in.admin) == 0; freed != tt.wantFreed {
				t.Errorf("-write-timeout %s: handler of a client that stopped reading freed within 4s: %t; want %t", tt.writeTimeout, freed, tt.wantFreed)
			}
		})
	}
}

// TestReloadUnderLoad keeps 16 clients asking while the catalog file is
// replaced, again and again, by a broken file (bad reader, truncated JSON,
// empty) and by one of two good catalogs, each followed by SIGHUP: every
// answer is 200 with exactly one of the good catalogs' lists, and a broken
// file never replaces the one serving.
func TestReloadUnderLoad(t *testing.T) {
	testenv.Soak(t)
	if testing.Short() {
		t.Skip("reload under load skipped with -short")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "catalog.json")
	write := func(s string) {
		t.Helper()
		tmp := filepath.Join(dir, "next.json")
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, data); err != nil {
			t.Fatal(err)
		}
	}
	catalog := func(prefix string, n int) (string, string) {
		var file, list []string
		for i := range n {
			file = append(file, fmt.Sprintf(`{"name":"%s %03d","readers":["*"]}`, prefix, i))
			list = append(list, fmt.Sprintf(`{"name":"%s %03d"}`, prefix, i))
		}
		return "[" + strings.Join(file, ",") + "]", "[" + strings.Join(list, ",") + "]"
	}
	fileA, wantA := catalog("Aloe", 40)
	fileB, wantB := catalog("Basil", 60)
	broken := []string{`[{"name":"Cactus","readers":["nobody"]}]`, `[{"name":"Cactus","readers":["*"]`, ``, `{"name":"x"}`}

	write(fileA)
	token, keyFile := mintTestToken(t, "ES256", "-sub", "reader")
	in := startServe(t, nil, "-jwt-key-file", keyFile, "-data", data)
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	client := loadClient(t, 16)
	var stats loadStats
	var seenA, seenB atomic.Int64
	stop := hammer(t, 16, func(_, _ int) {
		stats.requests.Add(1)
		req, _ := http.NewRequest(http.MethodGet, in.api+"/plants", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			stats.fail("GET /plants during reloads: %v", err)
			return
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil || resp.StatusCode != http.StatusOK:
			stats.fail("GET /plants during reloads: %d %.100s %v; want 200", resp.StatusCode, body, err)
		case string(body) == wantA:
			seenA.Add(1)
		case string(body) == wantB:
			seenB.Add(1)
		default:
			stats.fail("GET /plants during reloads: %.100s; want catalog A or B", body)
		}
	})
	hup := func() {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(40 * time.Millisecond)
	}
	for i := range 24 {
		write(broken[i%len(broken)])
		hup()
		if i%2 == 0 {
			write(fileB)
		} else {
			write(fileA)
		}
		hup()
	}
	write(broken[0])
	hup()
	stop()
	stats.report(t)
	if seenA.Load() == 0 || seenB.Load() == 0 {
		t.Errorf("answers with catalog A: %d, B: %d; want both while reloading", seenA.Load(), seenB.Load())
	}
	// The last good file was A; the broken one after it is refused.
	waitFor(t, patience, "catalog A to serve after the last broken file", func() bool { _, body, _ := get(t, in.api+"/plants", token); return string(body) == wantA })
	if n := strings.Count(in.stderr.String(), "catalog reload refused"); n == 0 {
		t.Errorf("no refused reload logged after 25 broken files")
	}
	t.Logf("reload under load: %d requests over 49 reloads (25 broken), %d answered from A, %d from B, %d refusals logged",
		stats.requests.Load(), seenA.Load(), seenB.Load(), strings.Count(in.stderr.String(), "catalog reload refused"))
}

// TestUnsentBody announces a request body of 100 kB and never sends it:
// net/http reads a body that small before it answers, with no deadline of
// its own. With -write-timeout, which is also the read timeout, the server
// closes the connection and the drain ends cleanly; without it, the request
// holds its connection until the drain gives up on it and cuts it.
func TestUnsentBody(t *testing.T) {
	testenv.Soak(t)
	if testing.Short() {
		t.Skip("unsent body test skipped with -short")
	}
	token, keyFile := mintTestToken(t, "EdDSA", "-sub", "silent")
	tests := []struct {
		writeTimeout string
		wantFreed    bool
	}{
		{writeTimeout: "1s", wantFreed: true},
		{writeTimeout: "0", wantFreed: false},
	}
	for _, tt := range tests {
		t.Run("write-timeout "+tt.writeTimeout, func(t *testing.T) {
			in := startServe(t, nil, "-jwt-key-file", keyFile, "-write-timeout", tt.writeTimeout, "-shutdown-timeout", "1s")
			waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
			conn, err := net.Dial("tcp", strings.TrimPrefix(in.api, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "GET /plants HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\nAuthorization: Bearer %s\r\n\r\n", token)
			conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			got, err := io.ReadAll(conn)
			var ne net.Error
			if freed := !errors.As(err, &ne) || !ne.Timeout(); freed != tt.wantFreed {
				t.Fatalf("-write-timeout %s: read %q, %v within 3s; want the connection closed by the server: %t", tt.writeTimeout, got, err, tt.wantFreed)
			}
			in.stop()
			err = <-in.done
			in.done <- err
			if err != nil {
				t.Errorf("-write-timeout %s: serve after the stop = %v, want nil (exit 0)", tt.writeTimeout, err)
			}
			// The stuck request, when there is one, is cut after
			// -shutdown-timeout and said so in the log.
			if cut := strings.Contains(in.stderr.String(), "were cut"); cut == tt.wantFreed {
				t.Errorf("-write-timeout %s: drain cut a request: %t, want %t", tt.writeTimeout, cut, !tt.wantFreed)
			}
		})
	}
}

// TestKeyRotationUnderLoad rotates the signing key of a JWKS endpoint while
// 16 clients send tokens of the old and the new key: a new key's tokens are
// served soon after it is published (the unknown kid triggers a refetch),
// an old key's tokens are refused once the refresh after its removal has
// run, and for ever after (no verified token outlives its key), and nothing
// else ever fails.
func TestKeyRotationUnderLoad(t *testing.T) {
	testenv.Soak(t)
	if testing.Short() {
		t.Skip("key rotation under load skipped with -short")
	}
	oldKey, oldDoc, err := mint.GenerateKey("ES256")
	if err != nil {
		t.Fatal(err)
	}
	newKey, newDoc, err := mint.GenerateKey("EdDSA")
	if err != nil {
		t.Fatal(err)
	}
	merge := func(docs ...[]byte) []byte {
		var all []json.RawMessage
		for _, d := range docs {
			var set struct{ Keys []json.RawMessage }
			if err := json.Unmarshal(d, &set); err != nil {
				t.Fatal(err)
			}
			all = append(all, set.Keys...)
		}
		b, err := json.Marshal(map[string]any{"keys": all})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var doc atomic.Pointer[[]byte]
	publish := func(b []byte) { doc.Store(&b) }
	publish(oldDoc)
	jwks := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Write(*doc.Load())
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go jwks.Serve(ln)
	t.Cleanup(func() { jwks.Close() })

	oldToken := mustMint(t, oldKey, mint.Claims{Subject: "old", TTL: time.Hour})
	newToken := mustMint(t, newKey, mint.Claims{Subject: "new", TTL: time.Hour})
	in, _ := startQuiet(t, "-jwt-jwks-url", "http://"+ln.Addr().String()+"/jwks.json", "-jwks-refresh", "1s", "-jwks-min-refresh", "200ms")
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))

	type answer struct {
		old           bool
		start, finish time.Time
		status        int
	}
	var (
		mu      sync.Mutex
		answers []answer
		stats   loadStats
	)
	client := loadClient(t, 16)
	stop := hammer(t, 16, func(w, i int) {
		old := (i+w)%2 == 0
		token := newToken
		if old {
			token = oldToken
		}
		req, _ := http.NewRequest(http.MethodGet, in.api+"/plants?limit=1", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			stats.fail("GET during the rotation: %v", err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusUnauthorized {
			stats.fail("GET during the rotation: %d; want 200 or 401", resp.StatusCode)
		}
		mu.Lock()
		answers = append(answers, answer{old: old, start: start, finish: time.Now(), status: resp.StatusCode})
		mu.Unlock()
	})
	time.Sleep(time.Second)
	published := time.Now()
	publish(merge(oldDoc, newDoc))
	time.Sleep(2 * time.Second)
	removed := time.Now()
	publish(newDoc)
	time.Sleep(3 * time.Second)
	stop()
	stats.report(t)

	// The refresh runs every second, ±10%; a fetch takes well under 300ms
	// here.
	const settle = 1500 * time.Millisecond
	var lastOldOK time.Time
	counts := map[string]int{}
	for _, a := range answers {
		key := "new"
		if a.old {
			key = "old"
		}
		counts[fmt.Sprintf("%s %d", key, a.status)]++
		switch {
		case !a.old && a.finish.Before(published) && a.status != http.StatusUnauthorized:
			t.Errorf("new key's token answered %d before the key was published", a.status)
		case !a.old && a.start.After(published.Add(settle)) && a.status != http.StatusOK:
			t.Errorf("new key's token answered %d %s after the key was published", a.status, a.start.Sub(published).Round(time.Millisecond))
		case a.old && a.finish.Before(removed) && a.status != http.StatusOK:
			t.Errorf("old key's token answered %d while the key was published", a.status)
		case a.old && a.start.After(removed.Add(settle)) && a.status != http.StatusUnauthorized:
			t.Errorf("old key's token answered %d %s after the key was removed", a.status, a.start.Sub(removed).Round(time.Millisecond))
		}
		if a.old && a.status == http.StatusOK && a.finish.After(lastOldOK) {
			lastOldOK = a.finish
		}
	}
	t.Logf("rotation under load: %d requests %v; the old key's tokens last served %s after its removal",
		len(answers), counts, lastOldOK.Sub(removed).Round(time.Millisecond))
}
