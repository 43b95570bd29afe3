package auth_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/observability"
)

// fuzzRSAKey is a 2048-bit RSA key kept for tests only. Fuzz workers are
// separate processes: a fixed key lets the tokens the coordinator makes as
// seeds verify in every worker.
var fuzzRSAKey = strings.ReplaceAll(`-----BEGIN TESTING KEY-----
MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQC5p8g59mgvL7G1
48rXHHT+DBPflr4kyyqh+92EfULbUfdh/d5svd7fCrWFl0grYTjiGdcWBTkYOjdZ
p9DklRTYGufvvWWr/PzgvwJiOE4L4awwCRMR8YDgdjGq91Gklii2sHON+fV2MSLh
kboIJ1Hm4lc3aTMzTKlimvznPaN7zkY6UvI3Y/w5L1/Cn2mDN1LhjvgVrqv3kkQR
8RJ6mFRPZw4NzW60QfFqXaaca/ZhcTZ/QGIFEgkiG02kaWWm2QSWZrU5ewY65F1s
yYzhUsCXObbq3B+s0Q9KJTudvwDrF/OHGqufhOE1MIpiMbgDLmkwEVSE68jZ88HM
ZJcRgUXJAgMBAAECggEAFv0hx9ydSr+ABL711GRhj74o3VI2DgoKx8dPZxsYIt5/
0JZeGw65SNrTfpzsmrOFlsi+l4tSxi9aQHutXAqiS76sKuVj0DPJz94TEly4vFOn
zcRn5DxIejLkhFAu37+Yv8NycZmKpaWgtTgFZkJRK9Lp3BKGnKLw5AT/TTZ2losu
qrg1FRZ5h6No27PGtKoHE4JAGQxfp2RGXi5KZaDKVfsr69bQJO2CxWZWYoChEISR
mOZIFZuenm1b6/0lzpk8/yizHxsNmQxWLqZ9QZM1JO4ZfpyU52EOThbUvhIoTZrg
JIbLguh4RU9ogyWGUQ7OYcyouoetXOuHbOXf6hAnYQKBgQDeIhAW4Ju45t8WO5dB
Nd6vlY+i3AoOUBBr6ek2hVkw4yjynv5LIlJsxsvsS9ZwRoMfnGp5Q86ur3CX67qR
rkVSUZp1hArxORvjV7eBHs/TTlw4E83LejA0oa0spEWJz4g+BPsc/9OeQLQUD+UW
WXs5p3vYb3PSjQFYsVpN4h4I6QKBgQDV9fuDiHszP8xKdF08bSs4Q5N9S4PHJhF1
FmM0yEiffyNxJ6hVeuj2TFVJ16rt/lRQi5tTJLqsR+IbAjny0bb5QSbrSS6eHFfO
kSK4kSObimLzC4fH18Lh7sjkg0BAq6+D79GU/2FJZbkQU9YHB46uUVFjRFZPUAGf
5D08FWlJ4QKBgFssGfR53hCHWhtS/CL8zFi/B0RuEgaL4CGa0WjaVKBXLFBg57jI
7pHNCpgDDJHqrxkDZ0Q8i5FxWsJQM7RllfhSnBYNyzv1F7g5IY1yqxRsvjcaEcap
cS25Ck4fYpdMwfvKqZLegeobXo45c+q3cXdZgeB05lIOI/ZWXN1IqNE5AoGAWW/4
kfQEI9kgSWM48iBkN6Gvzmk5jY6xL3OLRq4OBXX817kPGaRGK2afJD3dupxcnEqv
Q+MPkSJ/NnEIziKxzKFaZnHx5a/NWJC8pdAtxT/kutnwCS58zTqmiTcALchWlt0x
i4nxHeBCqruQtOGI1/8v+UHAnmjANRkQK8R7faECgYAZ4IQsroCf4jdWkoDcgAvB
2YwQ8laFjE8YoEVJBt42HS2oboEA8NI6CjA6XnHgxWYoj+w3kQB85RppS0wdv3NA
AV06X1Nvso6ldYe396dDnUidBdmoEXkNBmgX2ueSooXssXNgqeOTvl/LYCUwpf8p
iPx+skTUnSZz21c0imw3Lg==
-----END TESTING KEY-----
`, "TESTING KEY", "PRIVATE KEY")

// The policy of the fuzzed verifier.
const (
	fuzzIssuer   = "https://idp.example"
	fuzzAudience = "plants"
	fuzzScope    = "plants:read"
	fuzzLeeway   = 30 * time.Second
	fuzzClient   = "plants-web"
	// fuzzLifetime is the lifetime of fuzzClaims, from their iat to their
	// exp: the cap, which they meet exactly.
	fuzzLifetime = (4102444800 - 1700000000) * time.Second
	// fuzzMaxStale bounds the age of the fetched keys; the fuzzed
	// verifier's JWKS was last confirmed twice as long ago.
	fuzzMaxStale = time.Hour
)

// fuzzTypes are the token types of the fuzzed verifier, as compared.
var fuzzTypes = []string{"at+jwt", "jwt"}

// fuzzRules are the claim rules of the fuzzed verifier, which checkRules
// restates.
func fuzzRules() []auth.ClaimRule {
	var verified, tenant any = true, "t-1"
	no, prefix := false, "plants-"
	return []auth.ClaimRule{
		{Path: "email_verified", Equals: &verified},
		{Path: "tid", OneOf: []any{tenant, 2}},
		{Path: "act", Exists: &no},
		{Path: "realm_access.roles", Prefix: &prefix},
	}
}

// fuzzKeyring is one fixed key per family, with the kid the verifier knows
// it by.
type fuzzKeyring struct {
	rsa  authtest.Key
	ps   authtest.Key // the RSA key, signing PS256
	ec   authtest.Key
	ed   authtest.Key
	hmac authtest.Key
}

// newFuzzKeyring derives the fixed keys; calls in any process return the
// same keys.
func newFuzzKeyring(t testing.TB) fuzzKeyring {
	t.Helper()
	block, _ := pem.Decode([]byte(fuzzRSAKey))
	if block == nil {
		t.Fatal("fuzzRSAKey: no PEM block")
	}
	rk, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatalf("fuzzRSAKey: %v", err)
	}
	d := sha256.Sum256([]byte("plantstore fuzz ES256"))
	ek, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d[:])
	if err != nil {
		t.Fatalf("ES256 key: %v", err)
	}
	seed := sha256.Sum256([]byte("plantstore fuzz EdDSA"))
	edk := ed25519.NewKeyFromSeed(seed[:])
	secret := sha256.Sum256([]byte("plantstore fuzz HS256"))

	pub := func(alg string, priv crypto.PrivateKey, public any) authtest.Key {
		kid := "hmac"
		if _, ok := public.([]byte); !ok {
			if kid, err = keys.Thumbprint(public); err != nil {
				t.Fatalf("Thumbprint(%T): %v", public, err)
			}
		}
		return authtest.Key{Alg: alg, Private: priv, Verify: keys.Key{ID: kid, Public: public}}
	}
	r := rk.(*rsa.PrivateKey)
	return fuzzKeyring{
		rsa:  pub("RS256", r, &r.PublicKey),
		ps:   pub("PS256", r, &r.PublicKey),
		ec:   pub("ES256", ek, &ek.PublicKey),
		ed:   pub("EdDSA", edk, edk.Public()),
		hmac: pub("HS256", secret[:], secret[:]),
	}
}

// keySet returns the verification keys of the keyring (the RSA key once).
func (k fuzzKeyring) keySet() *keys.KeySet {
	return authtest.KeySet(k.rsa, k.ec, k.ed, k.hmac)
}

// signatureValid is the oracle of FuzzMiddleware: it reports whether token
// carries, over its first two segments, a valid signature by one of the
// keyring's keys for the alg its header names. It uses the standard library
// only, not the JWT library the verifier relies on.
func (k fuzzKeyring) signatureValid(token string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	hb, err := base64.RawURLEncoding.Strict().DecodeString(parts[0])
	if err != nil {
		return false
	}
	var header struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(hb, &header) != nil {
		return false
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(parts[2])
	if err != nil {
		return false
	}
	input := []byte(parts[0] + "." + parts[1])
	digest := sha256.Sum256(input)
	switch header.Alg {
	case "RS256":
		return rsa.VerifyPKCS1v15(k.rsa.Verify.Public.(*rsa.PublicKey), crypto.SHA256, digest[:], sig) == nil
	case "PS256":
		return rsa.VerifyPSS(k.rsa.Verify.Public.(*rsa.PublicKey), crypto.SHA256, digest[:], sig, nil) == nil
	case "ES256":
		if len(sig) != 64 {
			return false
		}
		r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(k.ec.Verify.Public.(*ecdsa.PublicKey), digest[:], r, s)
	case "EdDSA":
		return ed25519.Verify(k.ed.Verify.Public.(ed25519.PublicKey), input, sig)
	case "HS256":
		mac := hmac.New(sha256.New, k.hmac.Verify.Public.([]byte))
		mac.Write(input)
		return hmac.Equal(mac.Sum(nil), sig)
	}
	return false
}

// fuzzClaims are claims that pass the fuzzed policy until 2100, changed by
// over (a nil value removes a claim).
func fuzzClaims(over map[string]any) map[string]any {
	c := map[string]any{
		"sub":       "alice",
		"iss":       fuzzIssuer,
		"aud":       []string{fuzzAudience},
		"iat":       1700000000,
		"exp":       4102444800, // 2100-01-01
		"scope":     "openid " + fuzzScope,
		"groups":    []string{"gardeners"},
		"client_id": fuzzClient,
		// What the claim rules ask.
		"email_verified": true,
		"tid":            "t-1",
		"realm_access":   map[string]any{"roles": []string{"offline", "plants-read"}},
	}
	for name, v := range over {
		if v == nil {
			delete(c, name)
			continue
		}
		c[name] = v
	}
	return c
}

// challengeRE matches every WWW-Authenticate value the middleware may send.
var challengeRE = regexp.MustCompile(`^Bearer realm="plantstore"(, error="invalid_token", error_description="[ -!#-\[\]-~]+"|, error="insufficient_scope", scope="` + regexp.QuoteMeta(fuzzScope) + `")?, resource_metadata="http://example\.com/\.well-known/oauth-protected-resource"$|^DPoP realm="plantstore", algs="[A-Z0-9 a-z]+", error="invalid_token", error_description="[ -!#-\[\]-~]+", resource_metadata="http://example\.com/\.well-known/oauth-protected-resource"$`)

// FuzzMiddleware sends any Authorization header, once or twice, through
// auth.Middleware on a gin engine wired like the service, and holds the
// decision to the contract:
//   - the answer is 200, 401 or 403 and never a panic;
//   - 200 and 403 only for a token whose signature a configured key
//     verifies (checked with the standard library, apart from golang-jwt;
//     the key of a JWKS that no fetch confirmed within max_stale is none),
//     200 only with the policy's issuer, audience, scope (split on U+0020
//     only), an unexpired exp, nbf and iat that are NumericDates of years
//     0 to 9999 and not in the future, at most DefaultMaxGroups groups, a
//     subject (the one the handler sees) and no crit header, a typ of
//     the policy's token types, its client as client_id (or, without it,
//     azp), exp at most the policy's lifetime after iat (or now), claims
//     that meet the policy's claim rules, and groups not left out;
//   - a refusal carries exactly one well-formed WWW-Authenticate challenge
//     and an Error body without the token;
//   - the valid seeds are accepted (403 for the one without the scope).
func FuzzMiddleware(f *testing.F) {
	ring := newFuzzKeyring(f)
	// A JWKS whose one key no fetch confirmed for twice max_stale: its
	// tokens must never pass. It is not in the oracle's keyring.
	d := sha256.Sum256([]byte("plantstore fuzz stale ES256"))
	sk, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d[:])
	if err != nil {
		f.Fatal(err)
	}
	staleKid, err := keys.Thumbprint(&sk.PublicKey)
	if err != nil {
		f.Fatal(err)
	}
	stale := authtest.Key{Alg: "ES256", Private: sk, Verify: keys.Key{ID: staleKid, Public: &sk.PublicKey}}
	idp := authtest.NewServer(f, authtest.JWKS(f, stale))
	jwks, err := keys.NewJWKS(f.Context(), keys.JWKSOptions{URL: idp.URL, MinRefresh: time.Hour,
		Now: func() time.Time { return time.Now().Add(-2 * fuzzMaxStale) }}, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	authtest.WaitFor(f, "the stale JWKS's one fetch", func() bool { return jwks.Ready() == nil })
	v := newVerifierOpts(f, auth.Options{Leeway: fuzzLeeway}, auth.Config{
		Issuer:        fuzzIssuer,
		Audiences:     []string{fuzzAudience},
		RequiredScope: fuzzScope,
		TokenTypes:    fuzzTypes,
		Clients:       []string{fuzzClient},
		MaxLifetime:   fuzzLifetime,
		MaxStale:      fuzzMaxStale,
		Claims:        fuzzRules(),
	}, keys.Combine(ring.keySet(), jwks))
	e := gin.New()
	e.Use(observability.Middleware(nil, observability.NewHTTPMetrics(prometheus.NewRegistry()), nil, nil), renderErrors)
	e.GET("/plants", auth.Middleware(v, nil), func(c *gin.Context) {
		id, _ := auth.FromGin(c)
		c.JSON(http.StatusOK, id)
	})

	want := map[string]int{} // seed header -> status
	valid := func(k authtest.Key, header, c map[string]any, status int) string {
		h := "Bearer " + authtest.Token(f, k, header, c)
		want[h] = status
		return h
	}
	refused := func(k authtest.Key, header, c map[string]any) string {
		return valid(k, header, c, http.StatusUnauthorized)
	}
	attacker := authtest.NewKey(f, "ES256")
	rsaDER, err := x509.MarshalPKIXPublicKey(ring.rsa.Verify.Public)
	if err != nil {
		f.Fatal(err)
	}
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: rsaDER})
	noKid := map[string]any{"kid": nil}
	seeds := []string{
		valid(ring.rsa, nil, fuzzClaims(nil), http.StatusOK),
		valid(ring.ps, nil, fuzzClaims(nil), http.StatusOK),
		valid(ring.ec, nil, fuzzClaims(nil), http.StatusOK),
		valid(ring.ed, nil, fuzzClaims(nil), http.StatusOK),
		valid(ring.hmac, nil, fuzzClaims(nil), http.StatusOK),
		valid(ring.ed, noKid, fuzzClaims(map[string]any{"aud": fuzzAudience, "scp": []string{fuzzScope}, "scope": nil}), http.StatusOK),
		valid(ring.ec, noKid, fuzzClaims(map[string]any{"nbf": 1700000000, "groups": "one"}), http.StatusOK),
		valid(ring.ed, nil, fuzzClaims(map[string]any{"scope": "openid"}), http.StatusForbidden),
		"bearer " + authtest.Token(f, ring.ed, nil, fuzzClaims(nil)),
		"BEARER " + authtest.Token(f, ring.hmac, nil, fuzzClaims(nil)),
		"Bearer " + authtest.Token(f, ring.ed, nil, fuzzClaims(map[string]any{"exp": 1700000100})),
		"Bearer " + authtest.Token(f, ring.ed, nil, fuzzClaims(map[string]any{"exp": nil})),
		"Bearer " + authtest.Token(f, ring.ed, nil, fuzzClaims(map[string]any{"nbf": 4102444000})),
		"Bearer " + authtest.Token(f, ring.ec, nil, fuzzClaims(map[string]any{"iss": "https://evil.example"})),
		"Bearer " + authtest.Token(f, ring.ec, nil, fuzzClaims(map[string]any{"aud": "other"})),
		"Bearer " + authtest.Token(f, ring.rsa, nil, fuzzClaims(map[string]any{"sub": ""})),
		"Bearer " + authtest.Token(f, ring.rsa, nil, fuzzClaims(map[string]any{"sub": 7})),
		"Bearer " + authtest.Token(f, ring.rsa, map[string]any{"crit": []string{"exp"}}, fuzzClaims(nil)),
		// SPEC §2: NumericDates out of range, a future iat, too many
		// groups, a scope joined by another space than U+0020.
		"Bearer " + authtest.Token(f, ring.ed, nil, fuzzClaims(map[string]any{"nbf": 1e19})),
		"Bearer " + authtest.Token(f, ring.ed, nil, fuzzClaims(map[string]any{"nbf": 9223372036854775000})),
		"Bearer " + authtest.Token(f, ring.ed, nil, fuzzClaims(map[string]any{"iat": 1e30})),
		"Bearer " + authtest.Token(f, ring.ed, nil, fuzzClaims(map[string]any{"iat": 4102444000})),
		"Bearer " + authtest.Token(f, ring.ed, nil, fuzzClaims(map[string]any{"exp": 1e19})),
		"Bearer " + authtest.Token(f, ring.ed, nil, fuzzClaims(map[string]any{"exp": -1})),
		"Bearer " + authtest.Token(f, ring.ec, nil, fuzzClaims(map[string]any{"groups": fuzzGroups(auth.DefaultMaxGroups + 1)})),
		valid(ring.ec, nil, fuzzClaims(map[string]any{"groups": fuzzGroups(auth.DefaultMaxGroups)}), http.StatusOK),
		valid(ring.ed, nil, fuzzClaims(map[string]any{"scope": "openid\u00a0" + fuzzScope}), http.StatusForbidden),
		valid(ring.ed, nil, fuzzClaims(map[string]any{"scope": "openid\t" + fuzzScope}), http.StatusForbidden),
		valid(ring.ed, nil, fuzzClaims(map[string]any{"scope": nil, "scp": []string{"openid " + fuzzScope}}), http.StatusForbidden),
		"Bearer " + authtest.Token(f, ring.rsa, map[string]any{"typ": "JWT", "cty": "JWT"}, fuzzClaims(nil)),
		"Bearer " + authtest.Token(f, attacker, nil, fuzzClaims(nil)),
		"Bearer " + authtest.Token(f, attacker, map[string]any{"kid": ring.ec.Verify.ID}, fuzzClaims(nil)),
		"Bearer " + authtest.TokenAlg(f, authtest.Key{Private: rsaPEM, Verify: ring.rsa.Verify}, "HS256", nil, fuzzClaims(nil)),
		"Bearer " + authtest.TokenAlg(f, authtest.Key{Private: rsaDER, Verify: ring.rsa.Verify}, "HS256", noKid, fuzzClaims(nil)),
		"Bearer " + authtest.RawToken(f, map[string]any{"alg": "none", "typ": "JWT"}, fuzzClaims(nil), ""),
		"Bearer " + authtest.RawToken(f, map[string]any{"alg": "nOnE", "kid": ring.ed.Verify.ID}, fuzzClaims(nil), ""),
		"Bearer " + authtest.RawToken(f, map[string]any{"alg": "ES256", "kid": ring.ec.Verify.ID}, fuzzClaims(nil), strings.Repeat("A", 86)),
		"", "Bearer", "Bearer ", "Bearer  x", "Basic YWxpY2U6c2VjcmV0", "Bearer a.b.c", "Bearer ...", "Bearer e30.e30.",
		"Bearer " + strings.Repeat("a", 8<<10),
		// Tokens meant for this resource: an access-token type, the
		// client, the lifetime, fresh keys.
		valid(ring.ec, map[string]any{"typ": "at+jwt"}, fuzzClaims(nil), http.StatusOK),
		valid(ring.ed, map[string]any{"typ": "application/AT+JWT"}, fuzzClaims(nil), http.StatusOK),
		valid(ring.rsa, nil, fuzzClaims(map[string]any{"client_id": nil, "azp": fuzzClient}), http.StatusOK),
		valid(ring.hmac, nil, fuzzClaims(map[string]any{"iat": nil}), http.StatusOK),
		refused(ring.ec, map[string]any{"typ": nil}, fuzzClaims(nil)),
		refused(ring.ec, map[string]any{"typ": "dpop+jwt"}, fuzzClaims(nil)),
		refused(ring.ed, map[string]any{"typ": "secevent+jwt"}, fuzzClaims(nil)),
		refused(ring.ec, nil, fuzzClaims(map[string]any{"client_id": "reports-cli", "azp": fuzzClient})),
		refused(ring.ec, nil, fuzzClaims(map[string]any{"client_id": nil})),
		refused(ring.rsa, nil, fuzzClaims(map[string]any{"client_id": 7})),
		refused(ring.ed, nil, fuzzClaims(map[string]any{"exp": 4102444801})),
		refused(stale, nil, fuzzClaims(nil)),
		refused(stale, noKid, fuzzClaims(nil)),
		// Claim rules, and groups left out.
		valid(ring.ed, nil, fuzzClaims(map[string]any{"tid": 2, "realm_access": map[string]any{"roles": "plants-admin"}, "act": nil}), http.StatusOK),
		valid(ring.ec, nil, fuzzClaims(map[string]any{"realm_access": nil, "realm_access.roles": []string{"plants-read"}}), http.StatusOK),
		refused(ring.ed, nil, fuzzClaims(map[string]any{"email_verified": "true"})),
		refused(ring.ed, nil, fuzzClaims(map[string]any{"email_verified": nil})),
		refused(ring.ec, nil, fuzzClaims(map[string]any{"tid": "2"})),
		refused(ring.ec, nil, fuzzClaims(map[string]any{"tid": []string{"t-1"}})),
		refused(ring.rsa, nil, fuzzClaims(map[string]any{"act": map[string]any{"sub": "svc"}})),
		refused(ring.hmac, nil, fuzzClaims(map[string]any{"realm_access": map[string]any{"roles": []string{"offline"}}})),
		refused(ring.hmac, nil, fuzzClaims(map[string]any{"realm_access": "plants-read"})),
		refused(ring.ed, nil, fuzzClaims(map[string]any{"_claim_names": map[string]any{"groups": "src1"}})),
		refused(ring.ed, nil, fuzzClaims(map[string]any{"hasgroups": true})),
	}
	for _, s := range seeds {
		f.Add(s, false)
	}
	f.Add(seeds[0], true)

	f.Fuzz(func(t *testing.T, header string, twice bool) {
		req := httptest.NewRequest(http.MethodGet, "/plants", nil)
		req.Header["Authorization"] = []string{header}
		if twice {
			req.Header["Authorization"] = []string{header, header}
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)

		token := ""
		if len(header) > len("Bearer ") && strings.EqualFold(header[:len("Bearer ")], "Bearer ") {
			token = strings.TrimLeft(header[len("Bearer "):], " ") // RFC 6750: "Bearer" 1*SP b64token
		}
		status := rec.Code
		if w, ok := want[header]; ok && !twice && status != w {
			t.Fatalf("Authorization %q: status %d; want %d for a valid seed; body %s", header, status, w, rec.Body)
		}
		switch status {
		case http.StatusOK, http.StatusForbidden:
			if twice || !ring.signatureValid(token) {
				t.Fatalf("Authorization %q (twice: %t): status %d without a valid signature by a configured key", header, twice, status)
			}
		case http.StatusUnauthorized:
		default:
			t.Fatalf("Authorization %q (twice: %t): status %d; want 200, 401 or 403", header, twice, status)
		}
		if status == http.StatusOK {
			var id auth.Identity
			if err := json.Unmarshal(rec.Body.Bytes(), &id); err != nil {
				t.Fatalf("Authorization %q: 200 body %q: %v", header, rec.Body, err)
			}
			checkAccepted(t, token, id)
			checkIntended(t, token)
			checkRules(t, token)
			if got := rec.Header().Values("WWW-Authenticate"); len(got) != 0 {
				t.Fatalf("Authorization %q: 200 with WWW-Authenticate %q", header, got)
			}
			return
		}
		challenges := rec.Header().Values("WWW-Authenticate")
		if len(challenges) != 1 || !challengeRE.MatchString(challenges[0]) {
			t.Fatalf("Authorization %q (twice: %t): status %d with WWW-Authenticate %q; want one well-formed challenge", header, twice, status, challenges)
		}
		if (status == http.StatusForbidden) != strings.Contains(challenges[0], "insufficient_scope") {
			t.Fatalf("Authorization %q: status %d with challenge %q", header, status, challenges[0])
		}
		var body struct {
			Error   int    `json:"error"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error != status {
			t.Fatalf("Authorization %q: status %d body %q (%v); want the Error shape", header, status, rec.Body, err)
		}
		if len(token) >= 8 && bytes.Contains(rec.Body.Bytes(), []byte(token)) {
			t.Fatalf("Authorization %q: body %q holds the token", header, rec.Body)
		}
	})
}

// checkAccepted holds an accepted token's claims to the fuzzed policy,
// decoding them without the JWT library, and the identity the handler saw
// to its sub.
func checkAccepted(t *testing.T, token string, id auth.Identity) {
	t.Helper()
	parts := strings.Split(token, ".")
	hb, _ := base64.RawURLEncoding.DecodeString(parts[0])
	pb, err := base64.RawURLEncoding.Strict().DecodeString(parts[1])
	if err != nil {
		t.Fatalf("accepted token %q: claims segment: %v", token, err)
	}
	var header map[string]any
	if err := json.Unmarshal(hb, &header); err != nil {
		t.Fatalf("accepted token %q: header: %v", token, err)
	}
	if _, ok := header["crit"]; ok {
		t.Fatalf("accepted token %q with a crit header", token)
	}
	var c struct {
		Sub    any     `json:"sub"`
		Iss    any     `json:"iss"`
		Aud    any     `json:"aud"`
		Exp    float64 `json:"exp"`
		Nbf    any     `json:"nbf"`
		Iat    any     `json:"iat"`
		Scope  any     `json:"scope"`
		Scp    any     `json:"scp"`
		Groups any     `json:"groups"`
	}
	if err := json.Unmarshal(pb, &c); err != nil {
		t.Fatalf("accepted token %q: claims %q: %v", token, pb, err)
	}
	sub, _ := c.Sub.(string)
	if sub == "" || id.Subject != sub {
		t.Fatalf("accepted token %q: sub %v, identity %+v", token, c.Sub, id)
	}
	if c.Iss != fuzzIssuer {
		t.Fatalf("accepted token %q: iss %v; want %q", token, c.Iss, fuzzIssuer)
	}
	if !slices.Contains(strs(c.Aud), fuzzAudience) {
		t.Fatalf("accepted token %q: aud %v; want it to hold %q", token, c.Aud, fuzzAudience)
	}
	const maxNumericDate = 253402300799 // 9999-12-31T23:59:59Z
	if c.Exp < 0 || c.Exp > maxNumericDate {
		t.Fatalf("accepted token %q: exp %v out of the NumericDate range", token, c.Exp)
	}
	if exp := time.Unix(int64(c.Exp), 0); !time.Now().Before(exp.Add(fuzzLeeway)) {
		t.Fatalf("accepted token %q: exp %v is past", token, c.Exp)
	}
	for name, v := range map[string]any{"nbf": c.Nbf, "iat": c.Iat} {
		if v == nil {
			continue
		}
		f, ok := v.(float64)
		if !ok || f < 0 || f > maxNumericDate {
			t.Fatalf("accepted token %q: %s %v is not a NumericDate of years 0 to 9999", token, name, v)
		}
		if time.Unix(int64(f), 0).After(time.Now().Add(fuzzLeeway)) {
			t.Fatalf("accepted token %q: %s %v is in the future", token, name, v)
		}
	}
	if n := len(strs(c.Groups)); n > auth.DefaultMaxGroups {
		t.Fatalf("accepted token %q with %d groups, over %d", token, n, auth.DefaultMaxGroups)
	}
	// RFC 6749 §3.3, SPEC §2: a scope or scp string is split on U+0020
	// alone; the items of an array are taken whole.
	var scopes []string
	for _, v := range []any{c.Scope, c.Scp} {
		if str, ok := v.(string); ok {
			scopes = append(scopes, strings.Split(str, " ")...)
		} else {
			scopes = append(scopes, strs(v)...)
		}
	}
	if !slices.Contains(scopes, fuzzScope) || !slices.Contains(id.Scopes, fuzzScope) {
		t.Fatalf("accepted token %q: scopes %v, identity %+v; want %q", token, scopes, id, fuzzScope)
	}
}

// checkIntended holds an accepted token to the rules on tokens meant for
// this resource, decoding it without the JWT library: typ one of
// fuzzTypes (in any case, "application/" allowed), client_id (or, without
// it, azp) fuzzClient, and exp at most fuzzLifetime after iat, or after
// now with the leeway.
func checkIntended(t *testing.T, token string) {
	t.Helper()
	parts := strings.Split(token, ".")
	hb, _ := base64.RawURLEncoding.DecodeString(parts[0])
	pb, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var header map[string]any
	var claims map[string]any
	if json.Unmarshal(hb, &header) != nil || json.Unmarshal(pb, &claims) != nil {
		t.Fatalf("accepted token %q: header or claims not JSON objects", token)
	}
	typ, _ := header["typ"].(string)
	typ = strings.ToLower(typ)
	typ = strings.TrimPrefix(typ, "application/")
	if !slices.Contains(fuzzTypes, typ) {
		t.Fatalf("accepted token %q with typ %v; want one of %q", token, header["typ"], fuzzTypes)
	}
	client, ok := claims["client_id"]
	if !ok {
		client = claims["azp"]
	}
	if client != fuzzClient {
		t.Fatalf("accepted token %q of client %v (client_id %v, azp %v); want %q", token, client, claims["client_id"], claims["azp"], fuzzClient)
	}
	// Float seconds, read apart from the verifier's nanoseconds: a
	// millisecond of slack for the rounding of either.
	exp, _ := claims["exp"].(float64)
	limit := fuzzLifetime.Seconds() + 1e-3
	if iat, ok := claims["iat"].(float64); ok && exp-iat > limit {
		t.Fatalf("accepted token %q lives %.3fs from iat; want at most %s", token, exp-iat, fuzzLifetime)
	}
	now := float64(time.Now().UnixNano()) / 1e9
	if _, ok := claims["iat"]; !ok && exp-now > limit+fuzzLeeway.Seconds() {
		t.Fatalf("accepted token %q without iat lives %.3fs from now; want at most %s with the leeway", token, exp-now, fuzzLifetime)
	}
}

// checkRules holds an accepted token to fuzzRules and to the groups
// overage refusal, decoding it without the JWT library: email_verified
// the JSON true; tid "t-1" or the number 2; no act (or null); at
// realm_access.roles (a top-level claim of that name first, else roles in
// the object realm_access) a string that starts with "plants-", or an
// array with such a string; no _claim_names.groups and no hasgroups true.
func checkRules(t *testing.T, token string) {
	t.Helper()
	parts := strings.Split(token, ".")
	pb, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims map[string]any
	if json.Unmarshal(pb, &claims) != nil {
		t.Fatalf("accepted token %q: claims not a JSON object", token)
	}
	if claims["email_verified"] != true {
		t.Fatalf("accepted token %q with email_verified %#v; want true", token, claims["email_verified"])
	}
	if tid := claims["tid"]; tid != "t-1" && tid != 2.0 {
		t.Fatalf("accepted token %q with tid %#v; want \"t-1\" or 2", token, tid)
	}
	if claims["act"] != nil {
		t.Fatalf("accepted token %q with act %#v", token, claims["act"])
	}
	roles, ok := claims["realm_access.roles"]
	if !ok {
		if ra, isObject := claims["realm_access"].(map[string]any); isObject {
			roles = ra["roles"]
		}
	}
	prefixed := false
	switch r := roles.(type) {
	case string:
		prefixed = strings.HasPrefix(r, "plants-")
	case []any:
		for _, item := range r {
			if s, ok := item.(string); ok && strings.HasPrefix(s, "plants-") {
				prefixed = true
			}
		}
	}
	if !prefixed {
		t.Fatalf("accepted token %q with roles %#v; want one starting with plants-", token, roles)
	}
	if names, ok := claims["_claim_names"].(map[string]any); ok {
		if _, left := names["groups"]; left {
			t.Fatalf("accepted token %q whose groups were left out (_claim_names.groups)", token)
		}
	}
	if claims["hasgroups"] == true {
		t.Fatalf("accepted token %q whose groups were left out (hasgroups)", token)
	}
}

// fuzzGroups returns n distinct group names.
func fuzzGroups(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("g%03d", i)
	}
	return out
}

// strs returns the strings of a JSON string or array value.
func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
