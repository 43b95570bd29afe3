package auth

import (
	"bytes"
	"context"
	"crypto"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DefaultCacheSize is the number of verified tokens a [Verifier] keeps when
// its Config does not say.
const DefaultCacheSize = 16384

// maxCachedToken is the longest token the cache keeps; longer ones are
// verified every time. With it, the cache's memory is bounded by
// CacheSize × 4 KiB plus the identities, whatever the tokens.
const maxCachedToken = 4 << 10

// cacheWays is the number of entries per set of the cache.
const cacheWays = 8

// verified is a token that passed every check, with what a request needs
// of it. It is immutable once built, and shared by every request that
// presents the same token while it is cached.
type verified struct {
	token string
	hash  uint64
	// gen is the generation of the key sources the token was verified
	// against; a hit needs the sources to be at the same generation.
	gen uint64
	id  Identity
	// principals are [Principals] of id, computed once.
	principals []string
	// exp, nbf and iat are the time claims in Unix nanoseconds; nbf and
	// iat are math.MinInt64 when the token has none.
	exp, nbf, iat int64
}

// identity returns a copy of e's Identity whose slices the caller may
// modify.
func (e *verified) identity() Identity {
	return Identity{Subject: e.id.Subject, Groups: slices.Clone(e.id.Groups), Scopes: slices.Clone(e.id.Scopes)}
}

// validAt reports whether e's time claims still hold at now with leeway:
// the checks golang-jwt made when the token was verified, made again.
func (e *verified) validAt(now time.Time, leeway time.Duration) bool {
	t := now.UnixNano()
	l := int64(leeway)
	return t < satAdd(e.exp, l) && t >= satAdd(e.nbf, -l) && t >= satAdd(e.iat, -l)
}

// satAdd returns a+b, held within the int64 range (b is small against
// either end: a leeway).
func satAdd(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// timeClaims returns exp, nbf and iat of verified claims in Unix
// nanoseconds (nbf and iat math.MinInt64 when absent), and false when
// exp is missing, which verification does not let through.
func timeClaims(claims jwt.MapClaims) (exp, nbf, iat int64, ok bool) {
	nanos := func(d *jwt.NumericDate) int64 {
		if d == nil {
			return math.MinInt64
		}
		// Beyond year 2262 UnixNano overflows; such a date is "forever"
		// for exp and "long ago" is impossible for nbf and iat that
		// passed the checks.
		if d.Time.After(time.Unix(0, math.MaxInt64)) {
			return math.MaxInt64
		}
		return d.Time.UnixNano()
	}
	e, err := claims.GetExpirationTime()
	if err != nil || e == nil {
		return 0, 0, 0, false
	}
	n, err := claims.GetNotBefore()
	if err != nil {
		return 0, 0, 0, false
	}
	i, err := claims.GetIssuedAt()
	if err != nil {
		return 0, 0, 0, false
	}
	return nanos(e), nanos(n), nanos(i), true
}

// tokenCache is a bounded, set-associative cache of verified tokens.
// A token's 64-bit hash, keyed with a per-cache random seed, picks a set
// of cacheWays entries; a hit needs the whole token to be equal, so a
// hash collision is a miss, never another caller's identity. Reads take
// no lock: each entry is an atomic pointer to an immutable *verified. A
// full set loses a random entry.
type tokenCache struct {
	seed maphash.Seed
	// hash is maphash.String with seed; tests replace it to force
	// collisions.
	hash func(seed maphash.Seed, s string) uint64
	sets []cacheSet
	mask uint64
}

type cacheSet [cacheWays]atomic.Pointer[verified]

// newTokenCache returns a cache of at least size entries, or nil for a
// size under 1.
func newTokenCache(size int) *tokenCache {
	if size < 1 {
		return nil
	}
	n := 1
	for n*cacheWays < size {
		n *= 2
	}
	return &tokenCache{
		seed: maphash.MakeSeed(),
		hash: maphash.String,
		sets: make([]cacheSet, n),
		mask: uint64(n - 1),
	}
}

// get returns the entry of token verified at generation gen, or nil.
func (c *tokenCache) get(token string, h, gen uint64) *verified {
	set := &c.sets[h&c.mask]
	for i := range set {
		if e := set[i].Load(); e != nil && e.hash == h && e.gen == gen && e.token == token {
			return e
		}
	}
	return nil
}

// put stores e in the set of its hash: in place of an empty entry, one of
// an older generation or one of the same token, else of a random one.
func (c *tokenCache) put(e *verified) {
	set := &c.sets[e.hash&c.mask]
	for i := range set {
		old := set[i].Load()
		if old == nil || old.gen != e.gen || (old.hash == e.hash && old.token == e.token) {
			if set[i].CompareAndSwap(old, e) {
				return
			}
		}
	}
	set[rand.IntN(cacheWays)].Store(e)
}

// Principals returns the principals of a caller, the names a plant's
// readers use for it: "user:<sub>", "group:<g>" for each of its groups,
// and "*", without repeats. Empty subjects and group names give no
// principal, since no reader can name them.
func Principals(id Identity) []string {
	ps := make([]string, 0, len(id.Groups)+2)
	if id.Subject != "" {
		ps = append(ps, "user:"+id.Subject)
	}
	for _, g := range id.Groups {
		if g == "" {
			continue
		}
		if p := "group:" + g; !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	return append(ps, "*")
}

// PrincipalsFromContext returns the [Principals] of the Identity in ctx
// and reports whether there was one. When ctx comes from [Middleware], the
// slice is computed once per cached token and shared: the caller must not
// modify it.
func PrincipalsFromContext(ctx context.Context) ([]string, bool) {
	switch x := ctx.Value(contextKey{}).(type) {
	case *verified:
		return x.principals, true
	case Identity:
		return Principals(x), true
	}
	return nil, false
}

// generational is a key source that counts the changes of its key set:
// Generation returns a number that grows whenever a key is added, removed
// or replaced.
type generational interface {
	Generation() uint64
}

// generationOf returns the generation function of a key source, the sum
// of its parts' generations for [Combine], and false when some part does
// not count its changes (then nothing may be cached: a removed key could
// not be noticed).
func generationOf(k Keys) (func() uint64, bool) {
	switch s := k.(type) {
	case multiKeys:
		gens := make([]func() uint64, 0, len(s))
		for _, part := range s {
			g, ok := generationOf(part)
			if !ok {
				return nil, false
			}
			gens = append(gens, g)
		}
		return func() uint64 {
			var sum uint64
			for _, g := range gens {
				sum += g()
			}
			return sum
		}, true
	case generational:
		return s.Generation, true
	}
	return nil, false
}

// Generation returns 0: a KeySet never changes.
func (s *KeySet) Generation() uint64 { return 0 }

// Generation returns the number of times f's keys changed by
// [KeyFile.Reload]. It grows after the new keys are in place.
func (f *KeyFile) Generation() uint64 { return f.gen.Load() }

// Generation returns the number of times j's key set changed: a key
// added, removed or replaced by a fetch. It grows after the new keys are
// in place.
func (j *JWKS) Generation() uint64 { return j.gen.Load() }

// sameKeys reports whether a and b hold the same keys in the same order.
func sameKeys(a, b *KeySet) bool {
	if a.Len() != b.Len() {
		return false
	}
	if a == nil {
		return true
	}
	for i, ka := range a.all {
		kb := b.all[i]
		if ka.ID != kb.ID || ka.Algorithm != kb.Algorithm || !samePublic(ka.Public, kb.Public) {
			return false
		}
	}
	return true
}

// samePublic reports whether two verification keys are equal.
func samePublic(a, b any) bool {
	if sa, ok := a.([]byte); ok {
		sb, ok := b.([]byte)
		return ok && bytes.Equal(sa, sb)
	}
	if ea, ok := a.(interface{ Equal(crypto.PublicKey) bool }); ok {
		return ea.Equal(b)
	}
	return false
}
