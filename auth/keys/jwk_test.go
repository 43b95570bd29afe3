package keys

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"math/big"
	"slices"
	"strings"
	"testing"
)

func jwkB64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func jwkFromRSA(t testing.TB, bits int) map[string]any {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatalf("rsa.GenerateKey(%d): %v", bits, err)
	}
	return map[string]any{"kty": "RSA", "n": jwkB64(k.N.Bytes()), "e": jwkB64(big.NewInt(int64(k.E)).Bytes())}
}

func jwkFromEC(t testing.TB) (map[string]any, *ecdsa.PrivateKey) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("ecdsa.GenerateKey: %v", err)
	}
	raw, err := k.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"kty": "EC", "crv": "P-256", "x": jwkB64(raw[1:33]), "y": jwkB64(raw[33:])}, k
}

func jwkFromEd25519(t testing.TB) map[string]any {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("ed25519.GenerateKey: %v", err)
	}
	return map[string]any{"kty": "OKP", "crv": "Ed25519", "x": jwkB64(pub)}
}

// jwkWith returns a copy of m with the members of kv set ("name", value,
// ...); a nil value removes a member.
func jwkWith(m map[string]any, kv ...any) map[string]any {
	c := maps.Clone(m)
	for i := 0; i < len(kv); i += 2 {
		name := kv[i].(string)
		if kv[i+1] == nil {
			delete(c, name)
			continue
		}
		c[name] = kv[i+1]
	}
	return c
}

func TestDecodeJWKS(t *testing.T) {
	rsaJWK := jwkFromRSA(t, 2048)
	smallRSA := jwkFromRSA(t, 1024)
	ecJWK, ecPriv := jwkFromEC(t)
	ecD, err := ecPriv.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	edJWK := jwkFromEd25519(t)
	x, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	x25519 := map[string]any{"kty": "OKP", "crv": "X25519", "x": jwkB64(x.PublicKey().Bytes())}
	offCurve := jwkWith(ecJWK, "kid", "off", "y", jwkWith(ecJWK)["x"])
	ec := jwkWith(ecJWK, "kid", "ec")

	doc := func(keys ...any) string {
		b, err := json.Marshal(map[string]any{"keys": keys})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tests := []struct {
		name     string
		doc      string
		wantKIDs []string // kept keys, in order
		wantAlg  map[string]string
		wantSkip []string // "kid:warn" or "kid:info", in order
		wantErr  string   // substring of the error; "" for none
	}{
		{
			name:     "signature keys of every type kept with their alg",
			doc:      doc(jwkWith(rsaJWK, "kid", "rsa", "alg", "RS256", "use", "sig"), ec, jwkWith(edJWK, "kid", "ed", "alg", "EdDSA")),
			wantKIDs: []string{"rsa", "ec", "ed"},
			wantAlg:  map[string]string{"rsa": "RS256", "ec": "", "ed": "EdDSA"},
		},
		{
			// RFC 9864's fully specified name for EdDSA over Ed25519, which
			// DPoP clients may put in a proof's jwk.
			name:     "Ed25519 is EdDSA",
			doc:      doc(jwkWith(edJWK, "kid", "ed", "alg", "Ed25519")),
			wantKIDs: []string{"ed"},
			wantAlg:  map[string]string{"ed": "Ed25519"},
		},
		{
			name:     "key without kid kept",
			doc:      doc(rsaJWK),
			wantKIDs: []string{""},
		},
		{
			name:     "use enc skipped quietly",
			doc:      doc(jwkWith(rsaJWK, "kid", "enc", "use", "enc"), ec),
			wantKIDs: []string{"ec"},
			wantSkip: []string{"enc:info"},
		},
		{
			name:     "key_ops without verify skipped",
			doc:      doc(jwkWith(rsaJWK, "kid", "wrap", "key_ops", []string{"encrypt", "wrapKey"}), jwkWith(ecJWK, "kid", "ops", "key_ops", []string{"sign", "verify"})),
			wantKIDs: []string{"ops"},
			wantSkip: []string{"wrap:info"},
		},
		{
			name:     "RSA under 2048 bits refused",
			doc:      doc(jwkWith(smallRSA, "kid", "small"), ec),
			wantKIDs: []string{"ec"},
			wantSkip: []string{"small:warn"},
		},
		{
			name:     "symmetric key skipped",
			doc:      doc(map[string]any{"kty": "oct", "kid": "hmac", "k": jwkB64([]byte("0123456789abcdef0123456789abcdef"))}, ec),
			wantKIDs: []string{"ec"},
			wantSkip: []string{"hmac:warn"},
		},
		{
			name:     "private key material skipped",
			doc:      doc(jwkWith(ecJWK, "kid", "priv", "d", jwkB64(ecD)), ec),
			wantKIDs: []string{"ec"},
			wantSkip: []string{"priv:warn"},
		},
		{
			name:     "X25519 cannot verify",
			doc:      doc(jwkWith(x25519, "kid", "x"), ec),
			wantKIDs: []string{"ec"},
			wantSkip: []string{"x:warn"},
		},
		{
			name:     "alg of another family skipped",
			doc:      doc(jwkWith(rsaJWK, "kid", "es-on-rsa", "alg", "ES256"), jwkWith(rsaJWK, "kid", "oaep", "alg", "RSA-OAEP"), ec),
			wantKIDs: []string{"ec"},
			wantSkip: []string{"es-on-rsa:warn", "oaep:warn"},
		},
		{
			name:     "point off the curve skipped",
			doc:      doc(offCurve, ec),
			wantKIDs: []string{"ec"},
			wantSkip: []string{"off:warn"},
		},
		{
			name:     "unknown kty and curve skipped",
			doc:      doc(map[string]any{"kty": "ML-DSA", "kid": "pq"}, jwkWith(ecJWK, "kid", "p192", "crv", "P-192"), ec),
			wantKIDs: []string{"ec"},
			wantSkip: []string{"pq:warn", "p192:warn"},
		},
		{
			name:     "member that is not a JWK skipped",
			doc:      doc(1, jwkWith(rsaJWK, "kid", "badn", "n", 12345), ec),
			wantKIDs: []string{"ec"},
			wantSkip: []string{":warn", ":warn"},
		},
		{
			name:     "x5u never fetched",
			doc:      doc(jwkWith(ecJWK, "kid", "x5u", "x5u", "http://127.0.0.1:1/never")),
			wantKIDs: []string{"x5u"},
		},
		{name: "not JSON", doc: "<html>", wantErr: "not valid JSON"},
		{name: "truncated", doc: `{"keys":[{"kty":"oct","k":"c2VjcmV0`, wantErr: "not valid JSON"},
		{name: "data after the document", doc: doc(ec) + "x", wantErr: "data after"},
		{name: "no keys member", doc: `{"issuer":"x"}`, wantErr: `no "keys" array`},
		{name: "keys not an array", doc: `{"keys":"x"}`, wantErr: `member "keys" has the wrong type`},
		{name: "keys null", doc: `{"keys":null}`, wantErr: `no "keys" array`},
		{name: "empty set", doc: `{"keys":[]}`, wantErr: "no usable key"},
		{name: "only skipped keys", doc: doc(jwkWith(rsaJWK, "kid", "enc", "use", "enc")), wantSkip: []string{"enc:info"}, wantErr: "no usable key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, skipped, err := decodeJWKS([]byte(tt.doc))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("decodeJWKS(%.60q) error = %v, want one containing %q", tt.doc, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "c2VjcmV0") {
					t.Errorf("decodeJWKS(%.60q) error %q quotes the document", tt.doc, err)
				}
			} else if err != nil {
				t.Fatalf("decodeJWKS(%.60q) error = %v, want nil", tt.doc, err)
			}
			var gotKIDs []string
			for _, k := range keys {
				gotKIDs = append(gotKIDs, k.ID)
				if want, ok := tt.wantAlg[k.ID]; ok && k.Algorithm != want {
					t.Errorf("key %q Algorithm = %q, want %q", k.ID, k.Algorithm, want)
				}
			}
			if !slices.Equal(gotKIDs, tt.wantKIDs) {
				t.Errorf("decodeJWKS(%.60q) kept kids %q, want %q", tt.doc, gotKIDs, tt.wantKIDs)
			}
			var gotSkip []string
			for _, s := range skipped {
				level := "info"
				if s.Warn {
					level = "warn"
				}
				gotSkip = append(gotSkip, s.KID+":"+level)
				if s.Reason == "" {
					t.Errorf("skipped key %d has no reason", s.Index)
				}
			}
			if !slices.Equal(gotSkip, tt.wantSkip) {
				t.Errorf("decodeJWKS(%.60q) skipped %q, want %q (%v)", tt.doc, gotSkip, tt.wantSkip, skipped)
			}
		})
	}
}

func TestDecodeJWKSSmallRSAReason(t *testing.T) {
	doc, err := json.Marshal(map[string]any{"keys": []any{jwkWith(jwkFromRSA(t, 1024), "kid", "small")}})
	if err != nil {
		t.Fatal(err)
	}
	_, skipped, err := decodeJWKS(doc)
	if !errors.Is(err, errNoUsableKey) {
		t.Errorf("decodeJWKS(1024-bit RSA) error = %v, want %v", err, errNoUsableKey)
	}
	if len(skipped) != 1 || !strings.Contains(skipped[0].Reason, "1024 bits") {
		t.Errorf("decodeJWKS(1024-bit RSA) skipped %v, want one naming 1024 bits", skipped)
	}
}

func TestReadLimited(t *testing.T) {
	tests := []struct {
		n, max  int64
		wantErr bool
	}{
		{n: 0, max: 10},
		{n: 10, max: 10},
		{n: 11, max: 10, wantErr: true},
		{n: defaultMaxBytes, max: 0},
		{n: defaultMaxBytes + 1, max: 0, wantErr: true},
	}
	for _, tt := range tests {
		b, err := readLimited(strings.NewReader(strings.Repeat("a", int(tt.n))), tt.max)
		if tt.wantErr {
			if !errors.Is(err, errTooLarge) {
				t.Errorf("readLimited(%d bytes, %d) error = %v, want %v", tt.n, tt.max, err, errTooLarge)
			}
			continue
		}
		if err != nil || int64(len(b)) != tt.n {
			t.Errorf("readLimited(%d bytes, %d) = %d bytes, %v; want %d bytes, nil", tt.n, tt.max, len(b), err, tt.n)
		}
	}
}
