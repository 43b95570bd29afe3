package auth_test

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/dpop"
	"github.com/plantstore/plantstore/auth/jws"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/observability/metricstest"
	"github.com/plantstore/plantstore/observability/setting"
)

// dpopServer is a loopback server with the service's middleware around
// GET /plants, whose verifier trusts one issuer key with the given DPoP
// mode.
type dpopServer struct {
	url string // of /plants
	reg *prometheus.Registry
	v   *auth.Verifier
}

func newDPoPServer(t testing.TB, issuerKey authtest.Key, mode auth.DPoPMode, o auth.Options) dpopServer {
	t.Helper()
	return newDPoPIssuersServer(t, o, auth.Issuer{Config: auth.Config{DPoP: mode}, JWS: jws.New(authtest.KeySet(issuerKey))})
}

// newDPoPIssuersServer is newDPoPServer with the issuers given.
func newDPoPIssuersServer(t testing.TB, o auth.Options, issuers ...auth.Issuer) dpopServer {
	t.Helper()
	v, err := auth.NewVerifier(o, issuers...)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r := gin.New()
	r.Use(renderErrors)
	r.GET("/plants", auth.Middleware(v, auth.NewMetrics(reg)), func(c *gin.Context) {
		id, _ := auth.FromGin(c)
		c.JSON(http.StatusOK, id)
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return dpopServer{url: srv.URL + "/plants", reg: reg, v: v}
}

// dpopRequest sends GET (or method) to url with the Authorization header
// and the DPoP headers given, and returns the status and challenge.
func dpopRequest(t testing.TB, method, url, authz string, proofs ...string) (int, string) {
	t.Helper()
	resp := dpopResponse(t, method, url, authz, proofs...)
	ch := withoutMetadata(t, resp.Header.Values("WWW-Authenticate"))
	return resp.StatusCode, strings.Join(ch, "")
}

// dpopResponse is dpopRequest, answering the response (its body read).
func dpopResponse(t testing.TB, method, url, authz string, proofs ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	for _, p := range proofs {
		req.Header.Add("DPoP", p)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// boundTo returns a token of issuer bound to the public key pub (cnf.jkt,
// its thumbprint), with the claims over.
func boundTo(t testing.TB, issuer authtest.Key, pub any, over map[string]any) string {
	t.Helper()
	jkt, err := keys.Thumbprint(pub)
	if err != nil {
		t.Fatal(err)
	}
	c := authtest.Claims(over)
	c["cnf"] = map[string]any{"jkt": jkt}
	return authtest.Token(t, issuer, nil, c)
}

// forgedProof returns a proof for a GET of uri with token, whose header
// has the jwk and alg given and whose signature is sigLen random bytes: a
// key no one holds, or one the sender does not. The signature's top bit is
// clear, so that as an RSA signature it is less than the modulus of
// fakeRSA and takes the whole check to refuse.
func forgedProof(t testing.TB, alg string, jwk map[string]any, uri, token string, sigLen int) string {
	t.Helper()
	sum := sha256.Sum256([]byte(token))
	sig := make([]byte, sigLen)
	rand.Read(sig)
	sig[0] &= 0x7f
	return authtest.RawToken(t, map[string]any{"typ": "dpop+jwt", "alg": alg, "jwk": jwk},
		map[string]any{"jti": rand.Text(), "htm": "GET", "htu": uri, "iat": time.Now().Unix(), "ath": b64(sum[:])}, b64(sig))
}

// fakeRSA returns an RSA public key of the given size whose private half
// no one has: an odd modulus with its top bit set.
func fakeRSA(bits int) *rsa.PublicKey {
	return fakeRSAExp(bits, 65537)
}

// fakeRSAExp is fakeRSA with the public exponent e.
func fakeRSAExp(bits, e int) *rsa.PublicKey {
	n := make([]byte, bits/8)
	rand.Read(n)
	n[0] |= 0x80
	n[len(n)-1] |= 1
	return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: e}
}

// rsaKeyOfExponent returns an RS256 key of bits whose public exponent is
// e, made by hand (crypto/rsa makes only 65537).
func rsaKeyOfExponent(t testing.TB, bits, e int) authtest.Key {
	t.Helper()
	E := big.NewInt(int64(e))
	one := big.NewInt(1)
	for {
		p, err := rand.Prime(rand.Reader, bits/2)
		if err != nil {
			t.Fatal(err)
		}
		q, err := rand.Prime(rand.Reader, bits/2)
		if err != nil {
			t.Fatal(err)
		}
		n := new(big.Int).Mul(p, q)
		phi := new(big.Int).Mul(new(big.Int).Sub(p, one), new(big.Int).Sub(q, one))
		d := new(big.Int).ModInverse(E, phi)
		if p.Cmp(q) == 0 || n.BitLen() != bits || d == nil {
			continue
		}
		k := &rsa.PrivateKey{PublicKey: rsa.PublicKey{N: n, E: e}, D: d, Primes: []*big.Int{p, q}}
		k.Precompute()
		return authtest.Key{Alg: "RS256", Private: k, Verify: keys.Key{Public: &k.PublicKey}}
	}
}

// TestDPoPFailureBudget: the holder of a token bound to a key it made
// sends proofs with random signatures of a 4096-bit RSA key, with no
// -rate-limit: 16 are checked and refused (dpop_invalid), then every
// proof of that caller, or of that key under another subject, is refused
// before any signature work (429 dpop_blocked, with Retry-After) until
// the minute ends, while another caller is served; the budget's fill is a
// metric.
func TestDPoPFailureBudget(t *testing.T) {
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{DPoPWindow: time.Hour})
	// The clock a little ahead, so that the tokens made now are not in
	// its future.
	var clock atomic.Int64
	clock.Store(time.Now().Add(5 * time.Second).UnixNano())
	auth.SetClock(srv.v, func() time.Time { return time.Unix(0, clock.Load()) })
	key := fakeRSA(4096)
	mallory := boundTo(t, issuer, key, map[string]any{"sub": "mallory"})
	forged := func(token string) string { return forgedProof(t, "RS256", publicJWK(t, key, nil), srv.url, token, 512) }
	for i := range dpop.FailureBudget {
		if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+mallory, forged(mallory)); status != http.StatusUnauthorized || !strings.Contains(ch, "invalid DPoP proof") {
			t.Fatalf("forged proof %d: %d %q; want 401 invalid", i, status, ch)
		}
	}
	trent := boundTo(t, issuer, key, map[string]any{"sub": "trent"})
	other := authtest.NewKey(t, "ES256")
	malloryOther := boundTo(t, issuer, other.Verify.Public, map[string]any{"sub": "mallory"})
	for _, tt := range []struct{ name, token, proof string }{
		{"the next forged proof", mallory, forged(mallory)},
		{"the key under another subject", trent, forged(trent)},
		{"the caller with another key, validly signed", malloryOther, authtest.Proof(t, other, "GET", srv.url, malloryOther, nil, nil)},
	} {
		resp := dpopResponse(t, "GET", srv.url, "DPoP "+tt.token, tt.proof)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: %d, Retry-After %q; want 429 with Retry-After", tt.name, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if got := failures(t, srv.reg); got["dpop_invalid"] != dpop.FailureBudget || got["dpop_blocked"] != 3 {
		t.Errorf("auth failures %v; want dpop_invalid %d and dpop_blocked 3", got, dpop.FailureBudget)
	}
	alice := boundTo(t, issuer, client.Verify.Public, map[string]any{"sub": "alice"})
	if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+alice, authtest.Proof(t, client, "GET", srv.url, alice, nil, nil)); status != http.StatusOK {
		t.Errorf("another caller: %d %q; want 200", status, ch)
	}
	if n := metricstest.Sum(t, srv.reg, "plantstore_dpop_failure_entries", nil); n != 2 {
		t.Errorf("plantstore_dpop_failure_entries %v; want 2, the caller and the key", n)
	}
	clock.Add(int64(dpop.FailurePeriod + time.Second))
	if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+malloryOther, authtest.Proof(t, other, "GET", srv.url, malloryOther, nil, nil)); status != http.StatusOK {
		t.Errorf("the caller's valid proof once the minute ended: %d %q; want 200", status, ch)
	}
}

// challengeAlgs is the algs parameter of the DPoP challenge by default.
var challengeAlgs = strings.Join(dpop.DefaultAlgorithms(), " ")

// TestDPoPAttacks replays the attacks RFC 9449 guards against, each with
// the section that rules it out, over HTTP through the middleware.
func TestDPoPAttacks(t *testing.T) {
	issuer := authtest.NewKey(t, "RS256")
	client := authtest.NewKey(t, "ES256")
	other := authtest.NewKey(t, "ES256")
	srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{})
	bound := func(k authtest.Key) string {
		return authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"jkt": k.Thumbprint(t)}}))
	}
	token := bound(client)
	otherToken := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"jti": "another", "cnf": map[string]any{"jkt": client.Thumbprint(t)}}))
	unbound := authtest.Token(t, issuer, nil, authtest.Claims(nil))
	u := srv.url
	proof := func(over map[string]any) string { return authtest.Proof(t, client, "GET", u, token, nil, over) }
	withHeader := func(h map[string]any) string { return authtest.Proof(t, client, "GET", u, token, h, nil) }
	replayed := proof(nil)
	if status, _ := dpopRequest(t, "GET", u, "DPoP "+token, replayed); status != http.StatusOK {
		t.Fatalf("first use of a proof: %d, want 200", status)
	}
	weakPriv, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	weak := authtest.Key{Alg: "RS256", Private: weakPriv, Verify: keys.Key{Public: &weakPriv.PublicKey}}
	privateJWK := func() map[string]any {
		j := map[string]any{}
		b, _ := json.Marshal(client.JWK(t))
		json.Unmarshal(b, &j)
		j["d"] = "AAAA"
		return j
	}()
	ed := authtest.NewKey(t, "EdDSA")
	edToken := bound(ed)
	// Keys no one holds, to which a token is bound all the same: what an
	// attacker whose IdP binds tokens to any key it is shown can send.
	rsa8192, rsa4096 := fakeRSA(8192), fakeRSA(4096)
	rsa8192Token, rsa4096Token := boundTo(t, issuer, rsa8192, nil), boundTo(t, issuer, rsa4096, nil)
	clientJWK := publicJWK(t, client.Verify.Public, nil)
	offCurve := map[string]any{"kty": "EC", "crv": "P-256", "x": clientJWK["x"], "y": b64(make([]byte, 32))}
	offCurveSum := sha256.Sum256(fmt.Appendf(nil, `{"crv":"P-256","kty":"EC","x":%q,"y":%q}`, offCurve["x"], offCurve["y"]))
	offCurveToken := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"jkt": b64(offCurveSum[:])}}))
	p384 := authtest.NewKey(t, "ES384")
	p384Token := bound(p384)
	// An RSA key with a line break in e: base64 decoders skip it, so the
	// key is the same, but its thumbprint as written is not the key's; a
	// token bound to that thumbprint is one key, two bindings.
	rsaClient := authtest.NewKey(t, "RS256")
	rsaJWK := publicJWK(t, rsaClient.Verify.Public, nil)
	brokenJWK := map[string]any{"kty": "RSA", "n": rsaJWK["n"], "e": "AQ\nAB"}
	brokenSum := sha256.Sum256(fmt.Appendf(nil, "{\"e\":\"AQ\nAB\",\"kty\":\"RSA\",\"n\":%q}", rsaJWK["n"]))
	brokenToken := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"jkt": b64(brokenSum[:])}}))

	// A key of public exponent 3, whose proofs verify: the exponent alone
	// refuses them.
	e3 := rsaKeyOfExponent(t, 2048, 3)
	e3Token := bound(e3)

	tests := []struct {
		name, ref string
		authz     string
		proofs    []string
		method    string
		want      auth.Reason
		wantDPoP  bool // a DPoP challenge, not a Bearer one
	}{
		{name: "control: a valid proof", ref: "RFC 9449 §4.3", authz: "DPoP " + token, proofs: []string{proof(nil)}},
		{name: "control: an EdDSA proof", ref: "RFC 9449 §4.3", authz: "DPoP " + edToken, proofs: []string{authtest.Proof(t, ed, "GET", u, edToken, nil, nil)}},
		{name: "control: scheme in lower case", ref: "RFC 9110 §11.1", authz: "dpop " + token, proofs: []string{proof(nil)}},
		{name: "control: htu with a query and a fragment", ref: "RFC 9449 §4.3 (query and fragment ignored)", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"htu": u + "?limit=1#x"})}},
		{name: "control: htu with an explicit default port in another case", ref: "RFC 9449 §4.3, RFC 3986 §6.2.3", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"htu": strings.Replace(u, "http://", "HTTP://", 1)})}},
		{name: "control: an unbound token as Bearer", ref: "RFC 6750", authz: "Bearer " + unbound},
		{name: "replayed proof", ref: "RFC 9449 §11.1, §4.3 (jti)", authz: "DPoP " + token, proofs: []string{replayed}, want: auth.ReasonDPoPReplay, wantDPoP: true},
		{name: "proof for another token", ref: "RFC 9449 §4.3 (ath), §7", authz: "DPoP " + otherToken, proofs: []string{proof(nil)}, want: auth.ReasonDPoPAth, wantDPoP: true},
		{name: "wrong ath", ref: "RFC 9449 §4.3 (ath)", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"ath": "AAAA"})}, want: auth.ReasonDPoPAth, wantDPoP: true},
		{name: "no ath", ref: "RFC 9449 §4.2 (ath required with a token)", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"ath": nil})}, want: auth.ReasonDPoPAth, wantDPoP: true},
		{name: "another method", ref: "RFC 9449 §4.3 (htm)", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"htm": "POST"})}, want: auth.ReasonDPoPTarget, wantDPoP: true},
		{name: "method in lower case", ref: "RFC 9449 §4.2 (htm is the method, case-sensitive)", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"htm": "get"})}, want: auth.ReasonDPoPTarget, wantDPoP: true},
		{name: "another URL: path", ref: "RFC 9449 §4.3 (htu)", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"htu": strings.TrimSuffix(u, "/plants") + "/admin"})}, want: auth.ReasonDPoPTarget, wantDPoP: true},
		{name: "another URL: host", ref: "RFC 9449 §4.3 (htu)", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"htu": "http://evil.example/plants"})}, want: auth.ReasonDPoPTarget, wantDPoP: true},
		{name: "another URL: scheme", ref: "RFC 9449 §4.3 (htu)", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"htu": strings.Replace(u, "http://", "https://", 1)})}, want: auth.ReasonDPoPTarget, wantDPoP: true},
		{name: "htu not a URL", ref: "RFC 9449 §4.2", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"htu": 7})}, want: auth.ReasonDPoPTarget, wantDPoP: true},
		{name: "stale iat", ref: "RFC 9449 §4.3 (iat within an acceptable window), §11.1", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"iat": time.Now().Add(-2 * time.Minute).Unix()})}, want: auth.ReasonDPoPIat, wantDPoP: true},
		{name: "future iat", ref: "RFC 9449 §4.3, §11.1", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"iat": time.Now().Add(2 * time.Minute).Unix()})}, want: auth.ReasonDPoPIat, wantDPoP: true},
		{name: "iat far in the future (overflow)", ref: "RFC 9449 §4.3, RFC 7519 §2", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"iat": 1e19})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "no iat", ref: "RFC 9449 §4.2", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"iat": nil})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "no jti", ref: "RFC 9449 §4.2", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"jti": nil})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "private key in jwk", ref: "RFC 9449 §4.3 (jwk does not contain a private key)", authz: "DPoP " + token, proofs: []string{withHeader(map[string]any{"jwk": privateJWK})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "no jwk", ref: "RFC 9449 §4.2", authz: "DPoP " + token, proofs: []string{withHeader(map[string]any{"jwk": nil})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "jwk of another key than the signer", ref: "RFC 9449 §4.3 (signature with the jwk)", authz: "DPoP " + token, proofs: []string{authtest.Proof(t, other, "GET", u, token, map[string]any{"jwk": client.JWK(t)}, nil)}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "alg none", ref: "RFC 9449 §4.3 (not none), RFC 8725 §3.1", authz: "DPoP " + token, proofs: []string{authtest.RawToken(t, map[string]any{"typ": "dpop+jwt", "alg": "none", "jwk": client.JWK(t)}, map[string]any{"jti": "x", "htm": "GET", "htu": u, "iat": time.Now().Unix()}, "")}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "alg HS256 with the public key as secret", ref: "RFC 9449 §4.3 (asymmetric), RFC 8725 §2.1", authz: "DPoP " + token, proofs: []string{authtest.TokenAlg(t, authtest.Key{Private: []byte("not a key of the client at all!!"), Verify: client.Verify}, "HS256", map[string]any{"typ": "dpop+jwt", "jwk": client.JWK(t), "kid": nil}, map[string]any{"jti": "x", "htm": "GET", "htu": u, "iat": time.Now().Unix()})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "typ JWT", ref: "RFC 9449 §4.3 (typ dpop+jwt)", authz: "DPoP " + token, proofs: []string{withHeader(map[string]any{"typ": "JWT"})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "the access token as its own proof", ref: "RFC 9449 §4.3 (typ), RFC 8725 §3.11", authz: "DPoP " + token, proofs: []string{token}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "RSA key of 1024 bits", ref: "RFC 9449 §4.3, RFC 7518 §3.3", authz: "DPoP " + bound(weak), proofs: []string{authtest.Proof(t, weak, "GET", u, bound(weak), nil, nil)}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "thumbprint mismatch: a valid proof by another key", ref: "RFC 9449 §6.1 (cnf.jkt), §4.3", authz: "DPoP " + token, proofs: []string{authtest.Proof(t, other, "GET", u, token, nil, nil)}, want: auth.ReasonDPoPKey, wantDPoP: true},
		{name: "thumbprint mismatch: another key, a signature no one checks", ref: "RFC 9449 §6.1, §11.1 (cost)", authz: "DPoP " + token, proofs: []string{forgedProof(t, "RS256", publicJWK(t, rsa4096, nil), u, token, 512)}, want: auth.ReasonDPoPKey, wantDPoP: true},
		{name: "crit header", ref: "RFC 7515 §4.1.11, RFC 9449 §4.3", authz: "DPoP " + token, proofs: []string{withHeader(map[string]any{"crit": []string{"exp"}, "exp": 1})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "empty crit header", ref: "RFC 7515 §4.1.11", authz: "DPoP " + token, proofs: []string{withHeader(map[string]any{"crit": []string{}})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "RSA key of 8192 bits, bound", ref: "RFC 9449 §11.1 (cost of a proof)", authz: "DPoP " + rsa8192Token, proofs: []string{forgedProof(t, "RS256", publicJWK(t, rsa8192, nil), u, rsa8192Token, 1024)}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "RSA key of public exponent 3, validly signed", ref: "RFC 9449 §11.1 (cost of a proof), RFC 8017 §3.1", authz: "DPoP " + e3Token, proofs: []string{authtest.Proof(t, e3, "GET", u, e3Token, nil, nil)}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "RSA key of 4096 bits, bound, wrong signature", ref: "RFC 9449 §4.3 (signature)", authz: "DPoP " + rsa4096Token, proofs: []string{forgedProof(t, "PS512", publicJWK(t, rsa4096, nil), u, rsa4096Token, 512)}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "signature of the wrong length", ref: "RFC 7518 §3.4", authz: "DPoP " + rsa4096Token, proofs: []string{forgedProof(t, "RS256", publicJWK(t, rsa4096, nil), u, rsa4096Token, 256)}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "proof over 4 KiB", ref: "RFC 9449 §11.1 (cost)", authz: "DPoP " + token, proofs: []string{withHeader(map[string]any{"jwk": publicJWK(t, client.Verify.Public, map[string]any{"pad": strings.Repeat("a", 4096)})})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "jwk member in another case", ref: "RFC 7517 §4 (names are case-sensitive)", authz: "DPoP " + token, proofs: []string{withHeader(map[string]any{"jwk": publicJWK(t, client.Verify.Public, map[string]any{"KTY": "oct"})})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "jwk with a certificate chain", ref: "RFC 7517 §4.7", authz: "DPoP " + token, proofs: []string{withHeader(map[string]any{"jwk": publicJWK(t, client.Verify.Public, map[string]any{"x5c": []string{"MII="}})})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "jwk with use enc", ref: "RFC 7517 §4.2", authz: "DPoP " + token, proofs: []string{withHeader(map[string]any{"jwk": publicJWK(t, client.Verify.Public, map[string]any{"use": "enc"})})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "jwk member with a line break, bound as written", ref: "RFC 7638 §3.3 (one key, one thumbprint), RFC 7515 §2 (base64url without line breaks)", authz: "DPoP " + brokenToken, proofs: []string{authtest.Proof(t, rsaClient, "GET", u, brokenToken, map[string]any{"jwk": brokenJWK}, nil)}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "EC point not on the curve, bound", ref: "RFC 7518 §6.2.1, invalid-curve attacks", authz: "DPoP " + offCurveToken, proofs: []string{forgedProof(t, "ES256", offCurve, u, offCurveToken, 64)}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "ES256 with a P-384 key", ref: "RFC 7518 §3.4", authz: "DPoP " + p384Token, proofs: []string{authtest.Proof(t, p384, "GET", u, p384Token, map[string]any{"alg": "ES256"}, nil)}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "control: an ES384 proof", ref: "RFC 9449 §4.3", authz: "DPoP " + p384Token, proofs: []string{authtest.Proof(t, p384, "GET", u, p384Token, nil, nil)}},
		{name: "header member names in another case", ref: "RFC 7515 §4 (names are case-sensitive)", authz: "DPoP " + token, proofs: []string{withHeader(map[string]any{"typ": nil, "TYP": "dpop+jwt"})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "claim names in another case", ref: "RFC 7519 §4 (names are case-sensitive)", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"jti": nil, "JTI": "x"})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "token without proof", ref: "RFC 9449 §7.1", authz: "DPoP " + token, want: auth.ReasonDPoPMissing, wantDPoP: true},
		{name: "two proofs", ref: "RFC 9449 §4.3 (one DPoP header)", authz: "DPoP " + token, proofs: []string{proof(nil), proof(nil)}, want: auth.ReasonDPoPMissing, wantDPoP: true},
		{name: "proof without token", ref: "RFC 9449 §7.1, RFC 6750 §3.1", proofs: []string{proof(nil)}, want: auth.ReasonMissing},
		{name: "bound token as Bearer", ref: "RFC 9449 §7.2", authz: "Bearer " + token, want: auth.ReasonDPoPBound},
		{name: "bound token as Bearer with a proof", ref: "RFC 9449 §7.2", authz: "Bearer " + token, proofs: []string{proof(nil)}, want: auth.ReasonDPoPBound},
		{name: "unbound token under the DPoP scheme", ref: "RFC 9449 §7.1", authz: "DPoP " + unbound, proofs: []string{authtest.Proof(t, client, "GET", u, unbound, nil, nil)}, want: auth.ReasonDPoPUnbound, wantDPoP: true},
		{name: "DPoP scheme, expired token", ref: "RFC 9449 §7.1 (invalid_token)", authz: "DPoP " + authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"exp": 1, "cnf": map[string]any{"jkt": client.Thumbprint(t)}})), proofs: []string{proof(nil)}, want: auth.ReasonExpired, wantDPoP: true},
		{name: "cnf not an object", ref: "RFC 7800 §3.1", authz: "DPoP " + authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": "x"})), proofs: []string{proof(nil)}, want: auth.ReasonClaims, wantDPoP: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = "GET"
			}
			status, challenge := dpopRequest(t, method, u, tt.authz, tt.proofs...)
			if tt.want == "" {
				if status != http.StatusOK {
					t.Fatalf("%s [%s]: %d %q; want 200", tt.name, tt.ref, status, challenge)
				}
				return
			}
			code := "invalid_token"
			if strings.HasPrefix(string(tt.want), "dpop_") && tt.wantDPoP && tt.want != auth.ReasonDPoPUnbound && tt.want != auth.ReasonDPoPRequired {
				code = "invalid_dpop_proof"
			}
			want := `Bearer realm="plantstore", error="` + code + `", error_description="` + tt.want.Description() + `"`
			if tt.wantDPoP {
				want = `DPoP realm="plantstore", algs="` + challengeAlgs + `", error="` + code + `", error_description="` + tt.want.Description() + `"`
			}
			if tt.want == auth.ReasonMissing {
				want = `Bearer realm="plantstore"`
			}
			if status != http.StatusUnauthorized || challenge != want {
				t.Errorf("%s [%s]: %d %q; want 401 %q", tt.name, tt.ref, status, challenge, want)
			}
		})
	}
}

// TestDPoPCachedTokenNeedsProof: a bound token verified once (and cached)
// still needs a fresh valid proof on every request.
func TestDPoPCachedTokenNeedsProof(t *testing.T) {
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "EdDSA")
	srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{})
	token := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"jkt": client.Thumbprint(t)}}))
	for i := range 5 {
		if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+token, authtest.Proof(t, client, "GET", srv.url, token, nil, nil)); status != http.StatusOK {
			t.Fatalf("request %d with a fresh proof: %d %q", i, status, ch)
		}
	}
	for _, tt := range []struct {
		name   string
		proofs []string
	}{{"no proof", nil}, {"a stale proof", []string{authtest.Proof(t, client, "GET", srv.url, token, nil, map[string]any{"iat": time.Now().Add(-time.Hour).Unix()})}}} {
		if status, _ := dpopRequest(t, "GET", srv.url, "DPoP "+token, tt.proofs...); status != http.StatusUnauthorized {
			t.Errorf("cached bound token with %s: %d, want 401", tt.name, status)
		}
	}
}

// TestDPoPQuota: a caller flooding the replay cache with proofs of its own
// bound tokens gets only its share of it, whatever the number of its
// keys: past it, its new proofs get 429 with Retry-After and no
// challenge, a user of another issuer is served as before, and no live
// proof is forgotten, so none can be replayed. The cache holds 64 proofs
// here: one caller may hold 32.
func TestDPoPQuota(t *testing.T) {
	const size = 64
	for _, tt := range []struct {
		name string
		keys int // the flood's keys, each with a bound token of its own
	}{
		{"one key", 1},
		{"17 keys of one subject", 17},
		{"40 keys of one subject", 40},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newDPoPIssuers(t, auth.Options{Leeway: 5 * time.Second}, size)
			flood := make([]dpopClient, tt.keys)
			for i := range flood {
				flood[i] = srv.client(t, "staff", "mallory")
			}
			victim := srv.client(t, "customers", "alice")

			first := authtest.Proof(t, flood[0].key, "GET", srv.url, flood[0].token, nil, nil)
			accepted, refused := 0, 0
			for i := 0; refused == 0 && i < size; i++ {
				proof := ""
				if i == 0 {
					proof = first
				}
				resp := srv.send(t, flood[i%len(flood)], proof)
				switch {
				case resp.StatusCode == http.StatusOK:
					accepted++
				case resp.StatusCode == http.StatusTooManyRequests:
					refused++
					// Until the oldest proof expires: its iat (whole seconds,
					// this second or the last), the window (60 s) and twice
					// the leeway.
					if ra := resp.Header.Get("Retry-After"); ra != "69" && ra != "70" || resp.Header.Get("WWW-Authenticate") != "" {
						t.Errorf("flood request over its share: Retry-After %q, WWW-Authenticate %q; want 69 or 70, none", ra, resp.Header.Get("WWW-Authenticate"))
					}
				default:
					t.Fatalf("flood request %d: %d %v", i, resp.StatusCode, resp.Header["Www-Authenticate"])
				}
			}
			if accepted != size/2 || refused != 1 {
				t.Errorf("the flood of %d keys had %d proofs accepted before its first 429; want %d, half the cache", tt.keys, accepted, size/2)
			}
			for i := range 10 {
				if resp := srv.send(t, victim, ""); resp.StatusCode != http.StatusOK {
					t.Fatalf("the other issuer's user, request %d during the flood: %d %v; want 200", i, resp.StatusCode, resp.Header)
				}
			}
			if resp := srv.send(t, flood[len(flood)-1], ""); resp.StatusCode != http.StatusTooManyRequests {
				t.Errorf("the flood's last key after the victim's requests: %d; want 429", resp.StatusCode)
			}
			if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+flood[0].token, first); status != http.StatusUnauthorized || !strings.Contains(ch, "already used") {
				t.Errorf("the flood's first proof again: %d %q; want 401, already used", status, ch)
			}
			if got := failures(t, srv.reg); got["dpop_quota"] != 2 || got["dpop_replay"] != 1 {
				t.Errorf("auth failures %v; want dpop_quota 2 and dpop_replay 1", got)
			}
		})
	}
}

// dpopIssuers is a loopback server of two named issuers, staff and
// customers, each with a key of its own, and a replay cache of a given
// size.
type dpopIssuers struct {
	dpopServer
	keys map[string]authtest.Key // by issuer name
}

func newDPoPIssuers(t testing.TB, o auth.Options, size int) dpopIssuers {
	t.Helper()
	s := dpopIssuers{keys: map[string]authtest.Key{"staff": authtest.NewKey(t, "ES256"), "customers": authtest.NewKey(t, "EdDSA")}}
	var issuers []auth.Issuer
	for _, name := range []string{"staff", "customers"} {
		issuers = append(issuers, auth.Issuer{Name: name, Config: auth.Config{Issuer: "https://" + name + ".example"}, JWS: jws.New(authtest.KeySet(s.keys[name]))})
	}
	s.dpopServer = newDPoPIssuersServer(t, o, issuers...)
	auth.SetReplayLimits(s.v, size)
	return s
}

// dpopClient is a client's key and a token bound to it.
type dpopClient struct {
	key   authtest.Key
	token string
}

// client returns a new client key and a token of the issuer named issuer
// for sub, bound to it.
func (s dpopIssuers) client(t testing.TB, issuer, sub string) dpopClient {
	t.Helper()
	k := authtest.NewKey(t, "ES256")
	return dpopClient{k, boundTo(t, s.keys[issuer], k.Verify.Public, map[string]any{"iss": "https://" + issuer + ".example", "sub": sub})}
}

// send sends a GET with c's token and proof, or a fresh proof of c's key
// when proof is "".
func (s dpopIssuers) send(t testing.TB, c dpopClient, proof string) *http.Response {
	t.Helper()
	if proof == "" {
		proof = authtest.Proof(t, c.key, "GET", s.url, c.token, nil, nil)
	}
	return dpopResponse(t, "GET", s.url, "DPoP "+c.token, proof)
}

// TestDPoPRateLimitFirst: with a rate limit, a caller over its rate is
// refused (429, no challenge) before its proof is checked further: a proof
// with a bad signature gets the 429, not a signature check, and no refused
// proof takes a place in the replay cache.
func TestDPoPRateLimitFirst(t *testing.T) {
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	limit, err := auth.NewRateLimit(1.0/3600, 3)
	if err != nil {
		t.Fatal(err)
	}
	srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{RateLimit: limit})
	token := boundTo(t, issuer, client.Verify.Public, nil)
	other := boundTo(t, issuer, client.Verify.Public, map[string]any{"sub": "bob"})
	for i := range 3 {
		if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+token, authtest.Proof(t, client, "GET", srv.url, token, nil, nil)); status != http.StatusOK {
			t.Fatalf("request %d within the burst: %d %q", i, status, ch)
		}
	}
	good := authtest.Proof(t, client, "GET", srv.url, token, nil, nil)
	bad := good[:strings.LastIndexByte(good, '.')+1] + b64(make([]byte, 64))
	for _, tt := range []struct{ name, proof string }{{"a valid proof", good}, {"a proof with a bad signature", bad}, {"a replayed proof", good}} {
		resp := dpopResponse(t, "GET", srv.url, "DPoP "+token, tt.proof)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || resp.Header.Get("WWW-Authenticate") != "" {
			t.Errorf("%s over the rate: %d, Retry-After %q, WWW-Authenticate %q; want 429 with Retry-After, no challenge",
				tt.name, resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("WWW-Authenticate"))
		}
	}
	if n := auth.ReplayEntries(srv.v); n != 3 {
		t.Errorf("the replay cache holds %d proofs; want the 3 accepted ones", n)
	}
	// Another subject bound to the same key has a rate of its own.
	if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+other, authtest.Proof(t, client, "GET", srv.url, other, nil, nil)); status != http.StatusOK {
		t.Errorf("another subject: %d %q; want 200", status, ch)
	}
	if got := failures(t, srv.reg); got["dpop_invalid"] != 0 || got["dpop_replay"] != 0 {
		t.Errorf("auth failures %v; want none: a caller over its rate is refused before its proof is checked", got)
	}
}

// TestDPoPForgedProofKeepsJTI: a proof with the jti of a genuine one but a
// signature its key did not make is refused, and does not spend the jti:
// the genuine proof is accepted after it, once.
func TestDPoPForgedProofKeepsJTI(t *testing.T) {
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "EdDSA")
	srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{})
	token := boundTo(t, issuer, client.Verify.Public, nil)
	genuine := authtest.Proof(t, client, "GET", srv.url, token, nil, nil)
	sig := signature(t, genuine)
	sig[0] ^= 1
	forged := withSignature(genuine, sig)
	for _, tt := range []struct {
		name  string
		proof string
		want  int
		ch    string
	}{
		{"the forged proof", forged, http.StatusUnauthorized, "invalid DPoP proof"},
		{"the genuine proof after it", genuine, http.StatusOK, ""},
		{"the genuine proof again", genuine, http.StatusUnauthorized, "already used"},
		{"the forged proof again", forged, http.StatusUnauthorized, "already used"},
	} {
		if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+token, tt.proof); status != tt.want || !strings.Contains(ch, tt.ch) {
			t.Errorf("%s: %d %q; want %d %q", tt.name, status, ch, tt.want, tt.ch)
		}
	}
}

// TestDPoPAlgorithmsOption: Options.DPoPAlgorithms is the set a proof may
// use, the one the challenge and the metadata name; "none", an HMAC or an
// unknown name is refused.
func TestDPoPAlgorithmsOption(t *testing.T) {
	issuer, ec, ed := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256"), authtest.NewKey(t, "EdDSA")
	srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{DPoPAlgorithms: []string{"ES256", "ES256"}})
	ecToken, edToken := boundTo(t, issuer, ec.Verify.Public, nil), boundTo(t, issuer, ed.Verify.Public, nil)
	if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+ecToken, authtest.Proof(t, ec, "GET", srv.url, ecToken, nil, nil)); status != http.StatusOK {
		t.Errorf("an ES256 proof: %d %q; want 200", status, ch)
	}
	want := `DPoP realm="plantstore", algs="ES256", error="invalid_dpop_proof", error_description="invalid DPoP proof"`
	if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+edToken, authtest.Proof(t, ed, "GET", srv.url, edToken, nil, nil)); status != http.StatusUnauthorized || ch != want {
		t.Errorf("an EdDSA proof where only ES256 is allowed: %d %q; want 401 %q", status, ch, want)
	}
	if md := srv.v.Metadata(httptest.NewRequest("GET", srv.url, nil)); !slices.Equal(md.DPoPSigningAlgValuesSupported, []string{"ES256"}) {
		t.Errorf("metadata dpop_signing_alg_values_supported = %v; want [ES256]", md.DPoPSigningAlgValuesSupported)
	}
	for _, algs := range [][]string{{"ES256", "none"}, {"HS256"}, {"ES256", "HS512"}, {"RS1"}, {"es256"}} {
		_, err := auth.NewVerifier(auth.Options{DPoPAlgorithms: algs}, auth.Issuer{JWS: jws.New(authtest.KeySet(issuer))})
		var ce *setting.Error
		if !errors.As(err, &ce) || ce.Key != "dpop_algorithms" {
			t.Errorf("NewVerifier with DPoPAlgorithms %q = %v; want a dpop_algorithms *setting.Error", algs, err)
		}
	}
}

// TestBindingsNotChecked: a token whose cnf names a binding this service
// does not check (or, without -client-cert-header, cannot: a certificate)
// is refused, whichever the scheme and the DPoP mode, and never served as
// a bearer token.
func TestBindingsNotChecked(t *testing.T) {
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	jkt := client.Thumbprint(t)
	sum := sha256.Sum256([]byte("a client certificate"))
	x5t := base64.RawURLEncoding.EncodeToString(sum[:])
	for _, tt := range []struct {
		name string
		cnf  any
		want auth.Reason
	}{
		{"certificate-bound (RFC 8705)", map[string]any{"x5t#S256": x5t}, auth.ReasonCertBound},
		{"bound both ways", map[string]any{"jkt": jkt, "x5t#S256": x5t}, auth.ReasonCertBound},
		// RFC 8705 §3.1's example value leaves unused bits set: no
		// certificate's thumbprint is written so.
		{"x5t#S256 not in canonical base64url", map[string]any{"x5t#S256": "bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dg2"}, auth.ReasonClaims},
		{"x5t#S256 in hex", map[string]any{"x5t#S256": fmt.Sprintf("%x", sum)}, auth.ReasonClaims},
		{"x5t (SHA-1, RFC 7515 §4.1.7)", map[string]any{"x5t": x5t[:27]}, auth.ReasonUnknownBinding},
		{"a jwk (RFC 7800 §3.2)", map[string]any{"jwk": publicJWK(t, client.Verify.Public, nil)}, auth.ReasonUnknownBinding},
		{"a kid (RFC 7800 §3.4)", map[string]any{"kid": "k1"}, auth.ReasonUnknownBinding},
		{"a jku (RFC 7800 §3.5)", map[string]any{"jku": "https://evil.example/jwks"}, auth.ReasonUnknownBinding},
		{"jkt and a jwe", map[string]any{"jkt": jkt, "jwe": "x"}, auth.ReasonUnknownBinding},
		{"a jkt in another case", map[string]any{"JKT": jkt}, auth.ReasonUnknownBinding},
	} {
		for _, mode := range []auth.DPoPMode{auth.DPoPOptional, auth.DPoPOff} {
			t.Run(tt.name+"/"+mode.String(), func(t *testing.T) {
				srv := newDPoPServer(t, issuer, mode, auth.Options{})
				token := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": tt.cnf}))
				for _, scheme := range []string{"Bearer", "DPoP"} {
					status, ch := dpopRequest(t, "GET", srv.url, scheme+" "+token, authtest.Proof(t, client, "GET", srv.url, token, nil, nil))
					if status != http.StatusUnauthorized || !strings.Contains(ch, `error="invalid_token", error_description="`+tt.want.Description()+`"`) {
						t.Errorf("%s %s: %d %q; want 401 invalid_token %s", scheme, tt.cnf, status, ch, tt.want)
					}
				}
			})
		}
	}
	// An empty cnf binds nothing: an ordinary bearer token.
	srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{})
	if status, ch := dpopRequest(t, "GET", srv.url, "Bearer "+authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{}}))); status != http.StatusOK {
		t.Errorf("a token with an empty cnf as Bearer: %d %q; want 200", status, ch)
	}
}

// TestDPoPWindow: -dpop-window (Options.DPoPWindow) bounds a proof's age,
// the leeway on top: with a window of 10 s and no leeway, a proof 5 s old
// is accepted and one 30 s old, which the default window would take, is
// refused.
func TestDPoPWindow(t *testing.T) {
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	token := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"jkt": client.Thumbprint(t)}}))
	for _, tt := range []struct {
		window time.Duration
		age    time.Duration
		want   int
	}{
		{10 * time.Second, 5 * time.Second, http.StatusOK},
		{10 * time.Second, 30 * time.Second, http.StatusUnauthorized},
		{0, 30 * time.Second, http.StatusOK}, // the default, 60 s
	} {
		srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{DPoPWindow: tt.window})
		proof := authtest.Proof(t, client, "GET", srv.url, token, nil, map[string]any{"iat": time.Now().Add(-tt.age).Unix()})
		if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+token, proof); status != tt.want {
			t.Errorf("window %v, proof %v old: %d %q; want %d", tt.window, tt.age, status, ch, tt.want)
		}
	}
}

// TestDPoPEd25519 accepts proofs whose alg is Ed25519, EdDSA's
// fully-specified name (RFC 9864), as oauth4webapi signs them.
func TestDPoPEd25519(t *testing.T) {
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "EdDSA")
	srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{})
	token := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"jkt": client.Thumbprint(t)}}))
	proof := authtest.Proof(t, client, "GET", srv.url, token, map[string]any{"alg": "Ed25519"}, nil)
	if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+token, proof); status != http.StatusOK {
		t.Fatalf("an Ed25519 proof: %d %q, want 200", status, ch)
	}
	if !slices.Contains(dpop.DefaultAlgorithms(), "Ed25519") {
		t.Errorf("DPoPAlgorithms() = %v, want Ed25519 among them (the metadata and the algs= challenge list them)", dpop.DefaultAlgorithms())
	}
}

// TestDPoPModes checks the issuer's mode: off refuses bound tokens,
// required refuses unbound ones with a DPoP challenge.
func TestDPoPModes(t *testing.T) {
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	token := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"jkt": client.Thumbprint(t)}}))
	unbound := authtest.Token(t, issuer, nil, authtest.Claims(nil))
	for _, tt := range []struct {
		mode      auth.DPoPMode
		bound     int
		unbound   int
		challenge string // of a request without credential
	}{
		{auth.DPoPOptional, 200, 200, `Bearer realm="plantstore"`},
		{auth.DPoPOff, 401, 200, `Bearer realm="plantstore"`},
		{auth.DPoPRequired, 200, 401, `DPoP realm="plantstore", algs="` + challengeAlgs + `"`},
	} {
		t.Run(tt.mode.String(), func(t *testing.T) {
			srv := newDPoPServer(t, issuer, tt.mode, auth.Options{})
			if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+token, authtest.Proof(t, client, "GET", srv.url, token, nil, nil)); status != tt.bound {
				t.Errorf("bound token with a proof: %d %q, want %d", status, ch, tt.bound)
			}
			status, ch := dpopRequest(t, "GET", srv.url, "Bearer "+unbound)
			if status != tt.unbound {
				t.Errorf("unbound bearer token: %d %q, want %d", status, ch, tt.unbound)
			}
			if tt.mode == auth.DPoPRequired && !strings.Contains(ch, `DPoP realm="plantstore"`) {
				t.Errorf("unbound token where DPoP is required: challenge %q, want a DPoP one", ch)
			}
			if _, ch := dpopRequest(t, "GET", srv.url, ""); ch != tt.challenge {
				t.Errorf("no credential: challenge %q, want %q", ch, tt.challenge)
			}
		})
	}
}

// TestDPoPPublicURL: with a public URL, proofs name it (the gateway's), not
// the address the service is reached at.
func TestDPoPPublicURL(t *testing.T) {
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	public, _ := url.Parse("https://api.example.com/garden")
	srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{PublicURL: public})
	token := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"jkt": client.Thumbprint(t)}}))
	for _, tt := range []struct {
		htu  string
		want int
	}{
		{"https://api.example.com/garden/plants", 200},
		{"https://API.example.com:443/garden/plants", 200},
		{srv.url, 401},
		{"https://api.example.com/plants", 401},
	} {
		if status, _ := dpopRequest(t, "GET", srv.url, "DPoP "+token, authtest.Proof(t, client, "GET", tt.htu, token, nil, nil)); status != tt.want {
			t.Errorf("proof for %s: %d, want %d", tt.htu, status, tt.want)
		}
	}
}

// TestResourceMetadata checks the RFC 9728 document and its URL, with and
// without a public URL, for each mix of issuer DPoP modes.
func TestResourceMetadata(t *testing.T) {
	key := authtest.NewKey(t, "ES256")
	ks := authtest.KeySet(key)
	jwks, _ := authtest.NewJWKS(t, keys.JWKSOptions{URL: authtest.NewServer(t, authtest.JWKS(t, key)).URL})
	named := func(name, iss, scope string, mode auth.DPoPMode) auth.Issuer {
		return auth.Issuer{Name: name, Config: auth.Config{Issuer: iss, RequiredScope: scope, DPoP: mode}, JWS: jws.New(ks)}
	}
	public, _ := url.Parse("https://gw.example.com/garden/")
	var verifiedTrue any = true
	exists := true
	tests := []struct {
		name    string
		opts    auth.Options
		issuers []auth.Issuer
		host    string
		forward map[string]string
		want    auth.ResourceMetadata
		wantURL string
	}{
		{
			name:    "flags issuer, no public URL",
			issuers: []auth.Issuer{{Config: auth.Config{Issuer: "https://idp.example", RequiredScope: "plants:read"}, JWS: jws.New(ks)}},
			host:    "plants.internal:8080",
			want: auth.ResourceMetadata{Resource: "http://plants.internal:8080", AuthorizationServers: []string{"https://idp.example"},
				ScopesSupported: []string{"plants:read"}, BearerMethodsSupported: []string{"header"}, DPoPSigningAlgValuesSupported: dpop.DefaultAlgorithms()},
			wantURL: "http://plants.internal:8080/.well-known/oauth-protected-resource",
		},
		{
			name:    "forwarded by an untrusted peer: ignored",
			issuers: []auth.Issuer{{JWS: jws.New(ks)}},
			host:    "plants.internal",
			forward: map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example"},
			want:    auth.ResourceMetadata{Resource: "http://plants.internal", BearerMethodsSupported: []string{"header"}, DPoPSigningAlgValuesSupported: dpop.DefaultAlgorithms()},
			wantURL: "http://plants.internal/.well-known/oauth-protected-resource",
		},
		{
			name:    "forwarded by a trusted proxy",
			opts:    auth.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}},
			issuers: []auth.Issuer{{JWS: jws.New(ks), Config: auth.Config{DPoP: auth.DPoPOff}}},
			host:    "plants.internal",
			forward: map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "API.example.com, other"},
			want:    auth.ResourceMetadata{Resource: "https://api.example.com", BearerMethodsSupported: []string{"header"}},
			wantURL: "https://api.example.com/.well-known/oauth-protected-resource",
		},
		{
			name:    "a forwarded host that needs quoting is not believed",
			opts:    auth.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}},
			issuers: []auth.Issuer{{JWS: jws.New(ks), Config: auth.Config{DPoP: auth.DPoPOff}}},
			host:    "plants.internal",
			forward: map[string]string{"X-Forwarded-Host": `a"b`},
			want:    auth.ResourceMetadata{Resource: "http://plants.internal", BearerMethodsSupported: []string{"header"}},
			wantURL: "http://plants.internal/.well-known/oauth-protected-resource",
		},
		{
			name:    "public URL with a path, every issuer requires DPoP",
			opts:    auth.Options{PublicURL: public},
			issuers: []auth.Issuer{named("staff", "https://sso/staff", "plants:read", auth.DPoPRequired), named("apps", "https://sso/apps", "plants:list", auth.DPoPRequired)},
			host:    "plants.internal",
			want: auth.ResourceMetadata{Resource: "https://gw.example.com/garden", AuthorizationServers: []string{"https://sso/staff", "https://sso/apps"},
				ScopesSupported: []string{"plants:read", "plants:list"}, BearerMethodsSupported: []string{"header"},
				DPoPSigningAlgValuesSupported: dpop.DefaultAlgorithms(), DPoPBoundAccessTokensRequired: true},
			wantURL: "https://gw.example.com/.well-known/oauth-protected-resource/garden",
		},
		{
			name: "token policies of the issuers that enforce one",
			issuers: []auth.Issuer{
				{Name: "staff", Config: auth.Config{Issuer: "https://sso/staff", TokenTypes: []string{"AT+JWT"}, Clients: []string{"plants-web"}, MaxLifetime: 90 * time.Minute}, JWS: jws.New(ks)},
				named("apps", "https://sso/apps", "", auth.DPoPOptional),
				{Name: "svc", Config: auth.Config{Issuer: "https://sso/svc", MaxStale: 24 * time.Hour}, JWS: jws.New(jwks)},
			},
			host: "plants.internal",
			want: auth.ResourceMetadata{Resource: "http://plants.internal", AuthorizationServers: []string{"https://sso/staff", "https://sso/apps", "https://sso/svc"},
				BearerMethodsSupported: []string{"header"}, DPoPSigningAlgValuesSupported: dpop.DefaultAlgorithms(),
				TokenPolicies: []auth.TokenPolicy{
					{AuthorizationServer: "https://sso/staff", TokenTypes: []string{"at+jwt"}, ClientRestricted: true, MaxLifetime: 5400, Enforced: []string{"token_types", "clients", "max_lifetime"}},
					{AuthorizationServer: "https://sso/svc", MaxStale: 86400},
				}},
			wantURL: "http://plants.internal/.well-known/oauth-protected-resource",
		},
		{
			name: "token policies say which rules are enforced and which audited",
			issuers: []auth.Issuer{
				{Name: "staff", Config: auth.Config{Issuer: "https://sso/staff", TokenTypes: []string{"at+jwt"}, Clients: []string{"plants-web"},
					Claims: []auth.ClaimRule{{Path: "tid", OneOf: []any{"t-1"}}, {Path: "email_verified", Equals: &verifiedTrue}, {Path: "tid", Exists: &exists}},
					Audit:  []string{"claims", "token_types", "max_lifetime"}}, JWS: jws.New(ks)},
			},
			host: "plants.internal",
			want: auth.ResourceMetadata{Resource: "http://plants.internal", AuthorizationServers: []string{"https://sso/staff"},
				BearerMethodsSupported: []string{"header"}, DPoPSigningAlgValuesSupported: dpop.DefaultAlgorithms(),
				TokenPolicies: []auth.TokenPolicy{
					{AuthorizationServer: "https://sso/staff", TokenTypes: []string{"at+jwt"}, ClientRestricted: true, Claims: []string{"tid", "email_verified"},
						Enforced: []string{"clients"}, Audited: []string{"token_types", "claims"}},
				}},
			wantURL: "http://plants.internal/.well-known/oauth-protected-resource",
		},
		{
			name:    "one issuer of two requires DPoP",
			opts:    auth.Options{PublicURL: public},
			issuers: []auth.Issuer{named("staff", "https://sso/staff", "", auth.DPoPRequired), named("apps", "https://sso/apps", "", auth.DPoPOptional)},
			want: auth.ResourceMetadata{Resource: "https://gw.example.com/garden", AuthorizationServers: []string{"https://sso/staff", "https://sso/apps"},
				BearerMethodsSupported: []string{"header"}, DPoPSigningAlgValuesSupported: dpop.DefaultAlgorithms()},
			wantURL: "https://gw.example.com/.well-known/oauth-protected-resource/garden",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := auth.NewVerifier(tt.opts, tt.issuers...)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("GET", auth.ResourceMetadataPath, nil)
			r.Host, r.RemoteAddr = tt.host, "192.0.2.7:4444"
			for k, val := range tt.forward {
				r.Header.Set(k, val)
			}
			got := v.Metadata(r)
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(tt.want)
			if string(gb) != string(wb) {
				t.Errorf("Metadata =\n%s\nwant\n%s", gb, wb)
			}
			if u := v.MetadataURL(r); u != tt.wantURL {
				t.Errorf("MetadataURL = %q, want %q", u, tt.wantURL)
			}
		})
	}
}

// proofPool hands out fresh proofs of one key for one token, made in
// batches while the benchmark's timer is stopped; each batch starts a new
// replay cache, so that the proofs of earlier batches never fill it.
type proofPool struct {
	b      *testing.B
	v      *auth.Verifier
	key    authtest.Key
	token  string
	claims map[string]any // over the proofs' claims
	proofs []string
	next   int
}

const proofUseURI = "http://127.0.0.1/plants"

func (p *proofPool) proof() string {
	if p.next == len(p.proofs) {
		p.b.StopTimer()
		p.proofs = p.proofs[:0]
		for range 1000 {
			p.proofs = append(p.proofs, authtest.Proof(p.b, p.key, "GET", proofUseURI, p.token, nil, p.claims))
		}
		p.next = 0
		auth.SetReplayLimits(p.v, 1<<18)
		p.b.StartTimer()
	}
	p.next++
	return p.proofs[p.next-1]
}

// BenchmarkDPoP is the cost of a DPoP request's authentication: a bound
// ES256 token, cached after the first request, and a fresh ES256 proof each
// time. Beside it, the part no cache can take off: the proof's signing
// input hashed and its P-256 signature verified, with nothing around
// (bare-verify). The third runs the two in turns, timing each, and
// reports their ratio (x-bare-verify): measured in the same moments, it
// holds on a machine busy with other work, where the first two's ns/op
// drift apart.
//
//	go test ./auth -run '^$' -bench 'DPoP$' -count 5
func BenchmarkDPoP(b *testing.B) {
	issuer := authtest.NewKey(b, "ES256")
	client := authtest.NewKey(b, "ES256")
	v := newVerifierOpts(b, auth.Options{}, auth.Config{}, authtest.KeySet(issuer))
	token := boundTo(b, issuer, client.Verify.Public, nil)
	req := httptest.NewRequest("GET", proofUseURI+"?limit=10", nil)
	req.Header.Set("Authorization", "DPoP "+token)
	authenticate := func(b *testing.B) {
		if _, err := v.Authenticate(req); err != nil {
			b.Fatal(err)
		}
	}
	proof := authtest.Proof(b, client, "GET", proofUseURI, token, nil, nil)
	signed := proof[:strings.LastIndexByte(proof, '.')]
	sig := signature(b, proof)
	der := derSignature(b, new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:]))
	pub := client.Verify.Public.(*ecdsa.PublicKey)
	bareVerify := func(b *testing.B) {
		digest := sha256.Sum256([]byte(signed))
		if !ecdsa.VerifyASN1(pub, digest[:], der) {
			b.Fatal("signature does not verify")
		}
	}
	b.Run("authenticate", func(b *testing.B) {
		pool := &proofPool{b: b, v: v, key: client, token: token}
		b.ReportAllocs()
		for b.Loop() {
			req.Header.Set("DPoP", pool.proof())
			authenticate(b)
		}
	})
	b.Run("bare-verify", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			bareVerify(b)
		}
	})
	b.Run("in-turns", func(b *testing.B) {
		pool := &proofPool{b: b, v: v, key: client, token: token}
		var auth, bare time.Duration
		for i := 0; b.Loop(); i++ {
			req.Header.Set("DPoP", pool.proof())
			a, v := inTurns(i, func() { authenticate(b) }, func() { bareVerify(b) })
			auth, bare = auth+a, bare+v
		}
		b.ReportMetric(float64(auth)/float64(b.N), "ns/op")
		b.ReportMetric(float64(auth)/float64(bare), "x-bare-verify")
	})
}

// BenchmarkDPoPProofCost is what a DPoP request costs the service, by the
// proof it carries: the worst an attacker can send, each refused, and
// where, said in its name, and valid proofs of other algorithms, each in
// turns with a valid Ed25519 proof, the reference; it reports the row's
// ns/op and its ratio to the reference measured in the same moments
// (x-ed25519). Every token is valid, cached and bound to the proof's key
// (an IdP binds a token to any key its client shows), so each row is the
// proof's cost alone.
//
//	go test ./auth -run '^$' -bench DPoPProofCost -count 5
func BenchmarkDPoPProofCost(b *testing.B) {
	issuer := authtest.NewKey(b, "ES256")
	ed, es256, es512 := authtest.NewKey(b, "EdDSA"), authtest.NewKey(b, "ES256"), authtest.NewKey(b, "ES512")
	limit, err := auth.NewRateLimit(1.0/3600, 1)
	if err != nil {
		b.Fatal(err)
	}
	// A window of an hour: the proofs made here stay fresh however long
	// the benchmark runs.
	v := newVerifierOpts(b, auth.Options{DPoPWindow: time.Hour}, auth.Config{}, authtest.KeySet(issuer))
	// The rows refused at the signature send the same key's proofs
	// without end: no budget stops them here (blocked measures it).
	auth.SetFailureBudget(v, math.MaxInt32)
	blocked := newVerifierOpts(b, auth.Options{DPoPWindow: time.Hour}, auth.Config{}, authtest.KeySet(issuer))
	refV := newVerifierOpts(b, auth.Options{DPoPWindow: time.Hour}, auth.Config{}, authtest.KeySet(issuer))
	limited := newVerifierOpts(b, auth.Options{DPoPWindow: time.Hour, RateLimit: limit}, auth.Config{}, authtest.KeySet(issuer))
	edToken, es256Token, es512Token := boundTo(b, issuer, ed.Verify.Public, nil), boundTo(b, issuer, es256.Verify.Public, nil), boundTo(b, issuer, es512.Verify.Public, nil)
	rsa4096, rsa8192 := fakeRSA(4096), fakeRSA(8192)
	rsa4096Token, rsa8192Token := boundTo(b, issuer, rsa4096, nil), boundTo(b, issuer, rsa8192, nil)
	rsaBigEKey := fakeRSAExp(4096, math.MaxInt32)
	rsaBigE := boundTo(b, issuer, rsaBigEKey, nil)
	badSignature := func(proof string) string {
		sig := signature(b, proof)
		sig[len(sig)/2] ^= 1
		return withSignature(proof, sig)
	}
	replayed := authtest.Proof(b, ed, "GET", proofUseURI, edToken, nil, nil)
	// A jwk of the bound key padded with members up to what a proof may
	// take, 4 KiB and 32 members, and a signature its key did not make;
	// and one padded with more members.
	padded, many := publicJWK(b, ed.Verify.Public, nil), publicJWK(b, ed.Verify.Public, nil)
	for i := len(padded); i < 32; i++ {
		padded[fmt.Sprintf("m%02d", i)] = strings.Repeat("a", 85)
	}
	for i := range 200 {
		many[fmt.Sprintf("m%03d", i)] = 0
	}
	overRate := authtest.Proof(b, ed, "GET", proofUseURI, edToken, nil, nil)
	rsaForged := forgedProof(b, "RS256", publicJWK(b, rsa4096, nil), proofUseURI, rsa4096Token, 512)
	for range dpop.FailureBudget {
		if _, err := blocked.Authenticate(dpopBenchRequest(rsa4096Token, rsaForged)); !strings.HasSuffix(fmt.Sprint(err), "dpop_invalid") {
			b.Fatalf("a forged proof within the budget: %v", err)
		}
	}
	if _, err := limited.Authenticate(dpopBenchRequest(edToken, authtest.Proof(b, ed, "GET", proofUseURI, edToken, nil, nil))); err != nil {
		b.Fatal(err)
	}

	type row struct {
		name  string
		v     *auth.Verifier
		token string
		key   authtest.Key // fresh valid proofs of it, when proof is ""
		proof string
		want  string // the refusal, as Error() ends
	}
	rows := []row{
		{name: "valid/ed25519", v: v, token: edToken, key: ed},
		{name: "valid/es256", v: v, token: es256Token, key: es256},
		{name: "valid/es512", v: v, token: es512Token, key: es512},
		{name: "refused-before-signature/replayed", v: v, token: edToken, proof: replayed, want: "dpop_replay"},
		{name: "refused-before-signature/over-rate", v: limited, token: edToken, proof: overRate, want: "rate limit exceeded"},
		{name: "refused-before-signature/rsa-8192", v: v, token: rsa8192Token, proof: forgedProof(b, "RS256", publicJWK(b, rsa8192, nil), proofUseURI, rsa8192Token, 1024), want: "dpop_invalid"},
		{name: "refused-before-signature/rsa-4096-blocked", v: blocked, token: rsa4096Token, proof: rsaForged, want: "dpop_blocked"},
		{name: "refused-before-signature/rsa-4096-exponent-2^31-1", v: v, token: rsaBigE, proof: forgedProof(b, "RS256", publicJWK(b, rsaBigEKey, nil), proofUseURI, rsaBigE, 512), want: "dpop_invalid"},
		{name: "refused-before-signature/another-key", v: v, token: edToken, proof: forgedProof(b, "RS256", publicJWK(b, rsa4096, nil), proofUseURI, edToken, 512), want: "dpop_key"},
		{name: "refused-before-signature/over-4KiB", v: v, token: edToken, proof: authtest.Proof(b, ed, "GET", proofUseURI, edToken, map[string]any{"jwk": publicJWK(b, ed.Verify.Public, map[string]any{"pad": strings.Repeat("a", 3000)})}, nil), want: "dpop_invalid"},
		{name: "refused-before-signature/jwk-of-200-members", v: v, token: edToken, proof: authtest.Proof(b, ed, "GET", proofUseURI, edToken, map[string]any{"jwk": many}, nil), want: "dpop_invalid"},
		{name: "refused-at-signature/ed25519-4KiB-jwk", v: v, token: edToken, proof: badSignature(authtest.Proof(b, ed, "GET", proofUseURI, edToken, map[string]any{"jwk": padded}, nil)), want: "dpop_invalid"},
		{name: "refused-at-signature/rsa-4096", v: v, token: rsa4096Token, proof: forgedProof(b, "RS256", publicJWK(b, rsa4096, nil), proofUseURI, rsa4096Token, 512), want: "dpop_invalid"},
		{name: "refused-at-signature/es512", v: v, token: es512Token, proof: badSignature(authtest.Proof(b, es512, "GET", proofUseURI, es512Token, nil, nil)), want: "dpop_invalid"},
	}
	// The replayed proof, once accepted.
	if _, err := v.Authenticate(dpopBenchRequest(edToken, replayed)); err != nil {
		b.Fatal(err)
	}
	reference := dpopBenchRequest(edToken, "")
	for _, r := range rows {
		b.Run(r.name, func(b *testing.B) {
			pool := &proofPool{b: b, v: r.v, key: r.key, token: r.token}
			refPool := &proofPool{b: b, v: refV, key: ed, token: edToken}
			req := dpopBenchRequest(r.token, r.proof)
			r.v.Authenticate(req) // the token verified and cached
			var cost, ref time.Duration
			for i := 0; b.Loop(); i++ {
				if r.proof == "" {
					req.Header.Set("DPoP", pool.proof())
				}
				reference.Header.Set("DPoP", refPool.proof())
				var err error
				c, d := inTurns(i, func() { _, err = r.v.Authenticate(req) }, func() {
					if _, err := refV.Authenticate(reference); err != nil {
						b.Fatal(err)
					}
				})
				cost, ref = cost+c, ref+d
				if got := fmt.Sprint(err); r.want == "" && err != nil || r.want != "" && !strings.HasSuffix(got, r.want) {
					b.Fatalf("Authenticate = %v; want %q", err, r.want)
				}
			}
			b.ReportMetric(float64(cost)/float64(b.N), "ns/op")
			b.ReportMetric(float64(cost)/float64(ref), "x-ed25519")
		})
	}
}

// inTurns runs f and g, and returns how long each took: f first on even
// turns, g first on odd ones, since the second of two run back to back
// finds the caches as the first left them.
func inTurns(turn int, f, g func()) (df, dg time.Duration) {
	timed := func(h func()) time.Duration {
		t0 := time.Now()
		h()
		return time.Since(t0)
	}
	if turn%2 == 0 {
		df = timed(f)
		return df, timed(g)
	}
	dg = timed(g)
	return timed(f), dg
}

// dpopBenchRequest returns a GET of proofUseURI with token and proof.
func dpopBenchRequest(token, proof string) *http.Request {
	req := httptest.NewRequest("GET", proofUseURI, nil)
	req.Header.Set("Authorization", "DPoP "+token)
	req.Header.Set("DPoP", proof)
	return req
}
