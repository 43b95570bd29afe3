// Package authtest gives tests real keys, real signed tokens and a real
// JWKS endpoint on 127.0.0.1: the parts a verifier is tested against.
package authtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/keys"
)

// Key is a signing key and the verification key that matches it.
type Key struct {
	// Alg is the algorithm the key signs with.
	Alg string
	// Private signs: *rsa.PrivateKey, *ecdsa.PrivateKey,
	// ed25519.PrivateKey or an HMAC secret ([]byte).
	Private crypto.PrivateKey
	// Verify is the key a verifier finds; its ID is the kid tokens carry.
	Verify keys.Key
}

// NewKey returns a fresh key for alg (RS*, PS*, ES256/384/512, EdDSA,
// HS*). Its kid is the RFC 7638 thumbprint of the public half; an HMAC
// key's is "hmac".
func NewKey(t testing.TB, alg string) Key {
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
		// 64 characters of base64url, as an operator writes a secret
		// file: random bytes could end with the newline a secret file's
		// reader drops, 1 in 256 times.
		raw := make([]byte, 48)
		_, err = rand.Read(raw)
		secret := []byte(base64.RawURLEncoding.EncodeToString(raw))
		priv, pub = secret, secret
	default:
		t.Fatalf("authtest.NewKey(%q): unsupported algorithm", alg)
	}
	if err != nil {
		t.Fatalf("authtest.NewKey(%q): %v", alg, err)
	}
	kid := "hmac"
	if _, ok := pub.([]byte); !ok {
		if kid, err = keys.Thumbprint(pub); err != nil {
			t.Fatalf("Thumbprint(%T): %v", pub, err)
		}
	}
	return Key{Alg: alg, Private: priv, Verify: keys.Key{ID: kid, Public: pub}}
}

// NewKeyID is NewKey with the kid given.
func NewKeyID(t testing.TB, alg, kid string) Key {
	t.Helper()
	k := NewKey(t, alg)
	k.Verify.ID = kid
	return k
}

// JWK returns the public JWK of k, with its kid, "use":"sig" and its alg.
func (k Key) JWK(t testing.TB) jwkset.JWKMarshal {
	t.Helper()
	j, err := jwkset.NewJWKFromKey(k.Verify.Public, jwkset.JWKOptions{
		Metadata: jwkset.JWKMetadataOptions{KID: k.Verify.ID, ALG: jwkset.ALG(k.Alg), USE: jwkset.UseSig},
	})
	if err != nil {
		t.Fatalf("NewJWKFromKey(%s): %v", k.Alg, err)
	}
	return j.Marshal()
}

// KeySet returns a KeySet of the keys' verification halves.
func KeySet(ks ...Key) *keys.KeySet {
	verify := make([]keys.Key, len(ks))
	for i, k := range ks {
		verify[i] = k.Verify
	}
	return keys.NewKeySet(verify)
}

// JWKS returns the JWK Set document of the keys' public halves.
func JWKS(t testing.TB, keys ...Key) []byte {
	t.Helper()
	set := jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{}}
	for _, k := range keys {
		set.Keys = append(set.Keys, k.JWK(t))
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// WriteJWKS writes the JWK Set of keys to a file in t's temporary
// directory and returns its path.
func WriteJWKS(t testing.TB, keys ...Key) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.jwks.json")
	if err := os.WriteFile(path, JWKS(t, keys...), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Claims returns a valid claim set for subject "alice", issued now and
// expiring in 5 minutes, changed by over: a nil value removes the claim.
func Claims(over map[string]any) map[string]any {
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

// Token signs claims with k. The kid header is k's unless header sets it;
// other header members come from header, where nil removes one.
func Token(t testing.TB, k Key, header, claims map[string]any) string {
	t.Helper()
	return TokenAlg(t, k, k.Alg, header, claims)
}

// TokenAlg is Token with the token's alg chosen apart from the key's, for
// tokens that sign one family's key material with another family's
// algorithm.
func TokenAlg(t testing.TB, k Key, alg string, header, claims map[string]any) string {
	t.Helper()
	m := jwt.GetSigningMethod(alg)
	if m == nil {
		t.Fatalf("no signing method %q", alg)
	}
	tok := jwt.NewWithClaims(m, jwt.MapClaims(maps.Clone(claims)))
	tok.Header["kid"] = k.Verify.ID
	for name, v := range header {
		if v == nil {
			delete(tok.Header, name)
			continue
		}
		tok.Header[name] = v
	}
	s, err := tok.SignedString(k.Private)
	if err != nil {
		t.Fatalf("authtest.Token(%s): %v", alg, err)
	}
	return s
}

// RawToken assembles a token by hand from any header and claims values and
// a signature segment, for tokens no library would sign.
func RawToken(t testing.TB, header, claims any, sig string) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	p, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc(h) + "." + enc(p) + "." + sig
}

// Server is a JWKS endpoint on 127.0.0.1 whose answer a test can change
// and that counts the requests it gets.
type Server struct {
	*httptest.Server
	// Hits counts the requests.
	Hits   atomic.Int64
	accept atomic.Value // Accept header of the last request
	mu     sync.Mutex
	h      http.HandlerFunc
}

// NewServer starts a Server answering doc, stopped when the test ends.
func NewServer(t testing.TB, doc []byte) *Server {
	t.Helper()
	s := &Server{}
	s.Serve(doc)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Hits.Add(1)
		s.accept.Store(r.Header.Get("Accept"))
		s.mu.Lock()
		h := s.h
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// Serve makes s answer doc as application/jwk-set+json from now on.
func (s *Server) Serve(doc []byte) {
	s.Set(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Write(doc)
	})
}

// Set makes h answer the requests from now on.
func (s *Server) Set(h http.HandlerFunc) {
	s.mu.Lock()
	s.h = h
	s.mu.Unlock()
}

// Accept returns the Accept header of the last request.
func (s *Server) Accept() string {
	v, _ := s.accept.Load().(string)
	return v
}

// Thumbprint returns the RFC 7638 thumbprint of k's public key: what a
// token bound to k carries as cnf.jkt.
func (k Key) Thumbprint(t testing.TB) string {
	t.Helper()
	tp, err := keys.Thumbprint(k.Verify.Public)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// Proof returns a DPoP proof (RFC 9449 §4.2) signed by k for a request of
// method to uri presenting token: typ dpop+jwt, k's public jwk, a fresh
// jti, htm, htu, iat now and ath. header and claims change it (a nil value
// removes a member).
func Proof(t testing.TB, k Key, method, uri, token string, header, claims map[string]any) string {
	t.Helper()
	sum := sha256.Sum256([]byte(token))
	var jti [12]byte
	rand.Read(jti[:])
	c := map[string]any{
		"jti": base64.RawURLEncoding.EncodeToString(jti[:]),
		"htm": method,
		"htu": uri,
		"iat": time.Now().Unix(),
		"ath": base64.RawURLEncoding.EncodeToString(sum[:]),
	}
	maps.Copy(c, claims)
	for name, v := range claims {
		if v == nil {
			delete(c, name)
		}
	}
	jwk, err := json.Marshal(k.JWK(t))
	if err != nil {
		t.Fatal(err)
	}
	var jwkMap map[string]any
	if err := json.Unmarshal(jwk, &jwkMap); err != nil {
		t.Fatal(err)
	}
	delete(jwkMap, "kid")
	h := map[string]any{"typ": "dpop+jwt", "jwk": jwkMap, "kid": nil}
	maps.Copy(h, header)
	return TokenAlg(t, k, k.Alg, h, c)
}

// WaitFor polls cond until it holds, failing t after 10s: for what a key
// source's loops do in the background (a first fetch, a reload).
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ReasonOf returns the Reason of an *auth.Error, or "" for nil; any other
// error fails t.
func ReasonOf(t testing.TB, err error) auth.Reason {
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

// NewJWKS starts a JWKS key source for opts on the test's context, with
// the auth metrics on a fresh registry, which it returns.
func NewJWKS(t testing.TB, opts keys.JWKSOptions) (*keys.JWKS, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	j, err := keys.NewJWKS(t.Context(), opts, nil, auth.NewMetrics(reg))
	if err != nil {
		t.Fatalf("NewJWKS(%+v): %v", opts, err)
	}
	return j, reg
}
