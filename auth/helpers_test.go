package auth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/auth"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	os.Exit(m.Run())
}

// testKey is a signing key and the verification key that matches it.
type testKey struct {
	alg  string
	priv crypto.PrivateKey
	key  auth.Key
}

// newTestKey returns a fresh key for alg. Its kid is the RFC 7638
// thumbprint of the public half; an HMAC key's kid is "hmac".
func newTestKey(t testing.TB, alg string) testKey {
	t.Helper()
	var (
		priv crypto.PrivateKey
		pub  any
		err  error
	)
	switch {
	case strings.HasPrefix(alg, "RS"), strings.HasPrefix(alg, "PS"):
		var k *rsa.PrivateKey
		k, err = rsa.GenerateKey(rand.Reader, 2048)
		if err == nil {
			priv, pub = k, &k.PublicKey
		}
	case strings.HasPrefix(alg, "ES"):
		curve := map[string]elliptic.Curve{"ES256": elliptic.P256(), "ES384": elliptic.P384(), "ES512": elliptic.P521()}[alg]
		var k *ecdsa.PrivateKey
		k, err = ecdsa.GenerateKey(curve, rand.Reader)
		if err == nil {
			priv, pub = k, &k.PublicKey
		}
	case alg == "EdDSA":
		var k ed25519.PrivateKey
		pub, k, err = ed25519.GenerateKey(rand.Reader)
		priv = k
	case strings.HasPrefix(alg, "HS"):
		secret := make([]byte, 64)
		_, err = rand.Read(secret)
		priv, pub = secret, secret
	default:
		t.Fatalf("newTestKey(%q): unsupported algorithm", alg)
	}
	if err != nil {
		t.Fatalf("newTestKey(%q): %v", alg, err)
	}
	kid := "hmac"
	if _, ok := pub.([]byte); !ok {
		if kid, err = auth.Thumbprint(pub); err != nil {
			t.Fatalf("Thumbprint(%T): %v", pub, err)
		}
	}
	return testKey{alg: alg, priv: priv, key: auth.Key{ID: kid, Public: pub}}
}

// keySet returns a KeySet of the keys' verification halves.
func keySet(keys ...testKey) *auth.KeySet {
	ks := make([]auth.Key, len(keys))
	for i, k := range keys {
		ks[i] = k.key
	}
	return auth.NewKeySet(ks)
}

// claims returns a valid claim set for subject "alice", changed by over:
// a nil value removes the claim.
func claims(over map[string]any) map[string]any {
	now := time.Now()
	c := map[string]any{
		"sub": "alice",
		"iat": now.Unix(),
		"exp": now.Add(5 * time.Minute).Unix(),
	}
	for k, v := range over {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

// mustToken signs c with k. The kid header is k's unless header sets it;
// other header members come from header, where nil removes one.
func mustToken(t testing.TB, k testKey, header, c map[string]any) string {
	t.Helper()
	return mustTokenAlg(t, k, k.alg, header, c)
}

// mustTokenAlg is mustToken with the token's alg chosen apart from the
// key's, for tokens that sign one family's key material with another
// family's algorithm.
func mustTokenAlg(t testing.TB, k testKey, alg string, header, c map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(signingMethod(t, alg), jwt.MapClaims(maps.Clone(c)))
	tok.Header["kid"] = k.key.ID
	for name, v := range header {
		if v == nil {
			delete(tok.Header, name)
			continue
		}
		tok.Header[name] = v
	}
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatalf("mustToken(%s): %v", alg, err)
	}
	return s
}

// rawToken assembles a token by hand from any header and claims values and
// a signature segment, for tokens no library would sign.
func rawToken(t testing.TB, header, c any, sig string) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	p, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc(h) + "." + enc(p) + "." + sig
}

// newVerifier returns a Verifier for cfg over keys, failing the test on a
// configuration error.
func newVerifier(t testing.TB, cfg auth.Config, keys auth.Keys, m *auth.Metrics) *auth.Verifier {
	t.Helper()
	v, err := auth.NewVerifier(cfg, keys, m)
	if err != nil {
		t.Fatalf("NewVerifier(%+v): %v", cfg, err)
	}
	return v
}

// reasonOf returns the Reason of an *auth.Error, or "" for nil; any other
// error fails the test.
func reasonOf(t testing.TB, err error) auth.Reason {
	t.Helper()
	if err == nil {
		return ""
	}
	var ae *auth.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an *auth.Error", err, err)
	}
	return ae.Reason
}

// failures returns plantstore_auth_failures_total by reason, as gathered
// from reg.
func failures(t testing.TB, reg *prometheus.Registry) map[auth.Reason]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	got := map[auth.Reason]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "plantstore_auth_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					got[auth.Reason(l.GetValue())] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return got
}

// fixedKeys is a Keys that answers every lookup with the same key and
// error, whatever the kid and alg, like a careless key source would.
type fixedKeys struct {
	key auth.Key
	err error
}

func (f fixedKeys) Key(_ context.Context, _, _ string) (auth.Key, error) {
	return f.key, f.err
}

// signingMethod returns golang-jwt's method for alg.
func signingMethod(t testing.TB, alg string) jwt.SigningMethod {
	t.Helper()
	m := jwt.GetSigningMethod(alg)
	if m == nil {
		t.Fatalf("no signing method %q", alg)
	}
	return m
}
