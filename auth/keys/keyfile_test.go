package keys_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/MicahParks/jwkset"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/keys"
)

// writeSrcFile writes content to a new file in a temporary directory and
// returns its path.
func writeSrcFile(t testing.TB, content []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// pemPublic returns the PEM PUBLIC KEY block of pub.
func pemPublic(t testing.TB, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatalf("MarshalPKIXPublicKey(%T): %v", pub, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// thumbKey returns a key for alg whose kid is its RFC 7638 thumbprint, as
// the kid of a PEM key is.
func thumbKey(t testing.TB, alg string) authtest.Key {
	t.Helper()
	k := authtest.NewKeyID(t, alg, "")
	kid, err := keys.Thumbprint(k.Verify.Public)
	if err != nil {
		t.Fatalf("Thumbprint: %v", err)
	}
	k.Verify.ID = kid
	return k
}

func TestLoadKeyFile(t *testing.T) {
	rs, es, ed := thumbKey(t, "RS256"), thumbKey(t, "ES256"), thumbKey(t, "EdDSA")
	pemAll := append(append(pemPublic(t, rs.Verify.Public), pemPublic(t, es.Verify.Public)...), pemPublic(t, ed.Verify.Public)...)
	jr, je := authtest.NewKeyID(t, "RS256", "jwks-rs"), authtest.NewKeyID(t, "ES384", "jwks-es")

	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(small)
	if err != nil {
		t.Fatal(err)
	}
	privPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER})
	oct := `{"keys":[{"kty":"oct","kid":"h","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA"}]}`
	enc := jr.JWK(t)
	enc.USE = jwkset.UseEnc

	tests := []struct {
		name    string
		content []byte
		want    []authtest.Key // keys whose tokens must verify
		wantErr string         // substring of the error besides the path
	}{
		{name: "JWKS", content: authtest.JWKS(t, jr, je), want: []authtest.Key{jr, je}},
		{name: "PEM RSA EC Ed25519", content: pemAll, want: []authtest.Key{rs, es, ed}},
		{name: "PEM with text around the blocks", content: []byte("# issued by the IdP\n" + string(pemPublic(t, es.Verify.Public)) + "\n\n"), want: []authtest.Key{es}},
		{name: "garbage", content: []byte("this-is-no-key c2VjcmV0"), wantErr: "neither a JWKS document nor PEM"},
		{name: "empty", content: []byte("\n"), wantErr: "empty"},
		{name: "private key PEM", content: privPEM, wantErr: `"PRIVATE KEY", want "PUBLIC KEY"`},
		{name: "RSA 1024 PEM", content: pemPublic(t, &small.PublicKey), wantErr: "1024 bits"},
		{name: "PEM then garbage", content: append(pemPublic(t, es.Verify.Public), "c2VjcmV0"...), wantErr: "not PEM"},
		{name: "broken PEM", content: []byte("-----BEGIN PUBLIC KEY-----\nc2VjcmV0\n-----END PUBLIC KEY-----\n"), wantErr: "not a valid PKIX public key"},
		{name: "JWKS with a symmetric key", content: []byte(oct), wantErr: "symmetric"},
		{name: "JWKS with encryption keys only", content: mustJSON(t, jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{enc}}), wantErr: "no usable key"},
		{name: "JWKS not valid", content: []byte(`{"keys":[c2VjcmV0]}`), wantErr: "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeSrcFile(t, tt.content)
			f, err := keys.LoadKeyFile(path, nil)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("LoadKeyFile(%s) error = nil, want %q", tt.name, tt.wantErr)
				}
				msg := err.Error()
				if !strings.Contains(msg, path) || !strings.Contains(msg, tt.wantErr) {
					t.Errorf("LoadKeyFile(%s) error = %q, want one naming %s and %q", tt.name, msg, path, tt.wantErr)
				}
				if strings.Contains(msg, "c2VjcmV0") || strings.Contains(msg, "MII") {
					t.Errorf("LoadKeyFile(%s) error = %q quotes the file's content", tt.name, msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadKeyFile(%s) error = %v, want nil", tt.name, err)
			}
			for _, k := range tt.want {
				if err := srcVerify(t, f, authtest.Token(t, k, nil, authtest.Claims(nil))); err != nil {
					t.Errorf("verify %s token with kid %q: %v", k.Alg, k.Verify.ID, err)
				}
			}
			if _, err := f.Key(t.Context(), "unknown", "ES256"); !errors.Is(err, keys.ErrUnknownKey) {
				t.Errorf("Key(unknown) error = %v, want %v", err, keys.ErrUnknownKey)
			}
		})
	}

	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "absent.pem")
		if _, err := keys.LoadKeyFile(path, nil); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("LoadKeyFile(%s) error = %v, want one naming the file", path, err)
		}
	})
}

func TestKeyFileReload(t *testing.T) {
	a, b := thumbKey(t, "ES256"), thumbKey(t, "EdDSA")
	path := writeSrcFile(t, pemPublic(t, a.Verify.Public))
	reg := prometheus.NewRegistry()
	f, err := keys.LoadKeyFile(path, auth.NewMetrics(reg))
	if err != nil {
		t.Fatalf("LoadKeyFile: %v", err)
	}
	if got := srcMetric(t, reg, "plantstore_jwks_keys", ""); got != 1 {
		t.Errorf("plantstore_jwks_keys after load = %v, want 1", got)
	}

	both := append(pemPublic(t, a.Verify.Public), pemPublic(t, b.Verify.Public)...)
	if err := os.WriteFile(path, both, 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := f.Reload(); err != nil || !changed {
		t.Fatalf("Reload with two good keys = %v, %v; want true, nil", changed, err)
	}
	if err := srcVerify(t, f, authtest.Token(t, b, nil, authtest.Claims(nil))); err != nil {
		t.Errorf("verify token of the added key after Reload: %v", err)
	}
	if got := srcMetric(t, reg, "plantstore_jwks_keys", ""); got != 2 {
		t.Errorf("plantstore_jwks_keys after reload = %v, want 2", got)
	}

	for _, bad := range [][]byte{[]byte("garbage"), []byte(`{"keys":[]}`), nil} {
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := f.Reload()
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("Reload with %q error = %v, want one naming %s", bad, err, path)
		}
		for _, k := range []authtest.Key{a, b} {
			if err := srcVerify(t, f, authtest.Token(t, k, nil, authtest.Claims(nil))); err != nil {
				t.Errorf("verify token after a bad Reload (%q): %v; want the old keys kept", bad, err)
			}
		}
	}
	if got := srcMetric(t, reg, "plantstore_jwks_keys", ""); got != 2 {
		t.Errorf("plantstore_jwks_keys after bad reloads = %v, want 2", got)
	}

	if err := os.WriteFile(path, pemPublic(t, b.Verify.Public), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := f.Reload(); err != nil || !changed {
		t.Fatalf("Reload with one good key = %v, %v; want true, nil", changed, err)
	}
	if changed, err := f.Reload(); err != nil || changed {
		t.Errorf("Reload of the same bytes = %v, %v; want false, nil", changed, err)
	}
	if got := srcMetric(t, reg, "plantstore_key_file_reloads_total", "success"); got != 2 {
		t.Errorf("plantstore_key_file_reloads_total{result=success} = %v, want 2 (the same bytes are no reload)", got)
	}
	if got := srcMetric(t, reg, "plantstore_key_file_reloads_total", "failure"); got != 3 {
		t.Errorf("plantstore_key_file_reloads_total{result=failure} = %v, want 3", got)
	}
	if _, err := f.Key(t.Context(), a.Verify.ID, "ES256"); !errors.Is(err, keys.ErrUnknownKey) {
		t.Errorf("Key(removed kid) after Reload error = %v, want %v", err, keys.ErrUnknownKey)
	}
	if got := srcMetric(t, reg, "plantstore_jwks_keys", ""); got != 1 {
		t.Errorf("plantstore_jwks_keys after removing a key = %v, want 1", got)
	}
}
