package main

import (
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/redisstate/redistest"
)

// TestServeRedis runs two services on one redis-server that requires a
// password: -rate-limit holds for both together, the log shows the URL
// redacted and nothing shows the password, and with Redis stopped both
// keep serving, ready, with the gauge at 0. Both hash their keys under
// the secret of -redis-key-file: no key in Redis is the plain hash of
// the caller.
func TestServeRedis(t *testing.T) {
	srv := redistest.StartAuth(t, "s3cret-pw")
	alice, keyFile := mintTestToken(t, "EdDSA", "-sub", "alice")
	url := srv.URL() + "/0?client_name=secret-value"
	// A timeout a loaded test machine does not reach with a Redis that
	// answers.
	redisKey := filepath.Join(t.TempDir(), "redis.key")
	if err := os.WriteFile(redisKey, []byte(strings.Repeat("k", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"-jwt-key-file", keyFile, "-rate-limit", "0.01", "-rate-burst", "3", "-redis-timeout", "1s"}
	a := startServe(t, nil, append(args, "-redis-url", url, "-redis-key-file", redisKey)...)
	b := startServe(t, map[string]string{"PLANTSTORE_REDIS_URL": url, "PLANTSTORE_REDIS_KEY_FILE": redisKey}, args...)
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
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: "s3cret-pw"})
	defer c.Close()
	keys, err := c.Keys(t.Context(), "plantstore:r:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	caller := auth.CallerKey("", "alice")
	if len(keys) != 1 || strings.Contains(keys[0], hex.EncodeToString(caller[:])) {
		t.Errorf("rate keys %v; want one, not the plain hash of the caller", keys)
	}
	for _, in := range []*instance{a, b} {
		if strings.Contains(in.stderr.String(), "plain hashes") {
			t.Errorf("warned of plain hashes with -redis-key-file:\n%s", in.stderr.String())
		}
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
