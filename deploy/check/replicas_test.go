package check_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGatewayReplicasRedis runs three plantstores sharing one real
// redis-server behind the nginx gateway in round-robin (and one of them
// behind a gateway of its own): a DPoP proof used once is refused at every
// replica; a subject sending at three times its rate gets the rate within
// 10 % plus the burst, behind one replica and behind three; and Redis
// killed mid-run changes nothing but the shared-state metrics. It needs
// TEST_PLANTSTORE_BIN, nginx and redis-server.
func TestGatewayReplicasRedis(t *testing.T) {
	bin := plantstoreBin(t)
	nginx := nginxBin(t)
	redisBin := tool(t, "redis-server", "")
	dir := t.TempDir()
	redis := startRedis(t, dir, redisBin)

	for _, name := range []string{"issuer", "client"} {
		if out, err := exec.CommandContext(t.Context(), bin, "keygen", "-alg", "ES256", "-out", filepath.Join(dir, name)).CombinedOutput(); err != nil {
			t.Fatalf("keygen %s: %v\n%s", name, err, out)
		}
	}
	const rate, burst = 20.0, 10
	var apis, admins []string
	for i := range 3 {
		_, api, admin := runPlantstore(t, bin, dir, fmt.Sprintf("replica-%d", i), catalog,
			"-jwt-key-file", filepath.Join(dir, "issuer.jwks.json"), "-redis-url", "redis://"+redis.addr+"/0",
			"-rate-limit", strconv.Itoa(rate), "-rate-burst", strconv.Itoa(burst),
			// Longer than the default, so that a loaded machine does not
			// make a Redis that answers look slow.
			"-redis-timeout", "500ms")
		apis, admins = append(apis, api), append(admins, admin)
	}
	conf := filepath.Join(gatewayDir, "nginx.conf.in")
	// Several upstream servers through the one @UPSTREAM@ of the template:
	// nginx balances them round-robin.
	three, _ := startNginx(t, nginx, dir, conf, strings.Join(apis, ";\n        server "))
	one, _ := startNginx(t, nginx, t.TempDir(), conf, apis[0])
	for i, admin := range admins {
		if up := metric(t, admin, "plantstore_shared_state_up"); up != 1 {
			t.Fatalf("replica %d: plantstore_shared_state_up %v; want 1", i, up)
		}
	}

	t.Run("replay refused at every replica", func(t *testing.T) {
		issuerKey, clientKey := filepath.Join(dir, "issuer.key"), filepath.Join(dir, "client.key")
		token := mint(t, bin, issuerKey, "-sub", "dpop-user", "-dpop-key", clientKey)
		proof := func() string {
			out, err := exec.CommandContext(t.Context(), bin, "proof", "-key", clientKey, "-url", "http://"+three+"/plants", "-token", token).Output()
			if err != nil {
				t.Fatalf("plantstore proof: %v", err)
			}
			return strings.TrimSpace(string(out))
		}
		p := proof()
		if r := dpopGet(t, three, three, token, p); r != http.StatusOK {
			t.Fatalf("first use through the gateway: %d", r)
		}
		before := sumMetric(t, admins, `plantstore_auth_failures_total{issuer="default",reason="dpop_replay"}`)
		// Each replica directly, as the gateway would forward it, then the
		// gateway's round-robin once more over the three.
		for i, api := range apis {
			if r := dpopGet(t, api, three, token, p); r != http.StatusUnauthorized {
				t.Errorf("replay at replica %d: %d; want 401", i, r)
			}
		}
		for i := range 3 {
			if r := dpopGet(t, three, three, token, p); r != http.StatusUnauthorized {
				t.Errorf("replay %d through the gateway: %d; want 401", i, r)
			}
		}
		if got := sumMetric(t, admins, `plantstore_auth_failures_total{issuer="default",reason="dpop_replay"}`) - before; got != 6 {
			t.Errorf("%v replays counted over the replicas; want 6", got)
		}
		// A fresh proof sent straight to a replica is accepted: the
		// refusals above were replays, not a wrong target.
		if r := dpopGet(t, apis[2], three, token, proof()); r != http.StatusOK {
			t.Errorf("fresh proof at replica 2: %d; want 200", r)
		}
	})

	issuerKey := filepath.Join(dir, "issuer.key")
	for _, tt := range []struct{ name, gateway, sub string }{{"one replica", one, "rate-one"}, {"three replicas", three, "rate-three"}} {
		t.Run("rate at three times the limit, "+tt.name, func(t *testing.T) {
			// A sender that stalls longer than the bucket takes to fill
			// (the machine busy elsewhere) sends less than three times
			// the rate: measured again, with another subject.
			for try := range 3 {
				token := mint(t, bin, issuerKey, "-sub", fmt.Sprintf("%s-%d", tt.sub, try))
				// The burst first, at once: a full bucket loses what time
				// would add to it, so the measure starts from an empty one.
				ok := 0
				for range burst + 5 {
					if sendOne(t, tt.gateway, token) {
						ok++
					}
				}
				if ok < burst {
					t.Fatalf("%d of %d accepted at once; want the burst, %d", ok, burst+5, burst)
				}
				run := sendAt(t, tt.gateway, token, 3*rate, 2*time.Second)
				if run.maxGap > time.Duration(float64(time.Second)*burst/rate) {
					t.Logf("try %d: the sender stalled for %v; again", try, run.maxGap)
					continue
				}
				want := rate * run.elapsed.Seconds()
				t.Logf("%s: %d of %d accepted in %v after the burst; rate x time = %.1f", tt.name, run.ok, run.sent, run.elapsed.Round(time.Millisecond), want)
				if float64(run.ok) > want*1.1+burst || float64(run.ok) < want*0.9 {
					t.Errorf("%d of %d requests accepted in %v at %v a second after the burst; want %.0f within 10%% (plus the burst of %d)", run.ok, run.sent, run.elapsed, 3*rate, want, burst)
				}
				return
			}
			t.Fatal("the sender stalled in every try")
		})
	}

	t.Run("redis killed mid-run", func(t *testing.T) {
		token := mint(t, bin, issuerKey, "-sub", "steady")
		failed := func() float64 {
			return sumMetric(t, admins, `plantstore_shared_state_requests_total{op="rate",result="error"}`) +
				sumMetric(t, admins, `plantstore_shared_state_requests_total{op="rate",result="timeout"}`)
		}
		failedBefore := failed()
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(300 * time.Millisecond)
			redis.stop(t)
		}()
		// Half the rate, for a second: every request is served.
		run := sendAt(t, three, token, rate/2, time.Second)
		<-done
		if run.ok != run.sent || run.sent < 3 {
			t.Errorf("%d of %d requests accepted within the rate; want all, at least 3", run.ok, run.sent)
		}
		// One more round over the three replicas, now that Redis is gone.
		if r := sendAt(t, three, token, rate/2, 3*time.Second/time.Duration(rate/2)); r.ok != r.sent {
			t.Errorf("%d of %d requests accepted after Redis was killed; want all", r.ok, r.sent)
		}
		for i, admin := range admins {
			if up := metric(t, admin, "plantstore_shared_state_up"); up != 0 {
				t.Errorf("replica %d: plantstore_shared_state_up %v after Redis was killed; want 0", i, up)
			}
			if s := status("http://" + admin + "/readyz"); s != http.StatusOK {
				t.Errorf("replica %d: /readyz %d after Redis was killed; want 200", i, s)
			}
		}
		if got := failed() - failedBefore; got < 3 {
			t.Errorf("%v failed calls counted; want at least one a replica", got)
		}
	})
}

// redisServer is a redis-server the test started.
type redisServer struct {
	*process
	addr string
}

// startRedis runs redis-server on a free loopback port without
// persistence and returns once it answers PING.
func startRedis(t testing.TB, dir, bin string) *redisServer {
	t.Helper()
	port := freePort(t)
	p := start(t, dir, "redis", bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	waitFor(t, "redis-server", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return false
		}
		line, _ := bufio.NewReader(c).ReadString('\n')
		return strings.TrimSpace(line) == "+PONG"
	})
	return &redisServer{p, addr}
}

// stop kills the server at once, as a crash would.
func (r *redisServer) stop(t testing.TB) {
	_ = r.cmd.Process.Kill()
	r.process.stop(t)
}

// dpopGet sends GET /plants to addr with the DPoP token and proof, as the
// gateway at public forwards it, and returns the status.
func dpopGet(t testing.TB, addr, public, token, proof string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/plants", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "DPoP "+token)
	req.Header.Set("DPoP", proof)
	req.Header.Set("X-Forwarded-Host", public)
	req.Header.Set("X-Forwarded-Proto", "http")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// sendRun is what sendAt measured.
type sendRun struct {
	ok, sent int // answered 200, sent
	// elapsed is from the first request to the last answer; maxGap the
	// longest time between two requests.
	elapsed, maxGap time.Duration
}

// sendAt sends GET /plants with the bearer token to addr perSecond times a
// second for d (a tick missed while a request waits is skipped), each
// answered 200 or 429.
func sendAt(t testing.TB, addr, token string, perSecond float64, d time.Duration) sendRun {
	t.Helper()
	tick := time.NewTicker(time.Duration(float64(time.Second) / perSecond))
	defer tick.Stop()
	var run sendRun
	start := time.Now()
	last := start
	for time.Since(start) < d {
		now := <-tick.C
		run.maxGap = max(run.maxGap, now.Sub(last))
		last = now
		run.sent++
		if sendOne(t, addr, token) {
			run.ok++
		}
	}
	run.elapsed = time.Since(start)
	return run
}

// sendOne sends GET /plants with the bearer token to addr and reports
// whether it was answered 200; any answer but 200 or 429 fails t.
func sendOne(t testing.TB, addr, token string) bool {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/plants", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return true
	case http.StatusTooManyRequests:
		return false
	}
	t.Fatalf("status %d; want 200 or 429", resp.StatusCode)
	return false
}

// metric returns the value of the series of admin's /metrics whose name
// and labels are series exactly, 0 when absent.
func metric(t testing.TB, admin, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			return v
		}
	}
	return 0
}

// sumMetric is metric summed over the replicas' admin addresses.
func sumMetric(t testing.TB, admins []string, series string) float64 {
	t.Helper()
	var sum float64
	for _, a := range admins {
		sum += metric(t, a, series)
	}
	return sum
}
