package introspect_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/introspect"
	"github.com/plantstore/plantstore/auth/jws"
	"github.com/plantstore/plantstore/observability/setting"
)

// TestSamePrincipals: the caller of an introspected token is the caller
// of a JWT with the same claims: same subject, groups and scopes.
func TestSamePrincipals(t *testing.T) {
	p := newIDP(t)
	s := newService(t, p, baseConfig(), time.Minute, nil, auth.Options{})
	claims := valid()
	token := p.issue(nil)
	got := s.get(t, token)
	if got.status != http.StatusOK {
		t.Fatalf("introspected token: %d %q; want 200", got.status, got.challenge)
	}
	if p.bad.Load() != 0 {
		t.Fatalf("the endpoint got %d requests that were not the client's RFC 7662 request", p.bad.Load())
	}
	key := authtest.NewKey(t, "ES256")
	v, err := auth.NewVerifier(auth.Options{}, auth.Issuer{Config: baseConfig(), JWS: jws.New(authtest.KeySet(key))})
	if err != nil {
		t.Fatal(err)
	}
	jwtCaller := serve(t, v, nil).get(t, authtest.Token(t, key, nil, claims))
	if jwtCaller.status != http.StatusOK {
		t.Fatalf("JWT: %d %q", jwtCaller.status, jwtCaller.challenge)
	}
	if !got.id.Introspected || jwtCaller.id.Introspected {
		t.Errorf("Introspected = %t (introspected) and %t (JWT); want true and false", got.id.Introspected, jwtCaller.id.Introspected)
	}
	got.id.Introspected = false
	if fmt.Sprint(got.id) != fmt.Sprint(jwtCaller.id) {
		t.Errorf("introspected caller %+v; the same caller with a JWT is %+v", got.id, jwtCaller.id)
	}
}

// TestRulesOnAnswers: every rule a JWT of the issuer passes holds the
// answer's claims too.
func TestRulesOnAnswers(t *testing.T) {
	p := newIDP(t)
	cfg := baseConfig()
	cfg.Clients = []string{"web"}
	cfg.MaxLifetime = time.Hour
	s := newService(t, p, cfg, time.Minute, nil, auth.Options{})
	now := time.Now()
	for _, tt := range []struct {
		name   string
		over   map[string]any
		status int
		reason auth.Reason
	}{
		{"expired", map[string]any{"exp": now.Add(-time.Hour).Unix()}, 401, auth.ReasonExpired},
		{"no exp", map[string]any{"exp": nil}, 401, auth.ReasonMissingExp},
		{"not yet valid", map[string]any{"nbf": now.Add(time.Hour).Unix()}, 401, auth.ReasonNotYetValid},
		{"another audience", map[string]any{"aud": "other"}, 401, auth.ReasonAudience},
		{"no subject", map[string]any{"sub": nil}, 401, auth.ReasonNoSubject},
		{"another client", map[string]any{"client_id": "evil"}, 401, auth.ReasonClient},
		{"too long a lifetime", map[string]any{"exp": now.Add(3 * time.Hour).Unix()}, 401, auth.ReasonLifetime},
		{"without the scope", map[string]any{"scope": "openid"}, 403, auth.ReasonScope},
		{"bound to a key, sent as bearer", map[string]any{"cnf": map[string]any{"jkt": "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"}}, 401, auth.ReasonDPoPBound},
		{"bound to a certificate", map[string]any{"cnf": map[string]any{"x5t#S256": "bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dgA"}}, 401, auth.ReasonCertBound},
		{"iss missing: the issuer's", map[string]any{"iss": nil}, 200, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := s.get(t, p.issue(tt.over))
			if got.status != tt.status || tt.reason != "" && tt.reason != auth.ReasonScope && got.reason() != string(tt.reason) {
				t.Errorf("%d %q; want %d %s", got.status, got.challenge, tt.status, tt.reason)
			}
		})
	}
}

// TestKnownAttacks: what an endpoint, a proxy on the way or a caller may
// do to make an introspected token pass that should not, or to make the
// service ask the endpoint what it should not.
func TestKnownAttacks(t *testing.T) {
	p := newIDP(t)
	lim, err := introspect.NewLimits(introspect.Options{Timeout: 200 * time.Millisecond, MaxRate: 1000})
	if err != nil {
		t.Fatal(err)
	}
	s := newService(t, p, baseConfig(), time.Minute, lim, auth.Options{})
	evil, evilHits := attackServer(t)
	key := authtest.NewKey(t, "ES256")
	jwt := authtest.Token(t, key, nil, valid())
	answer := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, body)
		}
	}
	claims := `"sub":"mallory","aud":"plantstore","scope":"plants:read","exp":` + fmt.Sprint(time.Now().Add(time.Hour).Unix())
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	for _, tt := range []struct {
		name    string
		handler http.HandlerFunc // nil: the endpoint's own answers
		token   string           // "": a fresh opaque token
		status  int
		reason  auth.Reason
		calls   int64 // the endpoint calls the request makes
	}{
		{name: `active as the string "true"`, handler: answer(`{"active":"true",` + claims + `}`), status: 401, reason: auth.ReasonInactive, calls: 1},
		{name: "active missing", handler: answer(`{` + claims + `}`), status: 401, reason: auth.ReasonInactive, calls: 1},
		{name: "active 1", handler: answer(`{"active":1,` + claims + `}`), status: 401, reason: auth.ReasonInactive, calls: 1},
		{name: "iss of another issuer", handler: answer(`{"active":true,"iss":"https://other.example",` + claims + `}`), status: 401, reason: auth.ReasonIssuer, calls: 1},
		{name: "token_type refresh_token", handler: answer(`{"active":true,"token_type":"refresh_token",` + claims + `}`), status: 401, reason: auth.ReasonTokenType, calls: 1},
		{name: "token_type an ID token", handler: answer(`{"active":true,"token_type":"urn:ietf:params:oauth:token-type:id_token",` + claims + `}`), status: 401, reason: auth.ReasonTokenType, calls: 1},
		{name: "huge answer", handler: answer(`{"active":true,"pad":"` + strings.Repeat("x", 1<<20) + `",` + claims + `}`), status: 503, reason: auth.ReasonIntrospectionUnavailable, calls: 1},
		{name: "answer not JSON", handler: answer(`active=true`), status: 503, reason: auth.ReasonIntrospectionUnavailable, calls: 1},
		{name: "slow endpoint", handler: func(http.ResponseWriter, *http.Request) { <-release }, status: 503, reason: auth.ReasonIntrospectionUnavailable, calls: 1},
		{name: "redirect, not followed", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, evil.URL, http.StatusTemporaryRedirect)
		}, status: 503, reason: auth.ReasonIntrospectionUnavailable, calls: 1},
		{name: "endpoint error", handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }, status: 503, reason: auth.ReasonIntrospectionUnavailable, calls: 1},
		{name: "answer about another token", handler: answer(`{"active":true,"token":"someone-else",` + claims + `}`), status: 503, reason: auth.ReasonIntrospectionUnavailable, calls: 1},
		{name: "opaque token that looks like a JWS", token: "abc.def.ghi", status: 401, reason: auth.ReasonMalformed},
		{name: "a JWT to an issuer of opaque tokens", token: jwt, status: 401, reason: auth.ReasonMalformed},
		{name: "not a b64token", token: "opaque token", status: 401, reason: auth.ReasonMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p.override.Store(nil)
			if tt.handler != nil {
				p.set(tt.handler)
			}
			token := tt.token
			if token == "" {
				token = randomToken()
			}
			before := p.calls.Load()
			got := s.get(t, token)
			reason := got.reason()
			if got.status == http.StatusServiceUnavailable && got.retryAfter != "" {
				reason = string(auth.ReasonIntrospectionUnavailable)
			}
			if got.status != tt.status || reason != string(tt.reason) {
				t.Errorf("%d %q (Retry-After %q); want %d %s", got.status, got.challenge, got.retryAfter, tt.status, tt.reason)
			}
			if n := p.calls.Load() - before; n != tt.calls {
				t.Errorf("%d calls to the endpoint; want %d", n, tt.calls)
			}
		})
	}
	p.override.Store(nil)
	if evilHits.Load() != 0 {
		t.Errorf("the redirect's target got %d requests; want none", evilHits.Load())
	}
}

// attackServer counts the requests a server the service must never call
// receives.
func attackServer(t testing.TB) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"active":true,"sub":"mallory"}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// TestCache: a positive answer is served from the cache until cache is
// up, and never past exp; an inactive one is remembered a few seconds;
// a revoked token is refused once its answer expires.
func TestCache(t *testing.T) {
	p := newIDP(t)
	s := newService(t, p, baseConfig(), 300*time.Millisecond, nil, auth.Options{})
	token := p.issue(nil)
	for range 3 {
		if got := s.get(t, token); got.status != http.StatusOK {
			t.Fatalf("%d %q; want 200", got.status, got.challenge)
		}
	}
	if n := p.calls.Load(); n != 1 {
		t.Errorf("3 requests with one token made %d calls; want 1", n)
	}
	p.revoke(token)
	start := time.Now()
	authtest.WaitFor(t, "the revoked token refused", func() bool { return s.get(t, token).status == http.StatusUnauthorized })
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the revoked token passed for %s; want at most the cache's 300ms and a little", d)
	}
	if got := s.get(t, token); got.reason() != string(auth.ReasonInactive) {
		t.Errorf("revoked: %q; want inactive", got.challenge)
	}

	// Inactive: remembered.
	unknown := randomToken()
	before := p.calls.Load()
	for range 3 {
		s.get(t, unknown)
	}
	if n := p.calls.Load() - before; n != 1 {
		t.Errorf("3 requests with one inactive token made %d calls; want 1", n)
	}

	// Never past exp: a long cache, an answer that expires in 2s.
	long := newService(t, p, baseConfig(), time.Hour, nil, auth.Options{})
	short := p.issue(map[string]any{"exp": time.Now().Add(2 * time.Second).Unix()})
	if got := long.get(t, short); got.status != http.StatusOK {
		t.Fatalf("%d %q; want 200", got.status, got.challenge)
	}
	authtest.WaitFor(t, "the answer past exp", func() bool { return long.get(t, short).status == http.StatusUnauthorized })
}

// TestOneCallPerToken: concurrent requests with one token share one call.
func TestOneCallPerToken(t *testing.T) {
	p := newIDP(t)
	s := newService(t, p, baseConfig(), time.Minute, nil, auth.Options{})
	token := p.issue(nil)
	release := make(chan struct{})
	p.set(func(w http.ResponseWriter, r *http.Request) {
		<-release
		p.override.Store(nil)
		p.ServeHTTP(w, r)
	})
	const n = 8
	var wg sync.WaitGroup
	statuses := make([]int, n)
	for i := range n {
		wg.Go(func() { statuses[i] = s.get(t, token).status })
	}
	authtest.WaitFor(t, "the requests waiting on one call", func() bool { return s.trust.Waiters(token) == n-1 })
	close(release)
	wg.Wait()
	if n := p.calls.Load(); n != 2 { // the blocked call, and its pass-through
		t.Errorf("%d calls; want one (counted twice by the handler in front)", n)
	}
	if slices.ContainsFunc(statuses, func(s int) bool { return s != http.StatusOK }) {
		t.Errorf("statuses %v; want all 200", statuses)
	}
}

// TestOneCallPerRefusedToken: concurrent requests with one token the
// endpoint refuses share one call, and each gets its refusal.
func TestOneCallPerRefusedToken(t *testing.T) {
	p := newIDP(t)
	s := newService(t, p, baseConfig(), time.Minute, nil, auth.Options{})
	token := randomToken()
	release := make(chan struct{})
	p.set(func(w http.ResponseWriter, r *http.Request) {
		<-release
		p.override.Store(nil)
		p.ServeHTTP(w, r)
	})
	const n = 6
	var wg sync.WaitGroup
	reasons := make([]string, n)
	for i := range n {
		wg.Go(func() { reasons[i] = s.get(t, token).reason() })
	}
	authtest.WaitFor(t, "the requests waiting on one call", func() bool { return s.trust.Waiters(token) == n-1 })
	close(release)
	wg.Wait()
	if slices.ContainsFunc(reasons, func(r string) bool { return r != string(auth.ReasonInactive) }) {
		t.Errorf("reasons %v; want all inactive", reasons)
	}
}

// TestFlood: a flood of random opaque tokens makes no more calls than the
// rate allows, is refused with 503 and Retry-After over it, and a caller
// whose token is cached keeps being served meanwhile.
func TestFlood(t *testing.T) {
	p := newIDP(t)
	const rate = 20
	lim, err := introspect.NewLimits(introspect.Options{MaxRate: rate, MaxInflight: 4})
	if err != nil {
		t.Fatal(err)
	}
	s := newService(t, p, baseConfig(), time.Minute, lim, auth.Options{})
	cached := p.issue(nil)
	if got := s.get(t, cached); got.status != http.StatusOK {
		t.Fatalf("%d; want 200", got.status)
	}
	before := p.calls.Load()
	start := time.Now()
	var refused, served, unavailable atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				got := s.get(t, randomToken())
				if got.status == http.StatusServiceUnavailable {
					if got.retryAfter == "" {
						t.Errorf("503 without Retry-After")
					}
					unavailable.Add(1)
				} else if got.status == http.StatusUnauthorized {
					refused.Add(1)
				}
				if s.get(t, cached).status == http.StatusOK {
					served.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	calls := p.calls.Load() - before
	bound := int64(rate*elapsed.Seconds()) + rate + 1
	t.Logf("800 random tokens in %s: %d calls (bound %d), %d inactive, %d unavailable", elapsed, calls, bound, refused.Load(), unavailable.Load())
	if calls > bound {
		t.Errorf("%d calls in %s; want at most %d (%d a second and a burst)", calls, elapsed, bound, rate)
	}
	if unavailable.Load() == 0 {
		t.Errorf("no request over the bound was refused with 503")
	}
	if served.Load() != 800 {
		t.Errorf("the cached caller was served %d times of 800", served.Load())
	}
}

// TestEndpointDown: with the endpoint gone, unknown tokens are 503 (never
// 401), cached ones keep serving, and readiness does not change.
func TestEndpointDown(t *testing.T) {
	p := newIDP(t)
	s := newService(t, p, baseConfig(), time.Minute, nil, auth.Options{})
	cached := p.issue(nil)
	if got := s.get(t, cached); got.status != http.StatusOK {
		t.Fatalf("%d; want 200", got.status)
	}
	p.srv.Close()
	if got := s.get(t, p.issue(nil)); got.status != http.StatusServiceUnavailable || got.retryAfter == "" {
		t.Errorf("endpoint down: %d Retry-After %q; want 503 with Retry-After", got.status, got.retryAfter)
	}
	if got := s.get(t, cached); got.status != http.StatusOK {
		t.Errorf("cached token with the endpoint down: %d; want 200", got.status)
	}
	if err := s.v.Ready(); err != nil {
		t.Errorf("Ready with the endpoint down = %v; want nil", err)
	}
}

// TestOneIssuerOfOpaqueTokens: two issuers that take opaque tokens are a
// refused setting, naming the second.
func TestOneIssuerOfOpaqueTokens(t *testing.T) {
	p := newIDP(t)
	mk := func(name string) auth.Issuer {
		c := baseConfig()
		c.Issuer = "https://" + name + ".example"
		c.Introspection = auth.Introspection{Tokens: auth.IntrospectOpaque, Endpoint: p.srv.URL, ClientID: "x", ClientSecretFile: secretFile(t, "s")}
		tr, err := introspect.New(introspect.Config{Name: name, Issuer: c.Issuer, Introspection: c.Introspection}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return auth.Issuer{Name: name, Config: c, Opaque: tr}
	}
	_, err := auth.NewVerifier(auth.Options{}, mk("a"), mk("b"))
	var se *setting.Error
	if !errors.As(err, &se) || se.Issuer != "b" || se.Key != "introspection" {
		t.Errorf("two issuers of opaque tokens: %v; want the *setting.Error of b's introspection", err)
	}
}

// TestSettings: the introspection settings an issuer cannot work with are
// refused, each naming its key.
func TestSettings(t *testing.T) {
	ok := auth.Introspection{Tokens: auth.IntrospectOpaque, Endpoint: "https://idp.example/introspect", ClientID: "c", ClientSecretFile: "/s"}
	for _, tt := range []struct {
		name string
		edit func(*auth.Introspection)
		key  string
	}{
		{"no client", func(in *auth.Introspection) { in.ClientID = "" }, "introspection_client_id"},
		{"no secret nor key", func(in *auth.Introspection) { in.ClientSecretFile = "" }, "introspection_client_secret_file"},
		{"secret and key", func(in *auth.Introspection) { in.PrivateKeyFile = "/k" }, "introspection_private_key_file"},
		{"endpoint not http", func(in *auth.Introspection) { in.Endpoint = "ftp://x/y" }, "introspection_endpoint"},
		{"endpoint with a user", func(in *auth.Introspection) { in.Endpoint = "https://u:p@x/y" }, "introspection_endpoint"},
		{"negative cache", func(in *auth.Introspection) { in.Cache = -time.Second }, "introspection_cache"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := ok
			tt.edit(&in)
			c := baseConfig()
			c.Introspection = in
			_, err := auth.CheckIssuers(auth.Issuer{Config: c})
			var se *setting.Error
			if !errors.As(err, &se) || se.Key != tt.key {
				t.Errorf("CheckIssuers = %v; want the *setting.Error of %s", err, tt.key)
			}
		})
	}
	c := baseConfig()
	c.Introspection = ok
	if _, err := auth.CheckIssuers(auth.Issuer{Config: c}); err != nil {
		t.Errorf("CheckIssuers of a sound introspection = %v", err)
	}
	_ = context.Background
}
