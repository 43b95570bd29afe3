package keys

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"slices"
	"testing"
)

// FuzzDecodeJWKS feeds any bytes to the JWKS decoder. It must never panic,
// and every key it returns must be one this service may verify signatures
// with, judged on the JWK's own members (exact, case-sensitive names, as
// RFC 7517 §4 has them): not symmetric, no non-empty private member, no use
// other than "sig", key_ops naming "verify" when present, RSA of at least
// 2048 bits with an odd exponent of 3 or more, ECDSA on its named curve,
// Ed25519 of 32 bytes, and a pinned alg that is an asymmetric JWS alg the
// key fits.
func FuzzDecodeJWKS(f *testing.F) {
	rsaJWK := jwkFromRSA(f, 2048)
	ecJWK, _ := jwkFromEC(f)
	edJWK := jwkFromEd25519(f)
	doc := func(keys ...any) []byte {
		b, err := json.Marshal(map[string]any{"keys": keys})
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	for _, seed := range [][]byte{
		doc(jwkWith(rsaJWK, "kid", "rsa", "alg", "RS256", "use", "sig"), jwkWith(ecJWK, "kid", "ec", "key_ops", []string{"verify"}), jwkWith(edJWK, "kid", "ed", "alg", "EdDSA")),
		doc(jwkWith(rsaJWK, "use", "enc"), jwkWith(ecJWK, "key_ops", []string{"encrypt"})),
		doc(jwkFromRSA(f, 1024)),
		doc(jwkWith(rsaJWK, "e", "AQ")),
		doc(jwkWith(rsaJWK, "alg", "HS256"), jwkWith(ecJWK, "alg", "ES384"), jwkWith(edJWK, "alg", "RSA-OAEP")),
		doc(map[string]any{"kty": "oct", "k": "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0", "alg": "HS256"}),
		doc(jwkWith(ecJWK, "d", "AAAA"), jwkWith(ecJWK, "y", ecJWK["x"])),
		doc(jwkWith(edJWK, "crv", "X25519")),
		doc(jwkWith(rsaJWK, "x5c", []string{"MIIB"}), jwkWith(ecJWK, "x5u", "http://127.0.0.1:1/x")),
		[]byte(`{"keys":[]}`), []byte(`{"keys":null}`), []byte(`{}`), []byte(`[]`), []byte(`{"keys":[{}]}`),
		[]byte(`{"keys":[1,"a",null,[]]}`), bytes.Replace(doc(jwkWith(ecJWK, "use", "enc")), []byte(`"use":"enc"`), []byte(`"use":"enc","USE":"sig"`), 1), []byte(`{"keys":[]} x`), []byte(``), []byte(`{"KEYS":[]}`),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, skipped, err := decodeJWKS(data)
		if err != nil {
			if keys != nil {
				t.Fatalf("decodeJWKS(%q) = %d keys with error %v; want none", data, len(keys), err)
			}
			return
		}
		if len(keys) == 0 {
			t.Fatalf("decodeJWKS(%q) = no keys and no error", data)
		}
		// The members of the set, read the way decodeJWKS finds them, to
		// pair each returned key with its JWK.
		var set struct {
			Keys []json.RawMessage `json:"keys"`
		}
		if err := json.Unmarshal(data, &set); err != nil {
			t.Fatalf("decodeJWKS(%q) accepted what encoding/json refuses: %v", data, err)
		}
		if len(keys)+len(skipped) != len(set.Keys) {
			t.Fatalf("decodeJWKS(%q): %d keys and %d skipped of %d members", data, len(keys), len(skipped), len(set.Keys))
		}
		skippedAt := map[int]bool{}
		for _, s := range skipped {
			skippedAt[s.Index] = true
		}
		j := 0
		for i, raw := range set.Keys {
			if skippedAt[i] {
				continue
			}
			if problem := unusableJWK(raw, keys[j]); problem != "" {
				t.Fatalf("decodeJWKS(%q) kept member %d %s as %T: %s", data, i, raw, keys[j].Public, problem)
			}
			j++
		}
	})
}

// unusableJWK says why k, decoded from the JWK raw, must not verify
// signatures, or returns "" when it may.
func unusableJWK(raw json.RawMessage, k Key) string {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return "not a JSON object"
	}
	if m["kty"] == "oct" {
		return "symmetric key"
	}
	for _, private := range []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"} {
		// An empty string carries no key material.
		if v, ok := m[private]; ok && v != "" {
			return "private member " + private
		}
	}
	if use, ok := m["use"]; ok && use != "sig" {
		return "use is not sig"
	}
	if ops, ok := m["key_ops"]; ok {
		list, _ := ops.([]any)
		if !slices.Contains(list, any("verify")) {
			return "key_ops without verify"
		}
	}
	switch pub := k.Public.(type) {
	case *rsa.PublicKey:
		if pub.N.BitLen() < minRSABits {
			return "RSA under 2048 bits"
		}
		if pub.E < 3 || pub.E%2 == 0 {
			return "RSA exponent"
		}
	case *ecdsa.PublicKey:
		if _, err := pub.ECDH(); err != nil {
			return "EC point not on its curve: " + err.Error()
		}
	case ed25519.PublicKey:
		if len(pub) != ed25519.PublicKeySize {
			return "Ed25519 key size"
		}
	default:
		return "not a signature public key"
	}
	if k.Algorithm != "" && (!asymmetricJWSAlg(k.Algorithm) || !k.Fits(k.Algorithm)) {
		return "alg does not fit the key"
	}
	return ""
}
