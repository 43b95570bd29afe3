package keys_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"testing"

	"github.com/plantstore/plantstore/auth/keys"
)

func TestKeyFits(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	secret := []byte("0123456789abcdef0123456789abcdef")
	tests := []struct {
		name string
		key  keys.Key
		alg  string
		want bool
	}{
		{"RSA RS256", keys.Key{Public: &rsaKey.PublicKey}, "RS256", true},
		{"RSA PS512", keys.Key{Public: &rsaKey.PublicKey}, "PS512", true},
		{"RSA pinned other alg", keys.Key{Public: &rsaKey.PublicKey, Algorithm: "RS384"}, "RS256", false},
		{"RSA as HMAC", keys.Key{Public: &rsaKey.PublicKey}, "HS256", false},
		{"RSA encryption alg", keys.Key{Public: &rsaKey.PublicKey}, "RSA-OAEP", false},
		{"RSA made-up alg", keys.Key{Public: &rsaKey.PublicKey}, "RS1", false},
		{"P-256 ES256", keys.Key{Public: &p256.PublicKey}, "ES256", true},
		{"P-256 ES384", keys.Key{Public: &p256.PublicKey}, "ES384", false},
		{"P-384 ES384", keys.Key{Public: &p384.PublicKey}, "ES384", true},
		{"EC as HMAC", keys.Key{Public: &p256.PublicKey}, "HS256", false},
		{"Ed25519 EdDSA", keys.Key{Public: edPub}, "EdDSA", true},
		{"Ed25519 ES256", keys.Key{Public: edPub}, "ES256", false},
		{"secret HS512", keys.Key{Public: secret}, "HS512", true},
		{"empty secret HS256", keys.Key{Public: []byte{}}, "HS256", false},
		{"secret made-up alg", keys.Key{Public: secret}, "HS1", false},
		{"secret RS256", keys.Key{Public: secret}, "RS256", false},
		{"none", keys.Key{Public: secret}, "none", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.key.Fits(tt.alg); got != tt.want {
				t.Errorf("Key{%T, alg %q}.Fits(%q) = %v, want %v", tt.key.Public, tt.key.Algorithm, tt.alg, got, tt.want)
			}
		})
	}
}
