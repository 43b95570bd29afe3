package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/revoke"
)

// revokeCmd runs "plantstore revoke" with args and returns what it printed.
func revokeCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out strings.Builder
	err := run(context.Background(), append([]string{"revoke"}, args...), envOf(nil), nil, &out, &out)
	return out.String(), err
}

// wantRevoked checks that GET /plants refuses token as revoked.
func wantRevoked(t *testing.T, in *instance, step, token string) {
	t.Helper()
	status, body, h := get(t, in.api+"/plants", token)
	if want := `error="invalid_token", error_description="token revoked"`; status != http.StatusUnauthorized || !strings.Contains(h.Get("WWW-Authenticate"), want) {
		t.Errorf("%s: GET /plants = %d %s, WWW-Authenticate %q; want 401 with %s", step, status, body, h.Get("WWW-Authenticate"), want)
	}
}

// TestRevocationsFile: serve watches -revocations-file, which plantstore
// revoke writes: a token served (and cached) before is refused once its
// subject is revoked, with no signal and no restart; a cutoff before a
// token was issued leaves it good, a cutoff in the future refuses tokens
// issued now, and a broken file keeps the revocations in force.
func TestRevocationsFile(t *testing.T) {
	alice, jwks := mintTestToken(t, "ES256", "-sub", "alice")
	bob := mintWithKeyFile(t, jwks, "bob")
	carol := mintWithKeyFile(t, jwks, "carol")
	dave := mintWithKeyFile(t, jwks, "dave")
	path := filepath.Join(t.TempDir(), "revocations.yaml")
	in := startServe(t, nil, "-jwt-key-file", jwks, "-revocations-file", path)
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	wantStatus(t, in, "before", alice, http.StatusOK) // now in the cache

	out, err := revokeCmd(t, "-revocations-file", path, "-sub", "alice")
	if err != nil || !regexp.MustCompile(`^revoked tokens of subject "alice" of the unnamed issuer issued before \S+Z; .* holds 1 revocation\n$`).MatchString(out) {
		t.Fatalf("revoke -sub alice = %q, %v", out, err)
	}
	in.stderr.WaitCount(t, "revocations reloaded", 1)
	wantRevoked(t, in, "alice revoked (cached)", alice)
	wantStatus(t, in, "alice revoked", bob, http.StatusOK)

	if out, err := revokeCmd(t, "-revocations-file", path, "-sub", "dave", "-before", "2020-01-01T00:00:00Z"); err != nil {
		t.Fatalf("revoke -sub dave = %q, %v", out, err)
	}
	in.stderr.WaitCount(t, "revocations reloaded", 2)
	wantStatus(t, in, "dave's token issued after the cutoff", dave, http.StatusOK)

	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if out, err := revokeCmd(t, "-revocations-file", path, "-sub", "carol", "-before", future); err != nil {
		t.Fatalf("revoke -sub carol -before %s = %q, %v", future, out, err)
	}
	in.stderr.WaitCount(t, "revocations reloaded", 3)
	wantRevoked(t, in, "a cutoff in the future", carol)

	out, err = revokeCmd(t, "-revocations-file", path, "-list")
	if err != nil || strings.Count(out, "\n") != 3 || !strings.Contains(out, `subject "carol"`) {
		t.Errorf("revoke -list = %q, %v; want the three revocations", out, err)
	}
	// dave's cutoff of 2020 is past its retention: no longer in force.
	if status, body, _ := get(t, in.admin+"/metrics", ""); status != http.StatusOK || !strings.Contains(string(body), `plantstore_revocations{kind="subject"} 2`) {
		t.Errorf("/metrics: want plantstore_revocations{kind=\"subject\"} 2; got %d\n%s", status, grepLines(string(body), "plantstore_revocations"))
	}

	if err := os.WriteFile(path, []byte("revocations: [{sub: bob}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in.stderr.WaitCount(t, "revocations file not applied; the last good revocations stay in force", 1)
	wantRevoked(t, in, "a broken file", alice)
	wantStatus(t, in, "a broken file", bob, http.StatusOK)
}

// TestRevokeCommandUsage: the flags of plantstore revoke that cannot
// make one revocation are usage errors (exit 2), and -dry-run writes
// nothing.
func TestRevokeCommandUsage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "revocations.yaml")
	for _, args := range [][]string{
		{"-sub", "alice"}, // no file
		{"-revocations-file", path},
		{"-revocations-file", path, "-sub", "a", "-client", "b"},
		{"-revocations-file", path, "-jti", "j"},
		{"-revocations-file", path, "-jti", "j", "-until", "2026-11-28T22:00:00Z", "-before", "2026-11-28T10:00:00Z"},
		{"-revocations-file", path, "-sub", "a", "-until", "2026-11-28T22:00:00Z"},
		{"-revocations-file", path, "-sub", "a", "-before", "yesterday"},
		{"-revocations-file", path, "-sub", "a", "-issuer", "Staff!"},
		{"-revocations-file", path, "-sub", "a", "-issuer", "default"},
		{"-revocations-file", path, "-list", "-sub", "a"},
		{"-revocations-file", path, "-all", "extra"},
	} {
		if out, err := revokeCmd(t, args...); !isUsage(err) {
			t.Errorf("revoke %q = %q, %v; want a usage error", args, out, err)
		}
	}
	out, err := revokeCmd(t, "-revocations-file", path, "-issuer", "staff", "-jti", "4f1c2a", "-until", "2026-11-28T22:00:00Z", "-dry-run")
	if err != nil || out != "would revoke the token with jti \"4f1c2a\" of issuer staff, until 2026-11-28T22:00:00Z; "+path+" not written (-dry-run)\n" {
		t.Errorf("revoke -dry-run = %q, %v", out, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("-dry-run wrote %s: %v", path, err)
	}
	env := map[string]string{"PLANTSTORE_REVOCATIONS_FILE": path}
	var o strings.Builder
	if err := run(context.Background(), []string{"revoke", "-client", "old-app", "-before", "2026-11-28T10:00:00Z"}, envOf(env), nil, &o, &o); err != nil || !strings.Contains(o.String(), `revoked tokens issued to client "old-app" by the unnamed issuer before 2026-11-28T10:00:00Z`) {
		t.Errorf("revoke with PLANTSTORE_REVOCATIONS_FILE = %q, %v", o.String(), err)
	}
	if out, err := revokeCmd(t, "-revocations-file", path, "-client", "old-app", "-before", "2026-11-28T10:00:00Z"); err != nil || !strings.HasPrefix(out, "already revoked") {
		t.Errorf("the same revocation again = %q, %v; want it said and the file unchanged", out, err)
	}
}

// TestRevocationsDatabase: with -database-url, plantstore revoke writes to
// the database, and every replica refuses the revoked token within a
// second of the commit, cached or not, while its other tokens still pass;
// a replica started later reads the revocations at start.
func TestRevocationsDatabase(t *testing.T) {
	alice, jwks := mintTestToken(t, "ES256", "-sub", "alice")
	bob := mintWithKeyFile(t, jwks, "bob")
	dsn := migratedDatabase(t)
	a := startServe(t, nil, "-jwt-key-file", jwks, "-database-url", dsn)
	b := startServe(t, nil, "-jwt-key-file", jwks, "-database-url", dsn)
	for _, in := range []*instance{a, b} {
		waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
		in.stderr.WaitCount(t, "revocations loaded", 1)
		wantStatus(t, in, "before", alice, http.StatusOK) // now in the cache
	}
	out, err := revokeCmd(t, "-database-url", dsn, "-sub", "alice")
	committed := time.Now()
	if err != nil || !strings.HasPrefix(out, `revoked tokens of subject "alice" of the unnamed issuer issued before `) || !strings.HasSuffix(out, "; the database holds 1 revocation\n") {
		t.Fatalf("revoke -database-url -sub alice = %q, %v", out, err)
	}
	for name, in := range map[string]*instance{"replica a": a, "replica b": b} {
		in.stderr.WaitCount(t, "revocations loaded", 2) // the notification's read
		if took := time.Since(committed); took > time.Second {
			t.Errorf("%s read the revocation %s after its commit; want within 1s", name, took)
		}
		wantRevoked(t, in, name, alice)
		wantStatus(t, in, name, bob, http.StatusOK)
	}
	t.Logf("refused on both replicas %s after the commit", time.Since(committed))

	c := startServe(t, nil, "-jwt-key-file", jwks, "-database-url", dsn)
	c.stderr.WaitCount(t, "revocations loaded", 1)
	wantRevoked(t, c, "a replica started later", alice)

	out, err = revokeCmd(t, "-database-url", dsn, "-list")
	if err != nil || strings.Count(out, "\n") != 1 || !strings.Contains(out, `subject "alice"`) {
		t.Errorf("revoke -list = %q, %v", out, err)
	}
	if status, body, _ := get(t, a.admin+"/metrics", ""); status != http.StatusOK || !strings.Contains(string(body), `plantstore_revocations{kind="subject"} 1`) || !strings.Contains(string(body), "plantstore_revocations_age_seconds") {
		t.Errorf("/metrics: want plantstore_revocations{kind=\"subject\"} 1 and the age; got\n%s", grepLines(string(body), "plantstore_revocations"))
	}
}

// TestSecurityEventsDatabase: an identity provider's transmitter (ours:
// no public one runs offline) pushes a session-revoked event to one
// replica; every replica refuses the subject's tokens within a second,
// and the same SET delivered to another replica is a replay.
func TestSecurityEventsDatabase(t *testing.T) {
	const iss, public = "https://idp.example", "https://plants.example.com"
	key := authtest.NewKey(t, "ES256")
	jwks := authtest.WriteJWKS(t, key)
	token := func(sub string) string {
		return authtest.Token(t, key, nil, authtest.Claims(map[string]any{"iss": iss, "sub": sub, "iat": time.Now().Add(-time.Minute).Unix()}))
	}
	alice, bob := token("alice"), token("bob")
	dsn := migratedDatabase(t)
	args := []string{"-jwt-key-file", jwks, "-jwt-issuer", iss, "-database-url", dsn, "-ssf-path", "/ssf/events", "-public-url", public}
	a, b := startServe(t, nil, args...), startServe(t, nil, args...)
	for _, in := range []*instance{a, b} {
		waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
		in.stderr.WaitCount(t, "revocations loaded", 1)
		wantStatus(t, in, "before", alice, http.StatusOK)
	}
	tr := authtest.Transmitter{Key: key, Iss: iss, Aud: public}
	set := tr.SET(t, authtest.SessionRevoked, "alice", time.Now(), nil, nil)
	if status, body := authtest.Push(t, a.api+"/ssf/events", set); status != http.StatusAccepted {
		t.Fatalf("push to replica a: %d %s, want 202", status, body)
	}
	pushed := time.Now()
	for name, in := range map[string]*instance{"replica a": a, "replica b": b} {
		in.stderr.WaitCount(t, "revocations loaded", 2)
		if took := time.Since(pushed); took > time.Second {
			t.Errorf("%s applied the event %s after it was accepted; want within 1s", name, took)
		}
		wantRevoked(t, in, name, alice)
		wantStatus(t, in, name, bob, http.StatusOK)
	}
	if status, body := authtest.Push(t, b.api+"/ssf/events", set); status != http.StatusBadRequest || !strings.Contains(body, `"err":"invalid_request"`) {
		t.Errorf("the same SET to replica b: %d %s, want 400 invalid_request (a replay)", status, body)
	}
	if status, body, _ := get(t, a.admin+"/metrics", ""); status != http.StatusOK || !strings.Contains(string(body), `plantstore_security_events_total{event="session-revoked",issuer="default",result="accepted"} 1`) {
		t.Errorf("/metrics of replica a:\n%s", grepLines(string(body), "plantstore_security_events_total"))
	}
	// A SET is no access token.
	if status, _, _ := get(t, a.api+"/plants", set); status != http.StatusUnauthorized {
		t.Errorf("a SET as a bearer token: %d, want 401", status)
	}
}

// TestSecurityEventsFile: without a database, -ssf-path records events in
// -revocations-file: the replica that accepts a SET refuses the subject's
// tokens from its next request on and writes the cutoff to the file, which
// a replica sharing it reads again; a replay to the same replica is
// refused, one to the other adds nothing to the file.
func TestSecurityEventsFile(t *testing.T) {
	const iss, public = "https://idp.example", "https://plants.example.com"
	key := authtest.NewKey(t, "ES256")
	jwks := authtest.WriteJWKS(t, key)
	token := func(sub string) string {
		return authtest.Token(t, key, nil, authtest.Claims(map[string]any{"iss": iss, "sub": sub, "iat": time.Now().Add(-time.Minute).Unix()}))
	}
	alice, bob := token("alice"), token("bob")
	path := filepath.Join(t.TempDir(), "revocations.yaml")
	args := []string{"-jwt-key-file", jwks, "-jwt-issuer", iss, "-revocations-file", path, "-ssf-path", "/ssf/events", "-public-url", public}
	a, b := startServe(t, nil, args...), startServe(t, nil, args...)
	for _, in := range []*instance{a, b} {
		waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
		wantStatus(t, in, "before", alice, http.StatusOK) // now in the cache
	}
	tr := authtest.Transmitter{Key: key, Iss: iss, Aud: public}
	at := time.Now().Truncate(time.Second)
	set := tr.SET(t, authtest.SessionRevoked, "alice", at, nil, nil)
	if status, body := authtest.Push(t, a.api+"/ssf/events", set); status != http.StatusAccepted {
		t.Fatalf("push to replica a: %d %s, want 202", status, body)
	}
	// At once on the replica that took it: no wait for the file's watch.
	wantRevoked(t, a, "replica a, at once", alice)
	wantStatus(t, a, "replica a", bob, http.StatusOK)
	entries, err := revoke.ReadFile(path)
	if err != nil || len(entries) != 1 || entries[0].Sub != "alice" || entries[0].Issuer != "" || !entries[0].Before.Equal(at) {
		t.Fatalf("%s holds %v, %v; want alice's cutoff at %s", path, entries, err, at.UTC().Format(time.RFC3339))
	}
	b.stderr.WaitCount(t, "revocations reloaded", 1)
	wantRevoked(t, b, "replica b, the file read again", alice)
	wantStatus(t, b, "replica b", bob, http.StatusOK)

	if status, body := authtest.Push(t, a.api+"/ssf/events", set); status != http.StatusBadRequest || !strings.Contains(body, `"err":"invalid_request"`) {
		t.Errorf("the same SET to replica a again: %d %s, want 400 invalid_request (a replay)", status, body)
	}
	// Replicas without a database do not share the jtis they applied:
	// the other one takes the SET, and the file is left as it was.
	if status, body := authtest.Push(t, b.api+"/ssf/events", set); status != http.StatusAccepted {
		t.Errorf("the same SET to replica b: %d %s, want 202", status, body)
	}
	if entries, err := revoke.ReadFile(path); err != nil || len(entries) != 1 {
		t.Errorf("after the replays %s holds %v, %v; want alice's one cutoff", path, entries, err)
	}
	if status, body, _ := get(t, a.admin+"/metrics", ""); status != http.StatusOK ||
		!strings.Contains(string(body), `plantstore_security_events_total{event="session-revoked",issuer="default",result="accepted"} 1`) ||
		!strings.Contains(string(body), `plantstore_security_events_total{event="session-revoked",issuer="default",result="invalid_request"} 1`) {
		t.Errorf("/metrics of replica a: want 1 accepted and 1 replay refused\n%s", grepLines(string(body), "plantstore_security_events_total"))
	}
	// A SET is no access token.
	if status, _, _ := get(t, a.api+"/plants", set); status != http.StatusUnauthorized {
		t.Errorf("a SET as a bearer token: %d, want 401", status)
	}
}

// TestRevocationSettingsCombine: the settings of revocations that cannot
// work together stop the start with a usage error.
func TestRevocationSettingsCombine(t *testing.T) {
	for _, args := range [][]string{
		{"-jwt-key-file", "k", "-ssf-path", "/ssf/events", "-public-url", "https://p.example"},
		{"-jwt-key-file", "k", "-ssf-path", "/ssf/events", "-database-url", "postgres://db/x"},
		{"-jwt-key-file", "k", "-ssf-path", "ssf", "-database-url", "postgres://db/x", "-public-url", "https://p.example"},
		{"-jwt-key-file", "k", "-ssf-path", "/plants", "-database-url", "postgres://db/x", "-public-url", "https://p.example"},
		{"-jwt-key-file", "k", "-revocations-file", "r.yaml", "-database-url", "postgres://db/x"},
		{"-jwt-key-file", "k", "-revocation-retention", "0s"},
		{"-jwt-key-file", "k", "-ssf-path", "/ssf/events", "-database-url", "postgres://db/x", "-public-url", "https://p.example"}, // no iss to take events from
		{"-jwt-key-file", "k", "-jwt-issuer", "https://idp.example", "-ssf-path", "/ssf/events", "-revocations-file", "r.yaml"},    // no -public-url
	} {
		if _, err := parseServeFlags(args, newEnv(nil), io.Discard); !isUsage(err) {
			t.Errorf("serve %q: %v, want a usage error", args, err)
		}
	}
	noStore := []string{"-jwt-key-file", "k", "-jwt-issuer", "https://idp.example", "-ssf-path", "/ssf/events", "-public-url", "https://p.example"}
	if _, err := parseServeFlags(noStore, newEnv(nil), io.Discard); !isUsage(err) || !strings.Contains(err.Error(), "-ssf-path needs -database-url or -revocations-file: ") {
		t.Errorf("serve %q: %v, want a usage error naming both stores", noStore, err)
	}
	for _, store := range [][]string{{"-database-url", "postgres://db/x"}, {"-revocations-file", "r.yaml"}} {
		if _, err := parseServeFlags(append(noStore, store...), newEnv(nil), io.Discard); err != nil {
			t.Errorf("-ssf-path with %s and -public-url: %v", store[0], err)
		}
	}
}

// TestRevocationsReadyCheck: /readyz?verbose names the revocations' store,
// advisory: a stale set is said, and never fails readiness.
func TestRevocationsReadyCheck(t *testing.T) {
	r := revoke.New(revoke.Options{})
	c := revocationsCheck(r)
	if err := c.Run(t.Context()); err == nil || !c.Advisory {
		t.Errorf("before any read: %v (advisory %v), want not read yet, advisory", err, c.Advisory)
	}
	r.Replace(nil, time.Now().Add(-10*time.Minute))
	if err := c.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "stale: last read 10m0s ago") {
		t.Errorf("read 10 minutes ago: %v, want stale", err)
	}
	r.Confirm(time.Now())
	if err := c.Run(t.Context()); err != nil {
		t.Errorf("just confirmed: %v", err)
	}
	_, jwks := mintTestToken(t, "ES256", "-sub", "alice")
	in := startServe(t, nil, "-jwt-key-file", jwks, "-revocations-file", filepath.Join(t.TempDir(), "revocations.yaml"))
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	if status, body, _ := get(t, in.admin+"/readyz?verbose", ""); status != http.StatusOK || !strings.Contains(string(body), "[+]revocations ok") {
		t.Errorf("/readyz?verbose = %d\n%s\nwant [+]revocations ok", status, body)
	}
}
