package mint_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/jws"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/auth/mint"
)

// decodeSegment returns the JSON object in segment i of token.
func decodeSegment(t testing.TB, token string, i int) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts; want 3", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[i])
	if err != nil {
		t.Fatalf("segment %d: %v", i, err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("segment %d: %v", i, err)
	}
	return m
}

func TestMintVerify(t *testing.T) {
	for _, alg := range []string{"RS256", "PS384", "ES256", "ES384", "EdDSA", "HS256", "HS512"} {
		t.Run(alg, func(t *testing.T) {
			k := authtest.NewKey(t, alg)
			vk := k.Verify
			if strings.HasPrefix(alg, "HS") {
				// A secret has no thumbprint: the token has no kid.
				vk.ID = ""
			}
			v := newVerifier(t, auth.Config{
				Issuer:        "https://idp.example.com",
				Audiences:     []string{"plantstore"},
				Algorithms:    []string{alg},
				RequiredScope: "plants:read",
			}, keys.NewKeySet([]keys.Key{vk}))

			token, err := mint.Mint(k.Private, alg, mint.Claims{
				Subject:  "alice",
				Issuer:   "https://idp.example.com",
				Audience: []string{"plantstore"},
				Groups:   []string{"gardeners", "staff"},
				Scope:    "openid plants:read",
				TTL:      time.Minute,
			})
			if err != nil {
				t.Fatalf("Mint(%s): %v", alg, err)
			}
			id, err := authenticate(t, v, token)
			if err != nil {
				t.Fatalf("Verify(Mint(%s)): %v", alg, err)
			}
			want := auth.Identity{Subject: "alice", Groups: []string{"gardeners", "staff"}, Scopes: []string{"openid", "plants:read"}}
			if !reflect.DeepEqual(*id, want) {
				t.Errorf("Verify(Mint(%s)) = %+v; want %+v", alg, id, want)
			}

			h := decodeSegment(t, token, 0)
			if h["alg"] != alg || h["kid"] != nilIfEmpty(vk.ID) {
				t.Errorf("Mint(%s) header = %v; want alg %s, kid %q", alg, h, alg, vk.ID)
			}
		})
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func TestMintClaims(t *testing.T) {
	k := authtest.NewKey(t, "EdDSA")
	now := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name       string
		in         mint.Claims
		wantHeader map[string]any
		want       map[string]any
	}{
		{
			name:       "minimal",
			in:         mint.Claims{Subject: "alice", TTL: time.Hour, Now: now},
			wantHeader: map[string]any{"alg": "EdDSA", "typ": "at+jwt", "kid": k.Verify.ID},
			want:       map[string]any{"sub": "alice", "iat": 1_800_000_000.0, "exp": 1_800_003_600.0},
		},
		{
			name: "everything, one audience",
			in: mint.Claims{
				Subject: "bob", Issuer: "https://idp", Audience: []string{"plantstore"},
				Groups: []string{"g1"}, Scope: "a b", TTL: 90 * time.Second, KeyID: "k1", Now: now,
			},
			wantHeader: map[string]any{"alg": "EdDSA", "typ": "at+jwt", "kid": "k1"},
			want: map[string]any{
				"sub": "bob", "iss": "https://idp", "aud": "plantstore", "groups": []any{"g1"},
				"scope": "a b", "iat": 1_800_000_000.0, "exp": 1_800_000_090.0,
			},
		},
		{
			name:       "a JWT of a client",
			in:         mint.Claims{Subject: "dave", TTL: time.Second, Now: now, Type: "JWT", ClientID: "plants-web"},
			wantHeader: map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": k.Verify.ID},
			want:       map[string]any{"sub": "dave", "client_id": "plants-web", "iat": 1_800_000_000.0, "exp": 1_800_000_001.0},
		},
		{
			name:       "two audiences",
			in:         mint.Claims{Subject: "carol", Audience: []string{"a", "b"}, TTL: time.Second, Now: now},
			wantHeader: map[string]any{"alg": "EdDSA", "typ": "at+jwt", "kid": k.Verify.ID},
			want:       map[string]any{"sub": "carol", "aud": []any{"a", "b"}, "iat": 1_800_000_000.0, "exp": 1_800_000_001.0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token, err := mint.Mint(k.Private, "EdDSA", tt.in)
			if err != nil {
				t.Fatalf("Mint(%+v): %v", tt.in, err)
			}
			if got := decodeSegment(t, token, 0); !reflect.DeepEqual(got, tt.wantHeader) {
				t.Errorf("Mint(%+v) header = %v; want %v", tt.in, got, tt.wantHeader)
			}
			if got := decodeSegment(t, token, 1); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Mint(%+v) claims = %v; want %v", tt.in, got, tt.want)
			}
		})
	}

	t.Run("zero Now is the current time", func(t *testing.T) {
		before := time.Now().Unix()
		token, err := mint.Mint(k.Private, "EdDSA", mint.Claims{Subject: "alice", TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		iat, _ := decodeSegment(t, token, 1)["iat"].(float64)
		if int64(iat) < before || int64(iat) > time.Now().Unix() {
			t.Errorf("Mint with zero Now: iat = %v; want between %d and now", iat, before)
		}
	})
}

func TestMintErrors(t *testing.T) {
	rsaKey := authtest.NewKey(t, "RS256").Private
	p256 := authtest.NewKey(t, "ES256").Private
	edKey := authtest.NewKey(t, "EdDSA").Private
	secret := authtest.NewKey(t, "HS256").Private
	ok := mint.Claims{Subject: "alice", TTL: time.Minute}

	tests := []struct {
		name    string
		key     crypto.PrivateKey
		alg     string
		c       mint.Claims
		wantErr bool
	}{
		{name: "RSA with PS256", key: rsaKey, alg: "PS256", c: ok},
		{name: "pointer to Ed25519 key", key: ptr(edKey.(ed25519.PrivateKey)), alg: "EdDSA", c: ok},
		{name: "RSA with ES256", key: rsaKey, alg: "ES256", c: ok, wantErr: true},
		{name: "RSA with HS256", key: rsaKey, alg: "HS256", c: ok, wantErr: true},
		{name: "P-256 with ES384", key: p256, alg: "ES384", c: ok, wantErr: true},
		{name: "Ed25519 with RS256", key: edKey, alg: "RS256", c: ok, wantErr: true},
		{name: "secret with RS256", key: secret, alg: "RS256", c: ok, wantErr: true},
		{name: "secret with none", key: secret, alg: "none", c: ok, wantErr: true},
		{name: "empty secret", key: []byte{}, alg: "HS256", c: ok, wantErr: true},
		{name: "unknown alg", key: secret, alg: "HS1024", c: ok, wantErr: true},
		{name: "public key", key: &rsaKey.(*rsa.PrivateKey).PublicKey, alg: "RS256", c: ok, wantErr: true},
		{name: "string key", key: "secret", alg: "HS256", c: ok, wantErr: true},
		{name: "zero TTL", key: edKey, alg: "EdDSA", c: mint.Claims{Subject: "alice"}, wantErr: true},
		{name: "zero TTL", key: edKey, alg: "EdDSA", c: mint.Claims{Subject: "alice"}, wantErr: true},
		{name: "groups claim with an empty path element", key: edKey, alg: "EdDSA", c: mint.Claims{Subject: "alice", TTL: time.Minute, Groups: []string{"g"}, GroupsClaim: "a..b"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token, err := mint.Mint(tt.key, tt.alg, tt.c)
			if (err != nil) != tt.wantErr {
				t.Errorf("Mint(%T, %q, %+v) = %.20q, %v; want error %t", tt.key, tt.alg, tt.c, token, err, tt.wantErr)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestGenerateKey(t *testing.T) {
	tests := []struct {
		alg     string
		wantErr bool
	}{
		{alg: "RS256"},
		{alg: "ES256"},
		{alg: "EdDSA"},
		{alg: "HS256", wantErr: true},
		{alg: "ES384", wantErr: true},
		{alg: "none", wantErr: true},
		{alg: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.alg, func(t *testing.T) {
			priv, jwks, err := mint.GenerateKey(tt.alg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("GenerateKey(%q) error = %v; want error %t", tt.alg, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			switch k := priv.(type) {
			case *rsa.PrivateKey:
				if tt.alg != "RS256" || k.N.BitLen() != 2048 {
					t.Errorf("GenerateKey(%q) = RSA %d bits; want RS256 with 2048", tt.alg, k.N.BitLen())
				}
			case *ecdsa.PrivateKey:
				if tt.alg != "ES256" || k.Curve != elliptic.P256() {
					t.Errorf("GenerateKey(%q) = ECDSA %s", tt.alg, k.Curve.Params().Name)
				}
			case ed25519.PrivateKey:
				if tt.alg != "EdDSA" {
					t.Errorf("GenerateKey(%q) = Ed25519", tt.alg)
				}
			default:
				t.Fatalf("GenerateKey(%q) = %T", tt.alg, priv)
			}

			var set jwkset.JWKSMarshal
			if err := json.Unmarshal(jwks, &set); err != nil {
				t.Fatalf("GenerateKey(%q) JWKS %s: %v", tt.alg, jwks, err)
			}
			if len(set.Keys) != 1 {
				t.Fatalf("GenerateKey(%q) JWKS has %d keys; want 1", tt.alg, len(set.Keys))
			}
			jwk, err := jwkset.NewJWKFromMarshal(set.Keys[0], jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
			if err != nil {
				t.Fatalf("GenerateKey(%q) JWK: %v", tt.alg, err)
			}
			m := jwk.Marshal()
			if m.D != "" || m.P != "" || m.K != "" || strings.Contains(string(jwks), `"d"`) {
				t.Errorf("GenerateKey(%q) JWKS %s holds private material", tt.alg, jwks)
			}
			kid, err := keys.Thumbprint(priv.Public())
			if err != nil {
				t.Fatal(err)
			}
			if m.KID != kid || string(m.ALG) != tt.alg || m.USE != jwkset.UseSig {
				t.Errorf("GenerateKey(%q) JWK kid, alg, use = %q, %q, %q; want %q, %q, sig", tt.alg, m.KID, m.ALG, m.USE, kid, tt.alg)
			}
			if pub, ok := jwk.Key().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(priv.Public()) {
				t.Errorf("GenerateKey(%q) JWKS key %T does not equal the private key's public half", tt.alg, jwk.Key())
			}

			// A token minted with the key verifies against the published set.
			v := newVerifier(t, auth.Config{}, keys.NewKeySet([]keys.Key{{ID: m.KID, Algorithm: string(m.ALG), Public: jwk.Key()}}))
			token, err := mint.Mint(priv, tt.alg, mint.Claims{Subject: "alice", TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := authenticate(t, v, token); err != nil {
				t.Errorf("Verify(Mint(GenerateKey(%q))) = %v", tt.alg, err)
			}
		})
	}
}

func TestPrivateKeyPEMRoundTrip(t *testing.T) {
	tests := []struct {
		alg     string
		wantErr bool
	}{
		{alg: "RS256"}, {alg: "ES256"}, {alg: "ES384"}, {alg: "EdDSA"},
		{alg: "HS256", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.alg, func(t *testing.T) {
			k := authtest.NewKey(t, tt.alg)
			data, err := mint.MarshalPrivateKey(k.Private)
			if (err != nil) != tt.wantErr {
				t.Fatalf("MarshalPrivateKey(%s key) error = %v; want error %t", tt.alg, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if !strings.HasPrefix(string(data), "-----BEGIN PRIVATE KEY-----\n") {
				t.Errorf("MarshalPrivateKey(%s key) = %.40q; want a PRIVATE KEY PEM block", tt.alg, data)
			}
			got, err := mint.ParsePrivateKey(data)
			if err != nil {
				t.Fatalf("ParsePrivateKey(MarshalPrivateKey(%s key)): %v", tt.alg, err)
			}
			if eq, ok := got.(interface{ Equal(crypto.PrivateKey) bool }); !ok || !eq.Equal(k.Private) {
				t.Errorf("ParsePrivateKey(MarshalPrivateKey(%s key)) = %T, not the same key", tt.alg, got)
			}
		})
	}
}

func TestParsePrivateKey(t *testing.T) {
	rsaKey := authtest.NewKey(t, "RS256")
	ecKey := authtest.NewKey(t, "ES256")
	edKey := authtest.NewKey(t, "EdDSA")
	hmacKey := authtest.NewKey(t, "HS256")

	privateJWK := func(key any) []byte {
		j, err := jwkset.NewJWKFromKey(key, jwkset.JWKOptions{Marshal: jwkset.JWKMarshalOptions{Private: true}})
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(j.Marshal())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	publicJWK := func(key any) []byte {
		j, err := jwkset.NewJWKFromKey(key, jwkset.JWKOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(j.Marshal())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pemBlock := func(typ string, der []byte) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	}
	sec1, err := x509.MarshalECPrivateKey(ecKey.Private.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	pkix, err := x509.MarshalPKIXPublicKey(rsaKey.Verify.Public)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := mint.MarshalPrivateKey(edKey.Private)
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 64)
	if _, err := rand.Read(junk); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		data    []byte
		want    crypto.PrivateKey
		wantErr string
	}{
		{name: "RSA JWK", data: privateJWK(rsaKey.Private), want: rsaKey.Private},
		{name: "EC JWK", data: privateJWK(ecKey.Private), want: ecKey.Private},
		{name: "Ed25519 JWK", data: privateJWK(edKey.Private), want: edKey.Private},
		{name: "oct JWK", data: privateJWK(hmacKey.Private), want: hmacKey.Private},
		{name: "JWK with surrounding space", data: []byte("\n  " + string(privateJWK(edKey.Private)) + "\n"), want: edKey.Private},
		{name: "PKCS#1 PEM", data: pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey.Private.(*rsa.PrivateKey))), want: rsaKey.Private},
		{name: "SEC 1 PEM", data: pemBlock("EC PRIVATE KEY", sec1), want: ecKey.Private},
		{name: "PKCS#8 after EC PARAMETERS", data: append(pemBlock("EC PARAMETERS", []byte{6, 8, 42, 134, 72, 206, 61, 3, 1, 7}), pkcs8...), want: edKey.Private},
		{name: "garbage", data: []byte("hello, world"), wantErr: "no PEM private key block or JWK"},
		{name: "empty", data: nil, wantErr: "no PEM private key block or JWK"},
		{name: "random bytes", data: junk, wantErr: "no PEM private key block or JWK"},
		{name: "public key PEM", data: pemBlock("PUBLIC KEY", pkix), wantErr: "PEM PUBLIC KEY: " + mint.ErrPublicKey.Error()},
		{name: "certificate PEM", data: pemBlock("CERTIFICATE", []byte("DER")), wantErr: "PEM CERTIFICATE: " + mint.ErrPublicKey.Error()},
		{name: "JWK Set", data: []byte(`{"keys":[` + string(publicJWK(rsaKey.Verify.Public)) + `]}`), wantErr: "a JWK Set: " + mint.ErrPublicKey.Error()},
		{name: "corrupt PKCS#8", data: pemBlock("PRIVATE KEY", []byte("not DER")), wantErr: "PRIVATE KEY block"},
		{name: "public JWK", data: publicJWK(rsaKey.Verify.Public), wantErr: "a public JWK: " + mint.ErrPublicKey.Error()},
		{name: "broken JSON", data: []byte(`{"kty":`), wantErr: "JWK"},
		{name: "JWK of unknown kty", data: []byte(`{"kty":"XYZ","d":"AA"}`), wantErr: "JWK"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mint.ParsePrivateKey(tt.data)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "parse private key: ") {
					t.Errorf("ParsePrivateKey(%.30q) = %T, %v; want an error containing %q", tt.data, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePrivateKey(%.30q): %v", tt.data, err)
			}
			if b, ok := tt.want.([]byte); ok {
				if g, _ := got.([]byte); !slices.Equal(g, b) {
					t.Errorf("ParsePrivateKey(%.30q) = %T; want the HMAC secret", tt.data, got)
				}
				return
			}
			if eq, ok := got.(interface{ Equal(crypto.PrivateKey) bool }); !ok || !eq.Equal(tt.want) {
				t.Errorf("ParsePrivateKey(%.30q) = %T, not the key", tt.data, got)
			}
		})
	}
}

func TestMintDefaultAlgorithm(t *testing.T) {
	tests := []struct {
		name string
		key  crypto.PrivateKey
		want string
	}{
		{"RSA", mustGenerate(t, "RS256"), "RS256"},
		{"P-256", mustGenerate(t, "ES256"), "ES256"},
		{"P-384", mustECDSA(t, elliptic.P384()), "ES384"},
		{"Ed25519", mustGenerate(t, "EdDSA"), "EdDSA"},
		{"HMAC", []byte(strings.Repeat("s", 32)), "HS256"},
		{"unsupported", "not a key", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mint.DefaultAlgorithm(tt.key); got != tt.want {
				t.Fatalf("DefaultAlgorithm(%T) = %q, want %q", tt.key, got, tt.want)
			}
			token, err := mint.Mint(tt.key, "", mint.Claims{Subject: "x", TTL: time.Minute})
			if tt.want == "" {
				if err == nil {
					t.Fatalf("Mint(%T, \"\") succeeded, want an error", tt.key)
				}
				return
			}
			if err != nil {
				t.Fatalf("Mint(%T, \"\") = %v", tt.key, err)
			}
			if got := decodeSegment(t, token, 0)["alg"]; got != tt.want {
				t.Errorf("Mint(%T, \"\") header alg = %v, want %s", tt.key, got, tt.want)
			}
		})
	}
}

func mustGenerate(t testing.TB, alg string) crypto.PrivateKey {
	t.Helper()
	k, _, err := mint.GenerateKey(alg)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustECDSA(t testing.TB, c elliptic.Curve) crypto.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newVerifier returns a Verifier of one unnamed issuer with cfg, whose
// tokens are signed with the keys ks finds.
func newVerifier(t testing.TB, cfg auth.Config, ks keys.Keys) *auth.Verifier {
	t.Helper()
	v, err := auth.NewVerifier(auth.Options{}, auth.Issuer{Config: cfg, JWS: jws.New(ks)})
	if err != nil {
		t.Fatalf("NewVerifier(%+v): %v", cfg, err)
	}
	return v
}

// authenticate has v authenticate token, sent as a bearer token.
func authenticate(t testing.TB, v *auth.Verifier, token string) (*auth.Identity, error) {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/plants", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	return v.Authenticate(r)
}
