package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
)

// Errors a key lookup returns. The Verifier maps them to failure reasons.
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
// secret), the curve must match for ECDSA, and a pinned alg must be alg.
func (k Key) Fits(alg string) bool {
	if k.Algorithm != "" && k.Algorithm != alg {
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
		return alg == "EdDSA"
	case []byte:
		return alg == "HS256" || alg == "HS384" || alg == "HS512"
	}
	return false
}

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

// Keys finds verification keys. It is what the [Verifier] consumes;
// implementations are safe for concurrent use.
type Keys interface {
	// Key returns the key for a token with the given kid ("" when the token
	// has none) and alg, with the errors of [KeySet.Lookup] or [ErrNoKeys].
	Key(ctx context.Context, kid, alg string) (Key, error)
}
