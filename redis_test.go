package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/auth/redisstate/redistest"
)

// TestServeRedis runs two services on one redis-server that requires a
// password: -rate-limit holds for both together, the log shows the URL
// redacted and nothing shows the password, and with Redis stopped both
// keep serving, ready, with the gauge at 0.
func TestServeRedis(t *testing.T) {
	srv := redistest.StartAuth(t, "s3cret-pw")
	alice, keyFile := mintTestToken(t, "EdDSA", "-sub", "alice")
	url := srv.URL() + "/0?client_name=secret-value"
	// A timeout a loaded test machine does not reach with a Redis that
	// answers.
	args := []string{"-jwt-key-file", keyFile, "-rate-limit", "0.01", "-rate-burst", "3", "-redis-timeout", "1s"}
	a := startServe(t, nil, append(args, "-redis-url", url)...)
	b := startServe(t, map[string]string{"PLANTSTORE_REDIS_URL": url}, args...)
	for _, in := range []*instance{a, b} {
		waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
		if up, ok := metricValue(t, in.admin, "plantstore_shared_state_up"); !ok || up != 1 {
			t.Fatalf("plantstore_shared_state_up %v (found %v); want 1", up, ok)
		}
		log := in.stderr.String()
		if !strings.Contains(log, `"shared state available"`) || !strings.Contains(log, "redis://:xxxxx@"+srv.Addr()+"/0?xxxxx") || strings.Contains(log, "secret-value") {
			t.Errorf("log without the redacted URL, or with its query:\n%s", log)
		}
	}
	// The burst of 3 is shared: the fourth request is refused, at either.
	for i, in := range []*instance{a, b, a} {
		if status, body, _ := get(t, in.api+"/plants", alice); status != http.StatusOK {
			t.Fatalf("request %d of the burst: %d %s", i, status, body)
		}
	}
	if status, _, h := get(t, b.api+"/plants", alice); status != http.StatusTooManyRequests || h.Get("Retry-After") != "100" {
		t.Fatalf("fourth request over two replicas: %d, Retry-After %q; want 429 after 100 (s)", status, h.Get("Retry-After"))
	}

	srv.Stop()
	bob := mintWithKeyFile(t, keyFile, "bob")
	for _, in := range []*instance{a, b} {
		if status, body, _ := get(t, in.api+"/plants", bob); status != http.StatusOK {
			t.Errorf("request with Redis stopped: %d %s; want 200", status, body)
		}
		if up, _ := metricValue(t, in.admin, "plantstore_shared_state_up"); up != 0 {
			t.Errorf("plantstore_shared_state_up %v with Redis stopped; want 0", up)
		}
		if status, _, _ := get(t, in.admin+"/readyz", ""); status != http.StatusOK {
			t.Errorf("/readyz %d with Redis stopped; want 200", status)
		}
		if log := in.stderr.String(); !strings.Contains(log, `"shared state unavailable`) {
			t.Errorf("no warning with Redis stopped:\n%s", log)
		}
		_, metrics, _ := get(t, in.admin+"/metrics", "")
		if strings.Contains(in.stderr.String()+string(metrics), "s3cret-pw") {
			t.Errorf("the log or /metrics shows the Redis password")
		}
	}
}
