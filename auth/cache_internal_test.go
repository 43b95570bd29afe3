package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// cacheFixture is a verifier with a controlled clock whose one issuer
// trusts the tokens the fixture made: the cache and the rules on the
// claims are the pipeline's, whatever trusted the token.
type cacheFixture struct {
	v     *Verifier
	now   time.Time
	trust *madeTokens
}

func newCacheFixture(t testing.TB, o Options) *cacheFixture {
	t.Helper()
	trust := &madeTokens{claims: map[string]Claims{}}
	v, err := NewVerifier(o, Issuer{JWS: trust})
	if err != nil {
		t.Fatal(err)
	}
	f := &cacheFixture{v: v, now: time.Unix(1_800_000_000, 0), trust: trust}
	v.now = func() time.Time { return f.now }
	return f
}

// token makes a token of the claims c (times in seconds from the
// fixture's start): three base64url segments, the middle one the claims.
func (f *cacheFixture) token(t testing.TB, c Claims) string {
	t.Helper()
	payload, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var sig [32]byte
	if _, err := rand.Read(sig[:]); err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	tok := enc([]byte(`{"alg":"test"}`)) + "." + enc(payload) + "." + enc(sig[:])
	// The claims as a token's JSON decodes to.
	var decoded Claims
	if err := json.Unmarshal(payload, &decoded); err != nil {
		t.Fatal(err)
	}
	f.trust.mu.Lock()
	f.trust.claims[tok] = decoded
	f.trust.mu.Unlock()
	return tok
}

// madeTokens trusts the tokens a cacheFixture made, and no other: one
// with another signature is refused as a bad signature. It is its own
// Authenticator, whose verdicts hold for ever.
type madeTokens struct {
	mu     sync.Mutex
	claims map[string]Claims
}

func (m *madeTokens) Authenticator(Config, func() time.Time) (Authenticator, error) { return m, nil }

func (m *madeTokens) Authenticate(_ context.Context, token string) (Verdict, *Error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.claims[token]
	if !ok {
		return Verdict{}, invalidToken(ReasonBadSignature)
	}
	return Verdict{Claims: c, Cacheable: true}, nil
}

func (m *madeTokens) Holds(uint64, time.Time) bool { return true }
func (m *madeTokens) Ready(time.Time) error        { return nil }

func (f *cacheFixture) at(sec int64) int64 { return f.now.Unix() + sec }

// TestCacheTimeClaims verifies a token at the fixture's start (which
// caches it), moves the clock, and verifies it again: the cached entry
// must give the answer a full verification gives at that time.
func TestCacheTimeClaims(t *testing.T) {
	const leeway = 30 * time.Second
	tests := []struct {
		name       string
		claims     func(f *cacheFixture) Claims
		later      time.Duration
		wantReason Reason
	}{
		{name: "before exp", claims: func(f *cacheFixture) Claims {
			return Claims{"sub": "a", "exp": f.at(60)}
		}, later: 59 * time.Second},
		{name: "after exp within leeway", claims: func(f *cacheFixture) Claims {
			return Claims{"sub": "a", "exp": f.at(60)}
		}, later: 60*time.Second + leeway - time.Nanosecond},
		{name: "expired while cached", claims: func(f *cacheFixture) Claims {
			return Claims{"sub": "a", "exp": f.at(60)}
		}, later: 60*time.Second + leeway, wantReason: ReasonExpired},
		{name: "long expired while cached", claims: func(f *cacheFixture) Claims {
			return Claims{"sub": "a", "exp": f.at(60)}
		}, later: 24 * time.Hour, wantReason: ReasonExpired},
		{name: "clock set back before nbf", claims: func(f *cacheFixture) Claims {
			return Claims{"sub": "a", "exp": f.at(3600), "nbf": f.at(0)}
		}, later: -leeway - time.Second, wantReason: ReasonNotYetValid},
		{name: "clock set back before iat", claims: func(f *cacheFixture) Claims {
			return Claims{"sub": "a", "exp": f.at(3600), "iat": f.at(0)}
		}, later: -leeway - time.Second, wantReason: ReasonNotYetValid},
		{name: "clock set back within leeway", claims: func(f *cacheFixture) Claims {
			return Claims{"sub": "a", "exp": f.at(3600), "nbf": f.at(0), "iat": f.at(0)}
		}, later: -leeway},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newCacheFixture(t, Options{Leeway: leeway})
			token := f.token(t, tt.claims(f))
			if _, err := f.v.Verify(t.Context(), token); err != nil {
				t.Fatalf("Verify at the start: %v", err)
			}
			if f.v.cache.get(token, f.v.cache.hashOf(token)) == nil {
				t.Fatal("token not cached after a successful Verify")
			}
			f.now = f.now.Add(tt.later)
			_, err := f.v.Verify(t.Context(), token)
			var got Reason
			if err != nil {
				got = err.(*Error).Reason
			}
			if got != tt.wantReason {
				t.Errorf("Verify %s later = %v; want reason %q", tt.later, err, tt.wantReason)
			}
		})
	}
}

// TestCacheCollisions gives every token the same hash, so that all of
// them compete for one set, and checks that each token only ever gets
// its own identity, and that a token that fails verification is refused
// even when a valid one with its hash is cached.
func TestCacheCollisions(t *testing.T) {
	f := newCacheFixture(t, Options{})
	f.v.cache.hash = func(maphash.Seed, string) uint64 { return 42 }
	const users = 3 * cacheWays // more than a set holds
	tokens := make([]string, users)
	for i := range tokens {
		tokens[i] = f.token(t, Claims{"sub": subject(i), "groups": []any{subject(i) + "-group"}, "exp": f.at(3600)})
	}
	valid := tokens[0]
	// Same header and claims, bad signature: one character in the middle
	// of the signature changed (the last ones may carry no bits).
	b := []byte(valid)
	i := len(b) - 20
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	forged := string(b)
	tests := []struct {
		name       string
		token      string
		wantSub    string
		wantReason Reason
	}{
		{name: "forged twin of a cached token", token: forged, wantReason: ReasonBadSignature},
		{name: "first user", token: valid, wantSub: subject(0)},
		{name: "last user", token: tokens[users-1], wantSub: subject(users - 1)},
	}
	for round := range 3 {
		for i, tok := range tokens {
			e, err := f.v.verify(t.Context(), tok)
			if err != nil {
				t.Fatalf("round %d: verify(token of %s): %v", round, subject(i), err)
			}
			if e.id.Subject != subject(i) || len(e.id.Groups) != 1 || e.id.Groups[0] != subject(i)+"-group" {
				t.Fatalf("round %d: verify(token of %s) = %+v", round, subject(i), e.id)
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := f.v.Verify(t.Context(), tt.token)
			var got Reason
			if err != nil {
				got = err.(*Error).Reason
			}
			var sub string
			if id != nil {
				sub = id.Subject
			}
			if got != tt.wantReason || sub != tt.wantSub {
				t.Errorf("Verify = %+v, %v; want subject %q, reason %q", id, err, tt.wantSub, tt.wantReason)
			}
		})
	}
}

func subject(i int) string { return "user" + string(rune('A'+i)) }

// TestCacheBudget fills the cache with more tokens than its budget holds
// and checks that what it holds, table and entries, stays within it, and
// that a token larger than the whole budget is verified but not kept.
func TestCacheBudget(t *testing.T) {
	tests := []struct {
		budget   int64
		wantSets int
	}{
		{budget: -1, wantSets: 0},
		{budget: 1000, wantSets: 0},
		{budget: 64 << 10, wantSets: 8},
		{budget: DefaultCacheBytes, wantSets: DefaultCacheBytes / cacheSlotBytes / cacheWays},
	}
	for _, tt := range tests {
		c := newTokenCache(tt.budget)
		got := 0
		if c != nil {
			got = len(c.sets)
		}
		if got != tt.wantSets {
			t.Errorf("newTokenCache(%d) has %d sets, want %d", tt.budget, got, tt.wantSets)
		}
	}

	const budget = 256 << 10
	f := newCacheFixture(t, Options{CacheBytes: budget})
	groups := make([]any, 70)
	for i := range groups {
		groups[i] = fmt.Sprintf("group-with-a-rather-long-name-%03d", i)
	}
	table := int64(len(f.v.cache.sets)) * int64(unsafe.Sizeof(cacheSet{}))
	for i := range 2000 {
		tok := f.token(t, Claims{"sub": fmt.Sprintf("user-%04d", i), "groups": groups, "exp": f.at(3600)})
		if _, err := f.v.Verify(t.Context(), tok); err != nil {
			t.Fatalf("Verify(token %d): %v", i, err)
		}
		var held int64
		entries := 0
		for s := range f.v.cache.sets {
			for w := range f.v.cache.sets[s] {
				if e := f.v.cache.sets[s][w].Load(); e != nil {
					held += entrySize(e)
					entries++
				}
			}
		}
		if held != f.v.cache.used.Load() {
			t.Fatalf("after %d tokens the cache counts %d bytes and holds %d", i+1, f.v.cache.used.Load(), held)
		}
		if table+held > budget {
			t.Fatalf("after %d tokens the cache holds %d bytes in %d entries and a table of %d: over its budget of %d", i+1, held, entries, table, budget)
		}
		if i == 1999 && entries < 10 {
			t.Errorf("the cache holds %d entries of a %d-byte budget; want it used", entries, budget)
		}
	}
	small := newCacheFixture(t, Options{CacheBytes: 4 << 10})
	tok := small.token(t, Claims{"sub": "big", "scope": strings.Repeat("x", 5<<10), "exp": small.at(3600)})
	if _, err := small.v.Verify(t.Context(), tok); err != nil {
		t.Fatalf("Verify(token over the budget): %v", err)
	}
	if small.v.cache.get(tok, small.v.cache.hashOf(tok)) != nil || small.v.cache.used.Load() != 0 {
		t.Errorf("a token larger than the cache's budget was kept")
	}
}

// digestTokens answers about the opaque tokens it knows, as an issuer
// asked about them would, with verdicts to be kept as a digest; it counts
// the times it is asked.
type digestTokens struct {
	claims map[string]Claims
	asked  atomic.Int64
}

func (d *digestTokens) Authenticator(Config, func() time.Time) (Authenticator, error) { return d, nil }

func (d *digestTokens) Authenticate(_ context.Context, token string) (Verdict, *Error) {
	d.asked.Add(1)
	c, ok := d.claims[token]
	if !ok {
		return Verdict{}, invalidToken(ReasonInactive)
	}
	return Verdict{Claims: c, Cacheable: true, Digest: true, Introspected: true}, nil
}

func (d *digestTokens) Holds(uint64, time.Time) bool { return true }
func (d *digestTokens) Ready(time.Time) error        { return nil }

// TestCacheDigest: a verdict to be kept as a digest leaves no token in the
// cache, its token is found again by its hashes, and another token whose
// set hash is the same is not taken for it.
func TestCacheDigest(t *testing.T) {
	exp := float64(time.Now().Add(time.Hour).Unix())
	d := &digestTokens{claims: map[string]Claims{
		"opaque-token-of-alice": {"sub": "alice", "exp": exp},
		"opaque-token-of-bob":   {"sub": "bob", "exp": exp},
	}}
	v, err := NewVerifier(Options{}, Issuer{Opaque: d})
	if err != nil {
		t.Fatal(err)
	}
	v.cache.hash = func(maphash.Seed, string) uint64 { return 42 } // one set for all
	for round := range 3 {
		for _, who := range []string{"alice", "bob"} {
			e, err := v.verify(t.Context(), "opaque-token-of-"+who)
			if err != nil || e.id.Subject != who || !e.id.Introspected {
				t.Fatalf("round %d: verify(%s's token) = %+v, %v", round, who, e, err)
			}
		}
	}
	if n := d.asked.Load(); n != 2 {
		t.Errorf("asked %d times for 2 tokens in 3 rounds; want 2", n)
	}
	kept := 0
	for i := range v.cache.sets[42&v.cache.mask] {
		if e := v.cache.sets[42&v.cache.mask][i].Load(); e != nil {
			kept++
			if e.token != "" || !e.digest {
				t.Errorf("a cached entry holds token %q (digest %t); want none", e.token, e.digest)
			}
		}
	}
	if kept != 2 {
		t.Errorf("%d entries kept; want 2", kept)
	}
	if _, err := v.verify(t.Context(), "opaque-token-of-mallory"); err == nil || err.Reason != ReasonInactive {
		t.Errorf("another token of the same set hash: %v; want it asked about and refused", err)
	}
}
