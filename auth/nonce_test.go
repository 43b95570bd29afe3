package auth_test

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/dpop"
	"github.com/plantstore/plantstore/observability/setting"
)

// nonceKeyFile writes a fresh random nonce key of n bytes (and a trailing
// newline) to a file in dir, and returns its path.
func nonceKeyFile(t testing.TB, dir, name string, n int) string {
	t.Helper()
	secret := make([]byte, n)
	rand.Read(secret)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, append([]byte(base64.RawURLEncoding.EncodeToString(secret)[:n]), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// loadNonces is dpop.LoadNonces, failing the test on an error.
func loadNonces(t testing.TB, path string, lifetime time.Duration) *dpop.Nonces {
	t.Helper()
	n, err := dpop.LoadNonces(path, lifetime)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// movableClock is a clock that tests move, read by a server's goroutines.
type movableClock struct{ offset atomic.Int64 }

func (c *movableClock) now() time.Time       { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *movableClock) move(d time.Duration) { c.offset.Add(int64(d)) }
func (c *movableClock) unix() int64          { return c.now().Unix() }
func (c *movableClock) iat() map[string]any  { return map[string]any{"iat": c.unix()} }
func (c *movableClock) withNonce(n string) map[string]any {
	return map[string]any{"iat": c.unix(), "nonce": n}
}

// nonceServer is a DPoP server with server nonces and a movable clock.
type nonceServer struct {
	dpopServer
	nonces *dpop.Nonces
	clock  *movableClock
	issuer authtest.Key
	client authtest.Key
	token  string
}

func newNonceServer(t testing.TB, lifetime time.Duration) nonceServer {
	t.Helper()
	n := loadNonces(t, nonceKeyFile(t, t.TempDir(), "nonce.key", 32), lifetime)
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{Nonces: n, DPoPWindow: time.Hour})
	clock := &movableClock{}
	auth.SetClock(srv.v, clock.now)
	return nonceServer{dpopServer: srv, nonces: n, clock: clock, issuer: issuer, client: client,
		token: boundTo(t, issuer, client.Verify.Public, map[string]any{"exp": time.Now().Add(24 * time.Hour).Unix()})}
}

// proof returns a proof of s's client for s's token, iat now by s's clock,
// with the claims over.
func (s nonceServer) proof(t testing.TB, over map[string]any) string {
	t.Helper()
	claims := s.clock.iat()
	for k, v := range over {
		claims[k] = v
	}
	return authtest.Proof(t, s.client, "GET", s.url, s.token, nil, claims)
}

// send sends the proof and returns the response.
func (s nonceServer) send(t testing.TB, proof string) *http.Response {
	t.Helper()
	return dpopResponse(t, "GET", s.url, "DPoP "+s.token, proof)
}

// TestDPoPNonce: with server nonces, a proof must carry one this
// deployment issued within the lifetime; one without, or with a stale,
// forged or another key's nonce, is refused with use_dpop_nonce and a
// fresh nonce, counted under dpop_nonce; every response to a DPoP request
// carries the current nonce.
func TestDPoPNonce(t *testing.T) {
	const lifetime = 4 * time.Minute // steps of a minute
	s := newNonceServer(t, lifetime)
	other := loadNonces(t, nonceKeyFile(t, t.TempDir(), "other.key", 48), lifetime)
	now := s.clock.now()
	forged := make([]byte, 24)
	rand.Read(forged)
	tests := []struct {
		name  string
		nonce any // nil: none
		ok    bool
	}{
		{name: "the current nonce", nonce: s.nonces.Issue(now), ok: true},
		{name: "a nonce of half a lifetime ago", nonce: s.nonces.Issue(now.Add(-lifetime / 2)), ok: true},
		{name: "a nonce of a step ahead (a replica whose clock is ahead)", nonce: s.nonces.Issue(now.Add(lifetime / 4)), ok: true},
		{name: "no nonce"},
		{name: "a stale nonce", nonce: s.nonces.Issue(now.Add(-lifetime - lifetime/4))},
		{name: "a nonce two steps ahead", nonce: s.nonces.Issue(now.Add(lifetime / 2))},
		{name: "a forged nonce", nonce: base64.RawURLEncoding.EncodeToString(forged)},
		{name: "a nonce of another key", nonce: other.Issue(now)},
		{name: "a nonce one character off", nonce: flipLast(s.nonces.Issue(now))},
		{name: "a nonce too long", nonce: s.nonces.Issue(now) + "AAAA"},
		{name: "a number", nonce: 12345},
		{name: "an empty string", nonce: ""},
	}
	refusals := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			over := map[string]any{}
			if tt.nonce != nil {
				over["nonce"] = tt.nonce
			}
			before := s.nonces.Issue(s.clock.now())
			resp := s.send(t, s.proof(t, over))
			// The step may change while the request runs.
			if got, after := resp.Header.Get("DPoP-Nonce"), s.nonces.Issue(s.clock.now()); got != before && got != after {
				t.Errorf("DPoP-Nonce %q; want the current nonce %q on every response", got, after)
			}
			ch := withoutMetadata(t, resp.Header.Values("WWW-Authenticate"))
			if tt.ok {
				if resp.StatusCode != http.StatusOK {
					t.Errorf("%d %q; want 200", resp.StatusCode, ch)
				}
				return
			}
			refusals++
			want := `DPoP realm="plantstore", algs="` + strings.Join(dpop.DefaultAlgorithms(), " ") + `", error="use_dpop_nonce", error_description="DPoP proof needs the nonce of the DPoP-Nonce header"`
			if resp.StatusCode != http.StatusUnauthorized || len(ch) != 1 || ch[0] != want {
				t.Errorf("%d %q; want 401 %q", resp.StatusCode, ch, want)
			}
		})
	}
	if got := failures(t, s.reg); got["dpop_nonce"] != float64(refusals) || got["dpop_invalid"] != 0 {
		t.Errorf("auth failures %v; want dpop_nonce %d and nothing else", got, refusals)
	}
	// A bearer request is no DPoP request: no nonce.
	resp := dpopResponse(t, "GET", s.url, "Bearer "+authtest.Token(t, s.issuer, nil, authtest.Claims(nil)))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("DPoP-Nonce") != "" {
		t.Errorf("a bearer request: %d, DPoP-Nonce %q; want 200 and no nonce", resp.StatusCode, resp.Header.Get("DPoP-Nonce"))
	}
}

// flipLast returns s with its last base64url character changed.
func flipLast(s string) string {
	c := byte('A')
	if s[len(s)-1] == 'A' {
		c = 'B'
	}
	return s[:len(s)-1] + string(c)
}

// TestDPoPNonceFollowed: the exchange of a standard client. The first
// proof has no nonce and is refused with one; the proof again with that
// nonce, and the same jti, passes: the refusal spent neither the jti nor
// a place in the replay cache. The proof that passed cannot be replayed.
func TestDPoPNonceFollowed(t *testing.T) {
	s := newNonceServer(t, dpop.DefaultNonceLifetime)
	first := s.send(t, s.proof(t, map[string]any{"jti": "the-jti"}))
	nonce := first.Header.Get("DPoP-Nonce")
	if first.StatusCode != http.StatusUnauthorized || nonce == "" {
		t.Fatalf("the first proof: %d, DPoP-Nonce %q; want 401 with a nonce", first.StatusCode, nonce)
	}
	if n := auth.ReplayEntries(s.v); n != 0 {
		t.Errorf("the replay cache holds %d proofs after a nonce refusal; want 0", n)
	}
	retry := s.proof(t, map[string]any{"jti": "the-jti", "nonce": nonce})
	if resp := s.send(t, retry); resp.StatusCode != http.StatusOK {
		t.Fatalf("the proof again with the nonce and the same jti: %d; want 200", resp.StatusCode)
	}
	if resp := s.send(t, retry); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the accepted proof replayed: %d; want 401", resp.StatusCode)
	}
	if got := failures(t, s.reg); got["dpop_nonce"] != 1 || got["dpop_replay"] != 1 {
		t.Errorf("auth failures %v; want dpop_nonce 1 and dpop_replay 1", got)
	}
	// With a rate limit, the refusal takes nothing from the caller's rate.
	limit, err := auth.NewRateLimit(1.0/3600, 1)
	if err != nil {
		t.Fatal(err)
	}
	limited := newDPoPServer(t, s.issuer, auth.DPoPOptional, auth.Options{Nonces: s.nonces, RateLimit: limit})
	for range 3 {
		if status, _ := dpopRequest(t, "GET", limited.url, "DPoP "+s.token, authtest.Proof(t, s.client, "GET", limited.url, s.token, nil, nil)); status != http.StatusUnauthorized {
			t.Fatalf("no nonce, rate limited: %d; want 401", status)
		}
	}
	if status, _ := dpopRequest(t, "GET", limited.url, "DPoP "+s.token, authtest.Proof(t, s.client, "GET", limited.url, s.token, nil, map[string]any{"nonce": s.nonces.Issue(time.Now())})); status != http.StatusOK {
		t.Errorf("the first proof with a nonce after three refused: %d; want 200 within a burst of 1", status)
	}
}

// TestDPoPNonceOtherReasonsFirst: a proof wrong in anything a new nonce
// would not mend is refused for that, nonce or not.
func TestDPoPNonceOtherReasonsFirst(t *testing.T) {
	s := newNonceServer(t, dpop.DefaultNonceLifetime)
	another := authtest.NewKey(t, "ES256")
	for _, tt := range []struct {
		name  string
		proof string
		want  auth.Reason
	}{
		{"another request's htu", authtest.Proof(t, s.client, "GET", "http://127.0.0.1/other", s.token, nil, s.clock.iat()), auth.ReasonDPoPTarget},
		{"another token's ath", authtest.Proof(t, s.client, "GET", s.url, "another token", nil, s.clock.iat()), auth.ReasonDPoPAth},
		{"another key", authtest.Proof(t, another, "GET", s.url, s.token, nil, s.clock.iat()), auth.ReasonDPoPKey},
		{"an old iat", authtest.Proof(t, s.client, "GET", s.url, s.token, nil, map[string]any{"iat": s.clock.unix() - 7200}), auth.ReasonDPoPIat},
		{"no typ", authtest.Proof(t, s.client, "GET", s.url, s.token, map[string]any{"typ": nil}, s.clock.iat()), auth.ReasonDPoPInvalid},
	} {
		_, err := s.v.Authenticate(dpopRequestTo(t, s.url, s.token, tt.proof))
		if got := authtest.ReasonOf(t, err); got != tt.want {
			t.Errorf("%s, without a nonce: %q; want %q", tt.name, got, tt.want)
		}
	}
}

// dpopRequestTo returns a GET of url with token and proof, for
// Authenticate.
func dpopRequestTo(t testing.TB, url, token, proof string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "DPoP "+token)
	req.Header.Set("DPoP", proof)
	return req
}

// TestDPoPNonceRotation: after a new key, nonces of the previous key are
// accepted for one lifetime, then not; new nonces are of the new key; a
// key too short is refused and the key in use stays.
func TestDPoPNonceRotation(t *testing.T) {
	const lifetime = 4 * time.Minute
	dir := t.TempDir()
	path := nonceKeyFile(t, dir, "nonce.key", 40)
	s := newNonceServer(t, lifetime)
	n := loadNonces(t, path, lifetime)
	old := loadNonces(t, filepath.Join(dir, "nonce.key"), lifetime) // mints the old key's nonces
	v := newDPoPServer(t, s.issuer, auth.DPoPOptional, auth.Options{Nonces: n, DPoPWindow: time.Hour})
	auth.SetClock(v.v, s.clock.now)
	accepts := func(nonce string) bool {
		t.Helper()
		resp := dpopResponse(t, "GET", v.url, "DPoP "+s.token, authtest.Proof(t, s.client, "GET", v.url, s.token, nil, s.clock.withNonce(nonce)))
		return resp.StatusCode == http.StatusOK
	}

	// A key too short is refused; the key in use stays.
	if err := os.WriteFile(path, []byte(strings.Repeat("k", 31)), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := n.Reload(s.clock.now()); err == nil || changed || !strings.Contains(err.Error(), "31 bytes, want at least 32") {
		t.Errorf("Reload of a 31-byte key: %v, %v; want refused", changed, err)
	}
	if got, want := n.Issue(s.clock.now()), old.Issue(s.clock.now()); got != want {
		t.Errorf("after a refused reload the nonce is %q; want the old key's %q", got, want)
	}

	nonceKeyFile(t, dir, "nonce.key", 32)
	changed, err := n.Reload(s.clock.now())
	if err != nil || !changed {
		t.Fatalf("Reload of a new key: %v, %v; want changed", changed, err)
	}
	if changed, err := n.Reload(s.clock.now()); err != nil || changed {
		t.Errorf("Reload of the same key: %v, %v; want unchanged", changed, err)
	}
	if n.Issue(s.clock.now()) == old.Issue(s.clock.now()) {
		t.Error("after a new key the nonce is the old key's")
	}
	if !accepts(n.Issue(s.clock.now())) || !accepts(old.Issue(s.clock.now())) {
		t.Error("right after the rotation, a nonce of the new key or of the old one is refused")
	}
	s.clock.move(lifetime - time.Second)
	if !accepts(old.Issue(s.clock.now())) {
		t.Error("a fresh nonce of the old key within a lifetime of the rotation is refused")
	}
	s.clock.move(2 * time.Second)
	if accepts(old.Issue(s.clock.now())) {
		t.Error("a fresh nonce of the old key a lifetime after the rotation is accepted")
	}
	if !accepts(n.Issue(s.clock.now())) {
		t.Error("a nonce of the new key is refused")
	}
}

// TestLoadNonces: the key file must hold at least 32 bytes; the errors
// name the setting and the file, never the key.
func TestLoadNonces(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(short, []byte("a secret of 31 bytes, too short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, path string
		lifetime   time.Duration
		field      string
	}{
		{"a key of 31 bytes", short, 0, "dpop_nonce_key_file"},
		{"no file", filepath.Join(dir, "none"), 0, "dpop_nonce_key_file"},
		{"a lifetime under 4s", nonceKeyFile(t, dir, "good.key", 32), 3 * time.Second, "dpop_nonce_lifetime"},
	} {
		_, err := dpop.LoadNonces(tt.path, tt.lifetime)
		var ce *setting.Error
		if !errors.As(err, &ce) || ce.Key != tt.field || strings.Contains(err.Error(), "too short\n") {
			t.Errorf("%s: %v; want a *setting.Error of %s", tt.name, err, tt.field)
		}
	}
	if n := loadNonces(t, nonceKeyFile(t, dir, "ok.key", 32), 0); n.Lifetime() != dpop.DefaultNonceLifetime {
		t.Errorf("lifetime %v; want the default %v", n.Lifetime(), dpop.DefaultNonceLifetime)
	}
}

// BenchmarkDPoPNonce is what server nonces add to a DPoP request's
// authentication: the request of BenchmarkDPoP, a cached ES256 token and a
// fresh ES256 proof, without nonces (off) and with them (on: the proof's
// nonce checked, and the nonce of the answer's DPoP-Nonce header made as
// Middleware makes it). in-turns runs the two in turns, timing each, and
// reports on's ns/op, off's (off-ns/op) and their ratio (x-off), measured
// in the same moments.
//
//	go test ./auth -run '^$' -bench DPoPNonce/in-turns -count 10
func BenchmarkDPoPNonce(b *testing.B) {
	issuer, client := authtest.NewKey(b, "ES256"), authtest.NewKey(b, "ES256")
	n := loadNonces(b, nonceKeyFile(b, b.TempDir(), "nonce.key", 32), 0)
	off := newVerifierOpts(b, auth.Options{}, auth.Config{}, authtest.KeySet(issuer))
	on := newVerifierOpts(b, auth.Options{Nonces: n}, auth.Config{}, authtest.KeySet(issuer))
	token := boundTo(b, issuer, client.Verify.Public, nil)
	nonce := map[string]any{"nonce": n.Issue(time.Now())}
	offReq, onReq := dpopBenchRequest(token, ""), dpopBenchRequest(token, "")
	authenticate := func(b *testing.B, v *auth.Verifier, req *http.Request, nonces *dpop.Nonces) {
		if nonces != nil && nonces.Issue(time.Now()) == "" {
			b.Fatal("no nonce")
		}
		if _, err := v.Authenticate(req); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("off", func(b *testing.B) {
		pool := &proofPool{b: b, v: off, key: client, token: token}
		b.ReportAllocs()
		for b.Loop() {
			offReq.Header.Set("DPoP", pool.proof())
			authenticate(b, off, offReq, nil)
		}
	})
	b.Run("on", func(b *testing.B) {
		pool := &proofPool{b: b, v: on, key: client, token: token, claims: nonce}
		b.ReportAllocs()
		for b.Loop() {
			onReq.Header.Set("DPoP", pool.proof())
			authenticate(b, on, onReq, n)
		}
	})
	b.Run("in-turns", func(b *testing.B) {
		offPool := &proofPool{b: b, v: off, key: client, token: token}
		onPool := &proofPool{b: b, v: on, key: client, token: token, claims: nonce}
		var dOn, dOff time.Duration
		for i := 0; b.Loop(); i++ {
			onReq.Header.Set("DPoP", onPool.proof())
			offReq.Header.Set("DPoP", offPool.proof())
			a, c := inTurns(i, func() { authenticate(b, on, onReq, n) }, func() { authenticate(b, off, offReq, nil) })
			dOn, dOff = dOn+a, dOff+c
		}
		b.ReportMetric(float64(dOn)/float64(b.N), "ns/op")
		b.ReportMetric(float64(dOff)/float64(b.N), "off-ns/op")
		b.ReportMetric(float64(dOn)/float64(dOff), "x-off")
	})
}

// TestDPoPNonceReplicas: two replicas holding the same key file issue the
// same nonce and accept each other's, with no state shared; a replica with
// another file accepts none of them.
func TestDPoPNonceReplicas(t *testing.T) {
	dir := t.TempDir()
	path := nonceKeyFile(t, dir, "nonce.key", 32)
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	token := boundTo(t, issuer, client.Verify.Public, nil)
	replica := func(path string) dpopServer {
		return newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{Nonces: loadNonces(t, path, 0)})
	}
	a, b, other := replica(path), replica(path), replica(nonceKeyFile(t, dir, "other.key", 32))
	mint := loadNonces(t, path, 0)
	first := dpopResponse(t, "GET", a.url, "DPoP "+token, authtest.Proof(t, client, "GET", a.url, token, nil, nil))
	nonce := first.Header.Get("DPoP-Nonce")
	if first.StatusCode != http.StatusUnauthorized || nonce == "" {
		t.Fatalf("replica a, no nonce: %d, DPoP-Nonce %q; want 401 with a nonce", first.StatusCode, nonce)
	}
	for _, r := range []struct {
		name string
		srv  dpopServer
		want int
	}{{"replica b, the same file", b, http.StatusOK}, {"replica a itself", a, http.StatusOK}, {"a replica of another file", other, http.StatusUnauthorized}} {
		resp := dpopResponse(t, "GET", r.srv.url, "DPoP "+token, authtest.Proof(t, client, "GET", r.srv.url, token, nil, map[string]any{"nonce": nonce}))
		if resp.StatusCode != r.want {
			t.Errorf("%s, with a's nonce: %d; want %d", r.name, resp.StatusCode, r.want)
		}
		// The same nonce as a's, or, when a step began since, the same
		// nonce as a's now.
		if got := resp.Header.Get("DPoP-Nonce"); r.want == http.StatusOK && got != nonce && got != mint.Issue(time.Now()) {
			t.Errorf("%s answers DPoP-Nonce %q; want a's %q", r.name, got, nonce)
		}
	}
}
