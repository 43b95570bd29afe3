package auth_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/keys"
)

// countingKeys is a key source that counts its lookups, so that a test
// can tell a cache hit (no lookup) from a verification. It does not count
// its changes: a Verifier must not cache tokens of it.
type countingKeys struct {
	keys    keys.Keys
	lookups *atomic.Int64
}

func (c countingKeys) Key(ctx context.Context, kid, alg string) (keys.Key, error) {
	c.lookups.Add(1)
	return c.keys.Key(ctx, kid, alg)
}

// countingGenKeys is countingKeys over an unchanging set, which says so
// with a constant generation, as a KeySet does.
type countingGenKeys struct{ countingKeys }

func (countingGenKeys) Generation() uint64 { return 0 }

func TestVerifierCacheHits(t *testing.T) {
	k := authtest.NewKey(t, "ES256")
	token := authtest.Token(t, k, nil, authtest.Claims(nil))
	counted := func(n *atomic.Int64) countingGenKeys { return countingGenKeys{countingKeys{authtest.KeySet(k), n}} }
	tests := []struct {
		name        string
		cacheBytes  int64
		keys        func(n *atomic.Int64) keys.Keys
		wantLookups int64
	}{
		{name: "cached", keys: func(n *atomic.Int64) keys.Keys { return counted(n) }, wantLookups: 1},
		{name: "combined sources", keys: func(n *atomic.Int64) keys.Keys {
			return keys.Combine(counted(n), authtest.KeySet(authtest.NewKey(t, "ES256")))
		}, wantLookups: 1},
		{name: "cache turned off", cacheBytes: -1, keys: func(n *atomic.Int64) keys.Keys { return counted(n) }, wantLookups: 3},
		{name: "source without generation", keys: func(n *atomic.Int64) keys.Keys {
			return countingKeys{authtest.KeySet(k), n}
		}, wantLookups: 3},
		{name: "combined with a source without generation", keys: func(n *atomic.Int64) keys.Keys {
			return keys.Combine(counted(n), countingKeys{authtest.KeySet(authtest.NewKey(t, "ES256")), new(atomic.Int64)})
		}, wantLookups: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int64
			v := newVerifierOpts(t, auth.Options{CacheBytes: tt.cacheBytes}, auth.Config{}, tt.keys(&n))
			for i := range 3 {
				id, err := v.Verify(t.Context(), token)
				if err != nil || id.Subject != "alice" {
					t.Fatalf("Verify #%d = %+v, %v; want alice", i+1, id, err)
				}
			}
			if got := n.Load(); got != tt.wantLookups {
				t.Errorf("key lookups for 3 verifications = %d, want %d", got, tt.wantLookups)
			}
		})
	}
}

// TestVerifierCacheRefusals checks that refusals are never cached, and
// that the required scope and the time claims hold on every hit.
func TestVerifierCacheRefusals(t *testing.T) {
	k := authtest.NewKey(t, "EdDSA")
	now := time.Now()
	tests := []struct {
		name       string
		claims     map[string]any
		wantReason auth.Reason
	}{
		{name: "valid", claims: authtest.Claims(map[string]any{"scope": "plants:read"})},
		{name: "without the required scope", claims: authtest.Claims(nil), wantReason: auth.ReasonScope},
		{name: "expired", claims: authtest.Claims(map[string]any{"scope": "plants:read", "exp": now.Add(-time.Minute).Unix()}), wantReason: auth.ReasonExpired},
		{name: "not yet valid", claims: authtest.Claims(map[string]any{"scope": "plants:read", "nbf": now.Add(time.Hour).Unix()}), wantReason: auth.ReasonNotYetValid},
		{name: "unknown key", claims: authtest.Claims(map[string]any{"scope": "plants:read"}), wantReason: auth.ReasonUnknownKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int64
			ks := countingGenKeys{countingKeys{authtest.KeySet(k), &n}}
			v := newVerifier(t, auth.Config{RequiredScope: "plants:read"}, ks)
			header := map[string]any(nil)
			if tt.wantReason == auth.ReasonUnknownKey {
				header = map[string]any{"kid": "elsewhere"}
			}
			token := authtest.Token(t, k, header, tt.claims)
			for i := range 2 {
				_, err := v.Verify(t.Context(), token)
				if got := authtest.ReasonOf(t, err); got != tt.wantReason {
					t.Fatalf("Verify #%d reason = %q, want %q", i+1, got, tt.wantReason)
				}
			}
			wantLookups := int64(2)
			if tt.wantReason == "" {
				wantLookups = 1
			}
			if got := n.Load(); got != wantLookups {
				t.Errorf("key lookups for 2 verifications = %d, want %d", got, wantLookups)
			}
		})
	}
}

// TestVerifierCacheJWKSKeyRemoved checks that a key the JWKS drops stops
// its cached tokens as soon as the refresh that drops it has installed
// the new set.
func TestVerifierCacheJWKSKeyRemoved(t *testing.T) {
	a, b := authtest.NewKeyID(t, "ES256", "a"), authtest.NewKeyID(t, "EdDSA", "b")
	srv := authtest.NewServer(t, authtest.JWKS(t, a))
	j, _ := authtest.NewJWKS(t, keys.JWKSOptions{URL: srv.URL, MinRefresh: time.Nanosecond})
	authtest.WaitFor(t, "first JWKS fetch", func() bool { return j.Ready() == nil })
	v := newVerifier(t, auth.Config{}, j)

	tokA := authtest.Token(t, a, nil, authtest.Claims(nil))
	for i := range 2 {
		if _, err := v.Verify(t.Context(), tokA); err != nil {
			t.Fatalf("Verify(token of a) #%d: %v", i+1, err)
		}
	}
	gen := j.Generation()

	// The set now holds b only. A token of b names an unknown kid, which
	// makes the JWKS fetch and install the new set before it answers.
	srv.Serve(authtest.JWKS(t, b))
	if _, err := v.Verify(t.Context(), authtest.Token(t, b, nil, authtest.Claims(nil))); err != nil {
		t.Fatalf("Verify(token of b) after the rotation: %v", err)
	}
	if got := j.Generation(); got <= gen {
		t.Errorf("Generation after a key was removed = %d, want more than %d", got, gen)
	}
	if _, err := v.Verify(t.Context(), tokA); authtest.ReasonOf(t, err) != auth.ReasonUnknownKey {
		t.Errorf("Verify(cached token of the removed key) = %v, want %q", err, auth.ReasonUnknownKey)
	}
}

// TestJWKSGenerationUnchangedSet checks that a refresh returning the same
// keys keeps the generation, so that the cache survives routine refreshes.
func TestJWKSGenerationUnchangedSet(t *testing.T) {
	a := authtest.NewKeyID(t, "ES256", "a")
	srv := authtest.NewServer(t, authtest.JWKS(t, a))
	j, _ := authtest.NewJWKS(t, keys.JWKSOptions{URL: srv.URL, MinRefresh: time.Nanosecond})
	authtest.WaitFor(t, "first JWKS fetch", func() bool { return j.Ready() == nil })
	gen := j.Generation()
	hits := srv.Hits.Load()
	// An unknown kid makes the JWKS fetch the same document again.
	if _, err := j.Key(t.Context(), "unknown", "ES256"); !errors.Is(err, keys.ErrUnknownKey) {
		t.Fatalf("Key(unknown kid) error = %v, want %v", err, keys.ErrUnknownKey)
	}
	if got := srv.Hits.Load(); got != hits+1 {
		t.Fatalf("JWKS fetches after an unknown kid = %d, want %d", got, hits+1)
	}
	if got := j.Generation(); got != gen {
		t.Errorf("Generation after a fetch of the same ks = %d, want %d", got, gen)
	}
}

// TestVerifierCacheKeyFileReload checks that a key file reload that drops
// a key stops its cached tokens at once.
func TestVerifierCacheKeyFileReload(t *testing.T) {
	a, b := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "EdDSA")
	path := authtest.WriteJWKS(t, a, b)
	f, err := keys.LoadKeyFile(path, nil)
	if err != nil {
		t.Fatalf("LoadKeyFile: %v", err)
	}
	v := newVerifier(t, auth.Config{}, keys.Combine(f, authtest.KeySet(authtest.NewKey(t, "ES256"))))
	tokA, tokB := authtest.Token(t, a, nil, authtest.Claims(nil)), authtest.Token(t, b, nil, authtest.Claims(nil))
	for _, tok := range []string{tokA, tokB, tokA, tokB} {
		if _, err := v.Verify(t.Context(), tok); err != nil {
			t.Fatalf("Verify before reload: %v", err)
		}
	}
	if err := os.WriteFile(path, authtest.JWKS(t, b), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if _, err := v.Verify(t.Context(), tokA); authtest.ReasonOf(t, err) != auth.ReasonUnknownKey {
		t.Errorf("Verify(cached token of the removed key) after Reload = %v, want %q", err, auth.ReasonUnknownKey)
	}
	if _, err := v.Verify(t.Context(), tokB); err != nil {
		t.Errorf("Verify(token of the kept key) after Reload: %v", err)
	}
}

// TestVerifierCacheConcurrentUsers sends the tokens of many users through
// the middleware from several goroutines, with a cache much smaller than
// the users so that entries are evicted and replaced all along, and checks
// that every request sees its own caller. Run it with -race.
func TestVerifierCacheConcurrentUsers(t *testing.T) {
	const users, workers, requests = 300, 8, 400
	k := authtest.NewKey(t, "EdDSA")
	tokens := make([]string, users)
	for i := range tokens {
		tokens[i] = authtest.Token(t, k, nil, authtest.Claims(map[string]any{
			"sub":    fmt.Sprintf("user%d", i),
			"groups": []string{fmt.Sprintf("team%d", i), "everyone"},
		}))
	}
	// A budget of 64 KiB: a few dozen entries.
	v := newVerifierOpts(t, auth.Options{CacheBytes: 64 << 10}, auth.Config{}, authtest.KeySet(k))
	e := gin.New()
	e.GET("/", auth.Middleware(v, nil), func(c *gin.Context) {
		id, ok := auth.FromGin(c)
		if !ok {
			c.String(http.StatusInternalServerError, "no identity")
			return
		}
		c.String(http.StatusOK, "%s %s", id.Subject, id.Groups)
	})

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range requests {
				i := r.IntN(users)
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				req.Header.Set("Authorization", "Bearer "+tokens[i])
				rec := httptest.NewRecorder()
				e.ServeHTTP(rec, req)
				want := fmt.Sprintf("user%d [team%d everyone]", i, i)
				if rec.Code != http.StatusOK || rec.Body.String() != want {
					errs <- fmt.Errorf("GET with the token of user%d = %d %q, want 200 %q", i, rec.Code, rec.Body.String(), want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestFromContext(t *testing.T) {
	id := &auth.Identity{Issuer: "staff", Subject: "bob", Groups: []string{"g"}}
	tests := []struct {
		name   string
		ctx    context.Context
		want   auth.Identity
		wantOK bool
	}{
		{name: "identity", ctx: auth.NewContext(t.Context(), id), want: *id, wantOK: true},
		{name: "no identity", ctx: t.Context()},
		{name: "nil identity", ctx: auth.NewContext(t.Context(), nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := auth.FromContext(tt.ctx)
			if got.Issuer != tt.want.Issuer || got.Subject != tt.want.Subject || !slices.Equal(got.Groups, tt.want.Groups) || ok != tt.wantOK {
				t.Errorf("FromContext = %+v, %t; want %+v, %t", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// BenchmarkVerifyCache verifies one token through the cache (hit) and
// with the cache turned off (a signature check every time).
func BenchmarkVerifyCache(b *testing.B) {
	// A cache miss of a token at the group cap against one of 2 groups:
	// no valid token may cost much more than an ordinary one (SPEC §2).
	for _, n := range []int{2, auth.DefaultMaxGroups} {
		b.Run(fmt.Sprintf("ES256/off/groups=%d", n), func(b *testing.B) {
			k := authtest.NewKey(b, "ES256")
			v := newVerifierOpts(b, auth.Options{CacheBytes: -1}, auth.Config{}, authtest.KeySet(k))
			groups := make([]string, n)
			for i := range groups {
				groups[i] = fmt.Sprintf("group-%03d", i)
			}
			token := authtest.Token(b, k, nil, authtest.Claims(map[string]any{"exp": time.Now().Add(time.Hour).Unix(), "groups": groups}))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(b.Context(), token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// Hits of one token, its keys fetched, with and without every rule on
	// tokens meant for this resource (the keys held to max_stale): what
	// the rules add to a cached request.
	for _, rules := range []bool{false, true} {
		name := "ES256/hit/fetched"
		if rules {
			name += "+rules"
		}
		b.Run(name, func(b *testing.B) {
			k := authtest.NewKey(b, "ES256")
			jwks, _ := authtest.NewJWKS(b, keys.JWKSOptions{URL: authtest.NewServer(b, authtest.JWKS(b, k)).URL})
			authtest.WaitFor(b, "the first JWKS fetch", func() bool { return jwks.Ready() == nil })
			cfg := auth.Config{}
			if rules {
				cfg = auth.Config{
					TokenTypes: []string{"at+jwt"}, Clients: []string{"plants-web"},
					MaxLifetime: 2 * time.Hour, MaxStale: 24 * time.Hour,
				}
			}
			v := newVerifier(b, cfg, jwks)
			token := authtest.Token(b, k, map[string]any{"typ": "at+jwt"}, authtest.Claims(map[string]any{"exp": time.Now().Add(time.Hour).Unix(), "client_id": "plants-web"}))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(b.Context(), token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
		for _, size := range []int64{0, -1} {
			name := alg + "/hit"
			if size < 0 {
				name = alg + "/off"
			}
			b.Run(name, func(b *testing.B) {
				k := authtest.NewKey(b, alg)
				v := newVerifierOpts(b, auth.Options{CacheBytes: size}, auth.Config{}, authtest.KeySet(k))
				token := authtest.Token(b, k, nil, authtest.Claims(map[string]any{"exp": time.Now().Add(time.Hour).Unix()}))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := v.Verify(b.Context(), token); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
