// Package keys owns the verification keys of the issuers and where they
// come from: a key ([Key], [KeySet]), key files and HMAC secret files read
// again when they change ([KeyFile]), a JWKS fetched and refreshed in the
// background, found by OIDC discovery when no URL is given ([JWKS]), how
// long fetched keys may serve unconfirmed ([HoldFresh]), and the open key
// source of one issuer that combines them ([Source]). It verifies no
// token: package jws looks keys up here by kid and algorithm.
package keys

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"strings"

	"github.com/plantstore/plantstore/observability/setting"
)

// Errors a key lookup returns. A verifier maps them to failure reasons.
var (
	// ErrUnknownKey: no configured key has the token's kid, or (without a kid)
	// no key fits the token's alg.
	ErrUnknownKey = errors.New("unknown key")
	// ErrAmbiguousKey: the token has no kid and more than one configured key
	// fits its alg.
	ErrAmbiguousKey = errors.New("ambiguous key")
	// ErrKeyMismatch: a key with the token's kid exists but cannot verify the
	// token's alg (another family, or the key pins another alg).
	ErrKeyMismatch = errors.New("key does not fit algorithm")
	// ErrNoKeys: the source has no usable key set yet.
	ErrNoKeys = errors.New("no usable keys")
)

// Key is one verification key.
type Key struct {
	// ID is the key's kid (for a PEM key, its RFC 7638 thumbprint).
	ID string
	// Algorithm is the alg the key is pinned to, or "" when it names none.
	Algorithm string
	// Public is *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey, or
	// []byte for an HMAC secret.
	Public any
}

// Fits reports whether k may verify a token signed with alg: the key's
// family must be the algorithm's (an RSA or EC public key is never an HMAC
// secret, and an empty secret fits nothing), the curve must match for
// ECDSA, and a pinned alg must be alg.
func (k Key) Fits(alg string) bool {
	if k.Algorithm != "" && k.Algorithm != alg && !(edDSA(k.Algorithm) && edDSA(alg)) {
		return false
	}
	switch pub := k.Public.(type) {
	case *rsa.PublicKey:
		switch alg {
		case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
			return true
		}
		return false
	case *ecdsa.PublicKey:
		switch alg {
		case "ES256":
			return pub.Curve.Params().Name == "P-256"
		case "ES384":
			return pub.Curve.Params().Name == "P-384"
		case "ES512":
			return pub.Curve.Params().Name == "P-521"
		}
		return false
	case ed25519.PublicKey:
		return edDSA(alg)
	case []byte:
		return len(pub) > 0 && (alg == "HS256" || alg == "HS384" || alg == "HS512")
	}
	return false
}

// edDSA reports whether alg names EdDSA over Ed25519: EdDSA, or Ed25519,
// its fully-specified name (RFC 9864).
func edDSA(alg string) bool { return alg == "EdDSA" || alg == "Ed25519" }

// KeySet is an immutable set of keys, safe for concurrent use.
type KeySet struct {
	byID map[string][]Key
	all  []Key
}

// NewKeySet returns a KeySet holding keys.
func NewKeySet(keys []Key) *KeySet {
	s := &KeySet{byID: make(map[string][]Key, len(keys)), all: keys}
	for _, k := range keys {
		if k.ID != "" {
			s.byID[k.ID] = append(s.byID[k.ID], k)
		}
	}
	return s
}

// Len returns the number of keys in s; a nil *KeySet has none.
func (s *KeySet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.all)
}

// Key returns the key of s for kid and alg; a KeySet is a static [Keys].
func (s *KeySet) Key(_ context.Context, kid, alg string) (Key, error) {
	return s.Lookup(kid, alg)
}

// Lookup returns the key that verifies a token with the given kid and alg.
// With a kid, it is the key of that kid that fits alg ([ErrUnknownKey] when
// no key has the kid, [ErrKeyMismatch] when none of them fits). Without a
// kid, it is the only key that fits alg ([ErrUnknownKey] for none,
// [ErrAmbiguousKey] for several).
func (s *KeySet) Lookup(kid, alg string) (Key, error) {
	if s == nil {
		return Key{}, ErrNoKeys
	}
	if kid != "" {
		cands, ok := s.byID[kid]
		if !ok {
			return Key{}, ErrUnknownKey
		}
		for _, k := range cands {
			if k.Fits(alg) {
				return k, nil
			}
		}
		return Key{}, ErrKeyMismatch
	}
	var found Key
	n := 0
	for _, k := range s.all {
		if k.Fits(alg) {
			found = k
			n++
		}
	}
	switch n {
	case 0:
		return Key{}, ErrUnknownKey
	case 1:
		return found, nil
	}
	return Key{}, ErrAmbiguousKey
}

// fitsAny reports whether some key of s fits one of algs.
func (s *KeySet) fitsAny(algs []string) bool {
	if s == nil {
		return false
	}
	for _, k := range s.all {
		for _, a := range algs {
			if k.Fits(a) {
				return true
			}
		}
	}
	return false
}

// CheckStatic returns the *setting.Error naming the first part of k whose
// keys are known now (a key set, a key file, an HMAC secret file) and of
// which no key fits any of algs: such a source could never verify a
// token. It cites the file's own setting, or, for a key set, the
// algorithms.
func CheckStatic(k Keys, algs []string) *setting.Error {
	var parts []Keys
	if m, ok := k.(multiKeys); ok {
		parts = m
	} else {
		parts = []Keys{k}
	}
	for _, p := range parts {
		switch s := p.(type) {
		case *KeySet:
			// A set not made yet has nothing to judge.
			if s != nil && !s.fitsAny(algs) {
				return setting.Errorf("algorithms", "key set has no key for the allowed algorithms %s", strings.Join(algs, ","))
			}
		case *KeyFile:
			if !s.keys.Load().fitsAny(algs) {
				return s.unfit(algs)
			}
		}
	}
	return nil
}

// Keys finds verification keys. Implementations are safe for concurrent
// use.
type Keys interface {
	// Key returns the key for a token with the given kid ("" when the token
	// has none) and alg, with the errors of [KeySet.Lookup] or [ErrNoKeys].
	Key(ctx context.Context, kid, alg string) (Key, error)
}

// generational is a key source that counts the changes of its key set:
// Generation returns a number that grows whenever a key is added, removed
// or replaced.
type generational interface {
	Generation() uint64
}

// Generation returns the generation function of a key source: a number
// that grows whenever a key is added, removed or replaced (the sum of its
// parts' for [Combine]); and false when some part does not count its
// changes (then nothing verified with it may be cached: a removed key
// could not be noticed).
func Generation(k Keys) (func() uint64, bool) {
	switch s := k.(type) {
	case multiKeys:
		gens := make([]func() uint64, 0, len(s))
		for _, part := range s {
			g, ok := Generation(part)
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

// Ready returns nil when every part of k that says whether it is ready is
// (a [JWKS] is not until a first fetch yielded a usable set), and
// otherwise the first such part's error.
func Ready(k Keys) error {
	if m, ok := k.(multiKeys); ok {
		for _, part := range m {
			if err := Ready(part); err != nil {
				return err
			}
		}
		return nil
	}
	if r, ok := k.(interface{ Ready() error }); ok {
		return r.Ready()
	}
	return nil
}
