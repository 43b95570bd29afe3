package auth_test

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
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

// verifyTest is one Verify case: want is the Reason of the refusal, or ""
// when the token must be accepted (and, when wantID is set, yield it).
type verifyTest struct {
	name   string
	opts   auth.Options
	cfg    auth.Config
	keys   keys.Keys
	token  string
	want   auth.Reason
	wantID *auth.Identity
}

func runVerifyTests(t *testing.T, tests []verifyTest) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newVerifierOpts(t, tt.opts, tt.cfg, tt.keys)
			id, err := v.Verify(t.Context(), tt.token)
			if got := authtest.ReasonOf(t, err); got != tt.want {
				t.Fatalf("Verify(%s token) = %+v, %v (reason %q); want reason %q", tt.name, id, err, got, tt.want)
			}
			if err != nil {
				var ae *auth.Error
				errors.As(err, &ae)
				wantStatus, wantCode := http.StatusUnauthorized, "invalid_token"
				if tt.want == auth.ReasonScope {
					wantStatus, wantCode = http.StatusForbidden, "insufficient_scope"
				}
				if ae.HTTPStatus() != wantStatus || ae.Code != wantCode {
					t.Errorf("Verify(%s token) error status, code = %d, %q; want %d, %q", tt.name, ae.HTTPStatus(), ae.Code, wantStatus, wantCode)
				}
				if len(tt.token) > 8 && strings.Contains(err.Error(), tt.token) {
					t.Errorf("Verify(%s token) error text %q contains the token", tt.name, err)
				}
				if id != nil {
					t.Errorf("Verify(%s token) = %+v with an error; want no Identity", tt.name, id)
				}
				return
			}
			if id.Subject == "" {
				t.Errorf("Verify(%s token) = %+v; want a subject", tt.name, id)
			}
			if w := tt.wantID; w != nil {
				if id.Subject != w.Subject || !slices.Equal(id.Groups, w.Groups) || !slices.Equal(id.Scopes, w.Scopes) {
					t.Errorf("Verify(%s token) = %+v; want %+v", tt.name, id, *w)
				}
			}
		})
	}
}

func TestVerifyKeyFamilies(t *testing.T) {
	var tests []verifyTest
	for _, alg := range []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "HS256", "HS384", "HS512"} {
		k := authtest.NewKey(t, alg)
		tests = append(tests, verifyTest{
			name:  alg,
			keys:  authtest.KeySet(k),
			token: authtest.Token(t, k, nil, authtest.Claims(nil)),
		})
		// The same kid, but the signature was made by another key.
		other := authtest.NewKey(t, alg)
		tests = append(tests, verifyTest{
			name:  alg + " signed by another key",
			keys:  authtest.KeySet(k),
			token: authtest.Token(t, other, map[string]any{"kid": k.Verify.ID}, authtest.Claims(nil)),
			want:  auth.ReasonBadSignature,
		})
	}
	runVerifyTests(t, tests)
}

func TestVerifyAlgorithms(t *testing.T) {
	rsaKey := authtest.NewKey(t, "RS256")
	ecKey := authtest.NewKey(t, "ES256")
	hmacKey := authtest.NewKey(t, "HS256")
	ks := authtest.KeySet(rsaKey, ecKey, hmacKey)
	onlyRS256 := auth.Config{Algorithms: []string{"RS256"}}
	valid := authtest.Claims(nil)

	tests := []verifyTest{
		{name: "allowed RS256", cfg: onlyRS256, keys: ks, token: authtest.Token(t, rsaKey, nil, valid)},
		{name: "ES256 not in allow-list", cfg: onlyRS256, keys: ks, token: authtest.Token(t, ecKey, nil, valid), want: auth.ReasonAlgorithm},
		{name: "HS256 not in allow-list", cfg: onlyRS256, keys: ks, token: authtest.Token(t, hmacKey, nil, valid), want: auth.ReasonAlgorithm},
		{name: "RS384 with an RS256-only list", cfg: onlyRS256, keys: ks, token: authtest.TokenAlg(t, rsaKey, "RS384", nil, valid), want: auth.ReasonAlgorithm},
		{name: "default list allows ES256", keys: ks, token: authtest.Token(t, ecKey, nil, valid)},
		{name: "alg missing", keys: ks, token: authtest.RawToken(t, map[string]any{"typ": "JWT", "kid": rsaKey.Verify.ID}, valid, "c2ln"), want: auth.ReasonAlgorithm},
		{name: "alg not a string", keys: ks, token: authtest.RawToken(t, map[string]any{"alg": 256, "kid": rsaKey.Verify.ID}, valid, "c2ln"), want: auth.ReasonAlgorithm},
		{name: "unknown alg", keys: ks, token: authtest.RawToken(t, map[string]any{"alg": "HS1024", "kid": hmacKey.Verify.ID}, valid, "c2ln"), want: auth.ReasonAlgorithm},
	}
	for _, none := range []string{"none", "None", "NONE", "nOnE"} {
		for _, sig := range []string{"", "c2ln"} {
			name := "alg " + none
			if sig != "" {
				name += " with a signature"
			}
			for _, cfg := range []auth.Config{{}, onlyRS256} {
				tests = append(tests, verifyTest{
					name:  name + " " + strings.Join(cfg.Algorithms, ","),
					cfg:   cfg,
					keys:  ks,
					token: authtest.RawToken(t, map[string]any{"alg": none, "typ": "JWT"}, valid, sig),
					want:  auth.ReasonAlgorithm,
				})
			}
		}
	}
	runVerifyTests(t, tests)
}

func TestVerifyKeyConfusion(t *testing.T) {
	rsaKey := authtest.NewKey(t, "RS256")
	pub := rsaKey.Verify.Public
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	pemPKIX := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	pkcs1DER := x509.MarshalPKCS1PublicKey(rsaKey.Verify.Public.(*rsa.PublicKey))
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: pkcs1DER})

	// The attacker signs HS256 with the public key bytes as the secret.
	forge := func(secret []byte, alg string, header map[string]any) string {
		k := authtest.Key{Alg: alg, Private: secret, Verify: keys.Key{ID: rsaKey.Verify.ID}}
		return authtest.TokenAlg(t, k, alg, header, authtest.Claims(nil))
	}
	only := authtest.KeySet(rsaKey)
	// A careless source that hands out the RSA key for any lookup: the
	// Verifier's own family check must still refuse.
	careless := fixedKeys{key: rsaKey.Verify}

	tests := []verifyTest{
		{name: "genuine RS256", keys: only, token: authtest.Token(t, rsaKey, nil, authtest.Claims(nil))},
		{name: "HS256 with PEM as secret", keys: only, token: forge(pemPKIX, "HS256", nil), want: auth.ReasonUnknownKey},
		{name: "HS256 with DER as secret", keys: only, token: forge(der, "HS256", nil), want: auth.ReasonUnknownKey},
		{name: "HS256 with PKCS1 PEM as secret", keys: only, token: forge(pkcs1, "HS256", nil), want: auth.ReasonUnknownKey},
		{name: "HS512 with PEM as secret", keys: only, token: forge(pemPKIX, "HS512", nil), want: auth.ReasonUnknownKey},
		{name: "HS256 with PEM as secret, no kid", keys: only, token: forge(pemPKIX, "HS256", map[string]any{"kid": nil}), want: auth.ReasonUnknownKey},
		{name: "HS256 with DER as secret, no kid", keys: only, token: forge(der, "HS256", map[string]any{"kid": nil}), want: auth.ReasonUnknownKey},
		{name: "careless source, genuine RS256", keys: careless, token: authtest.Token(t, rsaKey, nil, authtest.Claims(nil))},
		{name: "careless source, HS256 with PEM", keys: careless, token: forge(pemPKIX, "HS256", nil), want: auth.ReasonUnknownKey},
		{name: "careless source, HS256 with DER", keys: careless, token: forge(der, "HS256", nil), want: auth.ReasonUnknownKey},
		{name: "careless source, ES256 token", keys: careless, token: authtest.Token(t, authtest.NewKey(t, "ES256"), nil, authtest.Claims(nil)), want: auth.ReasonUnknownKey},
		{name: "empty HMAC secret", keys: fixedKeys{key: keys.Key{Public: []byte{}}}, token: forge([]byte{}, "HS256", nil), want: auth.ReasonUnknownKey},
	}
	runVerifyTests(t, tests)
}

func TestVerifyIgnoresKeyHeaders(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "not here", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)

	configured := authtest.NewKey(t, "ES256")
	attacker := authtest.NewKey(t, "ES256")
	jwk, err := jwkset.NewJWKFromKey(attacker.Verify.Public, jwkset.JWKOptions{
		Metadata: jwkset.JWKMetadataOptions{KID: attacker.Verify.ID, ALG: jwkset.AlgES256, USE: jwkset.UseSig},
	})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "attacker"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	attackerPriv := attacker.Private.(*ecdsa.PrivateKey)
	cert, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &attackerPriv.PublicKey, attackerPriv)
	if err != nil {
		t.Fatal(err)
	}
	headers := map[string]any{
		"jwk": jwk.Marshal(),
		"jku": srv.URL + "/jwks.json",
		"x5u": srv.URL + "/cert.pem",
		"x5c": []string{base64.StdEncoding.EncodeToString(cert)},
	}
	with := func(extra map[string]any) map[string]any {
		h := map[string]any{}
		for k, v := range headers {
			h[k] = v
		}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	ks := authtest.KeySet(configured)

	tests := []verifyTest{
		{name: "configured key, key headers present", keys: ks, token: authtest.Token(t, configured, with(nil), authtest.Claims(nil))},
		{name: "attacker key, its own kid", keys: ks, token: authtest.Token(t, attacker, with(nil), authtest.Claims(nil)), want: auth.ReasonUnknownKey},
		{name: "attacker key, no kid", keys: ks, token: authtest.Token(t, attacker, with(map[string]any{"kid": nil}), authtest.Claims(nil)), want: auth.ReasonBadSignature},
		{name: "attacker key, configured kid", keys: ks, token: authtest.Token(t, attacker, with(map[string]any{"kid": configured.Verify.ID}), authtest.Claims(nil)), want: auth.ReasonBadSignature},
		{name: "attacker key, jku only", keys: ks, token: authtest.Token(t, attacker, map[string]any{"jku": srv.URL}, authtest.Claims(nil)), want: auth.ReasonUnknownKey},
	}
	runVerifyTests(t, tests)
	if n := hits.Load(); n != 0 {
		t.Errorf("jku/x5u server got %d requests; want 0", n)
	}
}

func TestVerifyCrit(t *testing.T) {
	k := authtest.NewKey(t, "EdDSA")
	ks := authtest.KeySet(k)
	tests := []verifyTest{
		{name: "no crit", keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(nil))},
		{name: "crit names exp", keys: ks, token: authtest.Token(t, k, map[string]any{"crit": []string{"exp"}}, authtest.Claims(nil)), want: auth.ReasonCrit},
		{name: "crit names an extension", keys: ks, token: authtest.Token(t, k, map[string]any{"crit": []string{"http://example.com/x"}, "http://example.com/x": true}, authtest.Claims(nil)), want: auth.ReasonCrit},
		{name: "crit empty list", keys: ks, token: authtest.Token(t, k, map[string]any{"crit": []string{}}, authtest.Claims(nil)), want: auth.ReasonCrit},
		{name: "crit not a list", keys: ks, token: authtest.Token(t, k, map[string]any{"crit": "b64"}, authtest.Claims(nil)), want: auth.ReasonCrit},
		{name: "crit null", keys: ks, token: rawCritNull(t, k), want: auth.ReasonCrit},
	}
	runVerifyTests(t, tests)
}

// rawCritNull returns a token signed by k whose header has "crit": null,
// which the header map of mustToken cannot express.
func rawCritNull(t *testing.T, k authtest.Key) string {
	t.Helper()
	tok := authtest.Token(t, k, map[string]any{"crit": "x"}, authtest.Claims(nil))
	parts := strings.Split(tok, ".")
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	if err := json.Unmarshal(hb, &h); err != nil {
		t.Fatal(err)
	}
	h["crit"] = nil
	hb, err = json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	// Re-sign over the new header.
	unsigned := base64.RawURLEncoding.EncodeToString(hb) + "." + parts[1]
	sig, err := jwt.GetSigningMethod(k.Alg).Sign(unsigned, k.Private)
	if err != nil {
		t.Fatal(err)
	}
	return unsigned + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func TestVerifyKeyChoice(t *testing.T) {
	rs1 := authtest.NewKey(t, "RS256")
	rs2 := authtest.NewKey(t, "RS256")
	ec := authtest.NewKey(t, "ES256")
	ec384 := authtest.NewKey(t, "ES384")
	noKid := map[string]any{"kid": nil}

	tests := []verifyTest{
		{name: "kid of the key", keys: authtest.KeySet(rs1, rs2), token: authtest.Token(t, rs2, nil, authtest.Claims(nil))},
		{name: "unknown kid", keys: authtest.KeySet(rs1), token: authtest.Token(t, rs2, nil, authtest.Claims(nil)), want: auth.ReasonUnknownKey},
		{name: "kid of a key of another family", keys: authtest.KeySet(rs1, ec), token: authtest.Token(t, rs1, map[string]any{"kid": ec.Verify.ID}, authtest.Claims(nil)), want: auth.ReasonUnknownKey},
		{name: "kid of an EC key on another curve", keys: authtest.KeySet(ec, ec384), token: authtest.Token(t, ec, map[string]any{"kid": ec384.Verify.ID}, authtest.Claims(nil)), want: auth.ReasonUnknownKey},
		{name: "kid pinned to another alg", keys: keys.NewKeySet([]keys.Key{{ID: rs1.Verify.ID, Algorithm: "RS512", Public: rs1.Verify.Public}}), token: authtest.Token(t, rs1, nil, authtest.Claims(nil)), want: auth.ReasonUnknownKey},
		{name: "kid not a string", keys: authtest.KeySet(rs1), token: authtest.Token(t, rs1, map[string]any{"kid": 7}, authtest.Claims(nil)), want: auth.ReasonMalformed},
		{name: "no kid, one key", keys: authtest.KeySet(rs1), token: authtest.Token(t, rs1, noKid, authtest.Claims(nil))},
		{name: "no kid, one key fits alg among others", keys: authtest.KeySet(rs1, ec, ec384), token: authtest.Token(t, ec, noKid, authtest.Claims(nil))},
		{name: "no kid, two keys fit alg", keys: authtest.KeySet(rs1, rs2), token: authtest.Token(t, rs1, noKid, authtest.Claims(nil)), want: auth.ReasonUnknownKey},
		{name: "no kid, no key fits alg", keys: authtest.KeySet(rs1), token: authtest.Token(t, ec, noKid, authtest.Claims(nil)), want: auth.ReasonUnknownKey},
		{name: "no key set yet", keys: (*keys.KeySet)(nil), token: authtest.Token(t, rs1, nil, authtest.Claims(nil)), want: auth.ReasonKeysUnavailable},
		{name: "source fails", keys: fixedKeys{err: errors.New("fetch jwks: connection refused")}, token: authtest.Token(t, rs1, nil, authtest.Claims(nil)), want: auth.ReasonKeysUnavailable},
		{name: "source reports ambiguity", keys: fixedKeys{err: keys.ErrAmbiguousKey}, token: authtest.Token(t, rs1, nil, authtest.Claims(nil)), want: auth.ReasonUnknownKey},
	}
	runVerifyTests(t, tests)
}

// TestVerifyGroupsCap checks -jwt-max-groups: a token with more groups is
// refused before anything is made of them, whatever their sizes.
func TestVerifyGroupsCap(t *testing.T) {
	k := authtest.NewKey(t, "EdDSA")
	ks := authtest.KeySet(k)
	groups := func(n int) []string {
		g := make([]string, n)
		for i := range g {
			g[i] = fmt.Sprintf("g%d", i)
		}
		return g
	}
	tok := func(c map[string]any) string { return authtest.Token(t, k, nil, authtest.Claims(c)) }
	nested := auth.Config{GroupsClaim: "realm_access.roles"}
	tests := []verifyTest{
		{name: "default cap, 256 groups", keys: ks, token: tok(map[string]any{"groups": groups(256)})},
		{name: "default cap, 257 groups", keys: ks, token: tok(map[string]any{"groups": groups(257)}), want: auth.ReasonTooManyGroups},
		{name: "cap 3, 3 groups", opts: auth.Options{MaxGroups: 3}, keys: ks, token: tok(map[string]any{"groups": groups(3)})},
		{name: "cap 3, 4 groups", opts: auth.Options{MaxGroups: 3}, keys: ks, token: tok(map[string]any{"groups": groups(4)}), want: auth.ReasonTooManyGroups},
		{name: "cap 3, 4 groups of which 2 repeat", opts: auth.Options{MaxGroups: 3}, keys: ks, token: tok(map[string]any{"groups": []string{"a", "a", "b", "b"}}), want: auth.ReasonTooManyGroups},
		{name: "cap 3, nested claim", opts: auth.Options{MaxGroups: 3}, cfg: nested, keys: ks, token: tok(map[string]any{"realm_access": map[string]any{"roles": groups(4)}}), want: auth.ReasonTooManyGroups},
		{name: "cap 1, one group as a string", opts: auth.Options{MaxGroups: 1}, keys: ks, token: tok(map[string]any{"groups": "one"})},
		{name: "cap applies to the groups claim only", opts: auth.Options{MaxGroups: 1}, keys: ks, token: tok(map[string]any{"groups": []string{"a"}, "roles": groups(50)})},
	}
	runVerifyTests(t, tests)
}

// TestVerifyNumericDates checks the range of exp, nbf and iat: a JSON
// number from 0 to 253402300799, or the token is invalid.
func TestVerifyNumericDates(t *testing.T) {
	k := authtest.NewKey(t, "ES256")
	ks := authtest.KeySet(k)
	tok := func(c map[string]any) string { return authtest.Token(t, k, nil, authtest.Claims(c)) }
	var tests []verifyTest
	for _, claim := range []string{"exp", "nbf", "iat"} {
		for _, v := range []any{1e19, 1e30, 9.223372036854775e18, -1, -1e19, 253402300800, "1700000000", true, []int{1}} {
			tests = append(tests, verifyTest{name: fmt.Sprintf("%s %v", claim, v), keys: ks, token: tok(map[string]any{claim: v}), want: auth.ReasonClaims})
		}
	}
	tests = append(tests,
		verifyTest{name: "exp 253402300799", keys: ks, token: tok(map[string]any{"exp": 253402300799})},
		verifyTest{name: "nbf 0", keys: ks, token: tok(map[string]any{"nbf": 0})},
		verifyTest{name: "iat 0", keys: ks, token: tok(map[string]any{"iat": 0})},
		verifyTest{name: "fractional times", keys: ks, token: tok(map[string]any{"iat": 1700000000.5, "nbf": 1700000000.25})},
		verifyTest{name: "nbf far in the future but in range", keys: ks, token: tok(map[string]any{"nbf": 253402300000}), want: auth.ReasonNotYetValid},
		verifyTest{name: "iat far in the future but in range", keys: ks, token: tok(map[string]any{"iat": 253402300000}), want: auth.ReasonNotYetValid},
	)
	runVerifyTests(t, tests)
}

func TestVerifyTimes(t *testing.T) {
	k := authtest.NewKey(t, "ES256")
	ks := authtest.KeySet(k)
	// Offsets are far from the leeway edges, so the test does not depend
	// on how long it runs.
	leeway := auth.Options{Leeway: 2 * time.Minute}
	now := time.Now()
	at := func(d time.Duration) int64 { return now.Add(d).Unix() }

	tests := []verifyTest{
		{name: "all in range", opts: leeway, keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(map[string]any{"nbf": at(-time.Minute)}))},
		{name: "exp missing", opts: leeway, keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(map[string]any{"exp": nil})), want: auth.ReasonMissingExp},
		{name: "exp zero", opts: leeway, keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(map[string]any{"exp": 0})), want: auth.ReasonExpired},
		{name: "exp past inside leeway", opts: leeway, keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(map[string]any{"exp": at(-time.Minute)}))},
		{name: "exp past beyond leeway", opts: leeway, keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(map[string]any{"exp": at(-3 * time.Minute)})), want: auth.ReasonExpired},
		{name: "exp past, no leeway", keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(map[string]any{"exp": at(-time.Minute)})), want: auth.ReasonExpired},
		{name: "exp a string", opts: leeway, keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(map[string]any{"exp": "tomorrow"})), want: auth.ReasonClaims},
		{name: "nbf future inside leeway", opts: leeway, keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(map[string]any{"nbf": at(time.Minute)}))},
		{name: "nbf future beyond leeway", opts: leeway, keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(map[string]any{"nbf": at(3 * time.Minute)})), want: auth.ReasonNotYetValid},
		{name: "nbf future, no leeway", keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(map[string]any{"nbf": at(time.Minute)})), want: auth.ReasonNotYetValid},
		{name: "iat missing", opts: leeway, keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(map[string]any{"iat": nil}))},
		{name: "iat future inside leeway", opts: leeway, keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(map[string]any{"iat": at(time.Minute)}))},
		{name: "iat future beyond leeway", opts: leeway, keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(map[string]any{"iat": at(3 * time.Minute)})), want: auth.ReasonNotYetValid},
		{name: "iat future, no leeway", keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(map[string]any{"iat": at(time.Minute)})), want: auth.ReasonNotYetValid},
		{name: "iat a string", opts: leeway, keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(map[string]any{"iat": "now"})), want: auth.ReasonClaims},
	}
	runVerifyTests(t, tests)
}

func TestVerifyIssuerAudience(t *testing.T) {
	k := authtest.NewKey(t, "RS256")
	ks := authtest.KeySet(k)
	iss := auth.Config{Issuer: "https://idp.example.com"}
	aud := auth.Config{Audiences: []string{"plantstore", "plants-api"}}
	tok := func(over map[string]any) string { return authtest.Token(t, k, nil, authtest.Claims(over)) }

	tests := []verifyTest{
		{name: "iss equal", cfg: iss, keys: ks, token: tok(map[string]any{"iss": "https://idp.example.com"})},
		{name: "iss other", cfg: iss, keys: ks, token: tok(map[string]any{"iss": "https://evil.example.com"}), want: auth.ReasonIssuer},
		{name: "iss with trailing slash", cfg: iss, keys: ks, token: tok(map[string]any{"iss": "https://idp.example.com/"}), want: auth.ReasonIssuer},
		{name: "iss missing", cfg: iss, keys: ks, token: tok(nil), want: auth.ReasonIssuer},
		{name: "iss empty", cfg: iss, keys: ks, token: tok(map[string]any{"iss": ""}), want: auth.ReasonIssuer},
		{name: "iss not a string", cfg: iss, keys: ks, token: tok(map[string]any{"iss": 1}), want: auth.ReasonClaims},
		{name: "iss not configured", keys: ks, token: tok(map[string]any{"iss": "https://anyone.example.com"})},
		{name: "aud string", cfg: aud, keys: ks, token: tok(map[string]any{"aud": "plantstore"})},
		{name: "aud string, second configured", cfg: aud, keys: ks, token: tok(map[string]any{"aud": "plants-api"})},
		{name: "aud array containing one", cfg: aud, keys: ks, token: tok(map[string]any{"aud": []string{"other", "plants-api"}})},
		{name: "aud string other", cfg: aud, keys: ks, token: tok(map[string]any{"aud": "other"}), want: auth.ReasonAudience},
		{name: "aud array without one", cfg: aud, keys: ks, token: tok(map[string]any{"aud": []string{"a", "b"}}), want: auth.ReasonAudience},
		{name: "aud missing", cfg: aud, keys: ks, token: tok(nil), want: auth.ReasonAudience},
		{name: "aud empty array", cfg: aud, keys: ks, token: tok(map[string]any{"aud": []string{}}), want: auth.ReasonAudience},
		{name: "aud array with a number", cfg: aud, keys: ks, token: tok(map[string]any{"aud": []any{"plantstore", 5}}), want: auth.ReasonClaims},
		{name: "aud not configured", keys: ks, token: tok(map[string]any{"aud": "whatever"})},
		{name: "iss and aud both wrong", cfg: auth.Config{Issuer: "https://idp.example.com", Audiences: []string{"plantstore"}}, keys: ks, token: tok(map[string]any{"iss": "x", "aud": "y"}), want: auth.ReasonIssuer},
		{name: "iss right, aud missing", cfg: auth.Config{Issuer: "https://idp.example.com", Audiences: []string{"plantstore"}}, keys: ks, token: tok(map[string]any{"iss": "https://idp.example.com"}), want: auth.ReasonAudience},
	}
	runVerifyTests(t, tests)
}

func TestVerifySubject(t *testing.T) {
	k := authtest.NewKey(t, "EdDSA")
	ks := authtest.KeySet(k)
	tests := []verifyTest{
		{name: "sub present", keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(nil)), wantID: &auth.Identity{Subject: "alice"}},
		{name: "sub missing", keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(map[string]any{"sub": nil})), want: auth.ReasonNoSubject},
		{name: "sub empty", keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(map[string]any{"sub": ""})), want: auth.ReasonNoSubject},
		{name: "sub a number", keys: ks, token: authtest.Token(t, k, nil, authtest.Claims(map[string]any{"sub": 42})), want: auth.ReasonClaims},
		{name: "sub null", keys: ks, token: rawSubNull(t, k), want: auth.ReasonNoSubject},
	}
	runVerifyTests(t, tests)
}

// rawSubNull returns a token signed by k whose sub is JSON null.
func rawSubNull(t *testing.T, k authtest.Key) string {
	t.Helper()
	payload, err := json.Marshal(authtest.Claims(nil))
	if err != nil {
		t.Fatal(err)
	}
	payload = []byte(strings.Replace(string(payload), `"sub":"alice"`, `"sub":null`, 1))
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA","kid":"` + k.Verify.ID + `"}`))
	unsigned := header + "." + base64.RawURLEncoding.EncodeToString(payload)
	sig, err := jwt.GetSigningMethod(k.Alg).Sign(unsigned, k.Private)
	if err != nil {
		t.Fatal(err)
	}
	return unsigned + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func TestVerifyGroups(t *testing.T) {
	k := authtest.NewKey(t, "ES256")
	ks := authtest.KeySet(k)
	realm := auth.Config{GroupsClaim: "realm_access.roles"}
	tok := func(over map[string]any) string { return authtest.Token(t, k, nil, authtest.Claims(over)) }
	id := func(groups ...string) *auth.Identity { return &auth.Identity{Subject: "alice", Groups: groups} }

	tests := []verifyTest{
		{name: "groups array", keys: ks, token: tok(map[string]any{"groups": []string{"gardeners", "staff"}}), wantID: id("gardeners", "staff")},
		{name: "groups single string", keys: ks, token: tok(map[string]any{"groups": "gardeners"}), wantID: id("gardeners")},
		{name: "groups repeated and empty values dropped", keys: ks, token: tok(map[string]any{"groups": []string{"a", "", "a", "b"}}), wantID: id("a", "b")},
		{name: "groups missing", keys: ks, token: tok(nil), wantID: id()},
		{name: "groups empty array", keys: ks, token: tok(map[string]any{"groups": []string{}}), wantID: id()},
		{name: "groups a number", keys: ks, token: tok(map[string]any{"groups": 3}), want: auth.ReasonClaims},
		{name: "groups an object", keys: ks, token: tok(map[string]any{"groups": map[string]any{"a": "b"}}), want: auth.ReasonClaims},
		{name: "groups array with a number", keys: ks, token: tok(map[string]any{"groups": []any{"a", 1}}), want: auth.ReasonClaims},
		{name: "groups array with an array", keys: ks, token: tok(map[string]any{"groups": []any{[]string{"a"}}}), want: auth.ReasonClaims},
		{name: "dotted path", cfg: realm, keys: ks, token: tok(map[string]any{"realm_access": map[string]any{"roles": []string{"admin", "gardeners"}}}), wantID: id("admin", "gardeners")},
		{name: "dotted path single string", cfg: realm, keys: ks, token: tok(map[string]any{"realm_access": map[string]any{"roles": "admin"}}), wantID: id("admin")},
		{name: "dotted path ignores top-level groups", cfg: realm, keys: ks, token: tok(map[string]any{"groups": []string{"x"}}), wantID: id()},
		{name: "dotted path, leaf missing", cfg: realm, keys: ks, token: tok(map[string]any{"realm_access": map[string]any{}}), wantID: id()},
		{name: "dotted path, parent not an object", cfg: realm, keys: ks, token: tok(map[string]any{"realm_access": "roles"}), want: auth.ReasonClaims},
		{name: "dotted path, leaf a number", cfg: realm, keys: ks, token: tok(map[string]any{"realm_access": map[string]any{"roles": 1}}), want: auth.ReasonClaims},
		{name: "claim name with dots", cfg: auth.Config{GroupsClaim: "https://plantstore.example/groups"}, keys: ks, token: tok(map[string]any{"https://plantstore.example/groups": []string{"ns"}}), wantID: id("ns")},
	}
	runVerifyTests(t, tests)
}

func TestVerifyScope(t *testing.T) {
	k := authtest.NewKey(t, "RS256")
	ks := authtest.KeySet(k)
	required := auth.Config{RequiredScope: "plants:read"}
	tok := func(over map[string]any) string { return authtest.Token(t, k, nil, authtest.Claims(over)) }
	id := func(scopes ...string) *auth.Identity { return &auth.Identity{Subject: "alice", Scopes: scopes} }

	tests := []verifyTest{
		{name: "scope string", keys: ks, token: tok(map[string]any{"scope": "openid plants:read"}), wantID: id("openid", "plants:read")},
		{name: "scp array", keys: ks, token: tok(map[string]any{"scp": []string{"openid", "plants:read"}}), wantID: id("openid", "plants:read")},
		{name: "scp string", keys: ks, token: tok(map[string]any{"scp": "plants:read email"}), wantID: id("plants:read", "email")},
		{name: "scope and scp united", keys: ks, token: tok(map[string]any{"scope": "openid email", "scp": []string{"email", "plants:read"}}), wantID: id("openid", "email", "plants:read")},
		{name: "no scope", keys: ks, token: tok(nil), wantID: id()},
		{name: "scope a number", keys: ks, token: tok(map[string]any{"scope": 1}), want: auth.ReasonClaims},
		{name: "scp array with an object", keys: ks, token: tok(map[string]any{"scp": []any{map[string]any{}}}), want: auth.ReasonClaims},
		{name: "required in scope", cfg: required, keys: ks, token: tok(map[string]any{"scope": "openid plants:read"})},
		{name: "required in scp array", cfg: required, keys: ks, token: tok(map[string]any{"scp": []string{"plants:read"}})},
		{name: "required in scp string", cfg: required, keys: ks, token: tok(map[string]any{"scp": "plants:read"})},
		{name: "required missing", cfg: required, keys: ks, token: tok(map[string]any{"scope": "openid plants:write"}), want: auth.ReasonScope},
		{name: "required prefix only", cfg: required, keys: ks, token: tok(map[string]any{"scope": "plants:readonly"}), want: auth.ReasonScope},
		{name: "required, no scope claim", cfg: required, keys: ks, token: tok(nil), want: auth.ReasonScope},
		{name: "required, but token expired", cfg: required, keys: ks, token: tok(map[string]any{"exp": time.Now().Add(-time.Hour).Unix()}), want: auth.ReasonExpired},
		// RFC 6749 §3.3: scope-token separated by %x20 only.
		{name: "split at spaces only, several in a row", keys: ks, token: tok(map[string]any{"scope": "  openid   plants:read "}), wantID: id("openid", "plants:read")},
		{name: "no-break space is not a separator", cfg: required, keys: ks, token: tok(map[string]any{"scope": "a\u00a0plants:read"}), want: auth.ReasonScope},
		{name: "tab is not a separator", cfg: required, keys: ks, token: tok(map[string]any{"scope": "a\tplants:read"}), want: auth.ReasonScope},
		{name: "newline is not a separator", cfg: required, keys: ks, token: tok(map[string]any{"scp": "a\nplants:read"}), want: auth.ReasonScope},
		{name: "ideographic space is not a separator", keys: ks, token: tok(map[string]any{"scope": "a\u3000b c"}), wantID: id("a\u3000b", "c")},
	}
	runVerifyTests(t, tests)

	t.Run("403 error", func(t *testing.T) {
		v := newVerifier(t, required, ks)
		_, err := v.Verify(t.Context(), tok(map[string]any{"scope": "openid"}))
		var ae *auth.Error
		if !errors.As(err, &ae) {
			t.Fatalf("Verify() error = %v; want *auth.Error", err)
		}
		want := auth.Error{Status: http.StatusForbidden, Code: "insufficient_scope", Reason: auth.ReasonScope, Scope: "plants:read", Subject: "alice"}
		if got := (auth.Error{Status: ae.Status, Code: ae.Code, Reason: ae.Reason, Scope: ae.Scope, Subject: ae.Subject, Issuer: ae.Issuer}); got != want {
			t.Errorf("Verify() error = %+v; want %+v", got, want)
		}
	})
}

func TestVerifyMalformed(t *testing.T) {
	k := authtest.NewKey(t, "HS256")
	ks := authtest.KeySet(k)
	good := authtest.Token(t, k, nil, authtest.Claims(nil))
	parts := strings.Split(good, ".")
	enc := base64.RawURLEncoding.EncodeToString
	header := parts[0]

	tests := []verifyTest{
		{name: "good", keys: ks, token: good},
		{name: "empty", keys: ks, token: "", want: auth.ReasonMalformed},
		{name: "one part", keys: ks, token: "abc", want: auth.ReasonMalformed},
		{name: "two parts", keys: ks, token: parts[0] + "." + parts[1], want: auth.ReasonMalformed},
		{name: "four parts", keys: ks, token: good + ".x", want: auth.ReasonMalformed},
		{name: "header not base64", keys: ks, token: "*!." + parts[1] + "." + parts[2], want: auth.ReasonMalformed},
		{name: "header padded base64", keys: ks, token: base64.URLEncoding.EncodeToString([]byte(`{"alg":"HS256","kid":"hmac"}`)) + "." + parts[1] + "." + parts[2], want: auth.ReasonMalformed},
		{name: "header not JSON", keys: ks, token: enc([]byte("alg=HS256")) + "." + parts[1] + "." + parts[2], want: auth.ReasonMalformed},
		{name: "header a JSON array", keys: ks, token: enc([]byte(`["HS256"]`)) + "." + parts[1] + "." + parts[2], want: auth.ReasonMalformed},
		{name: "claims not base64", keys: ks, token: header + ".%%." + parts[2], want: auth.ReasonMalformed},
		{name: "claims not JSON", keys: ks, token: header + "." + enc([]byte("sub=alice")) + "." + parts[2], want: auth.ReasonMalformed},
		{name: "claims a JSON string", keys: ks, token: header + "." + enc([]byte(`"alice"`)) + "." + parts[2], want: auth.ReasonMalformed},
		{name: "signature not base64", keys: ks, token: parts[0] + "." + parts[1] + ".***", want: auth.ReasonMalformed},
		{name: "signature empty", keys: ks, token: parts[0] + "." + parts[1] + ".", want: auth.ReasonBadSignature},
		{name: "claims changed", keys: ks, token: header + "." + enc([]byte(`{"sub":"mallory","exp":9999999999}`)) + "." + parts[2], want: auth.ReasonBadSignature},
		{name: "over 8 KiB", keys: ks, token: good + strings.Repeat("A", 8<<10), want: auth.ReasonTooLarge},
	}
	runVerifyTests(t, tests)
}

func TestNewVerifier(t *testing.T) {
	rsa := authtest.NewKey(t, "RS256")
	ks := authtest.KeySet(rsa, authtest.NewKey(t, "EdDSA"), authtest.NewKey(t, "HS256"))
	hmacOnly := authtest.KeySet(authtest.NewKey(t, "HS256"))
	named := func(name, iss string) auth.Issuer {
		return auth.Issuer{Name: name, Config: auth.Config{Issuer: iss}, JWS: jws.New(ks)}
	}
	jwks, _ := authtest.NewJWKS(t, keys.JWKSOptions{URL: authtest.NewServer(t, authtest.JWKS(t, rsa)).URL})
	tests := []struct {
		name    string
		opts    auth.Options
		issuers []auth.Issuer
		wantErr string // a part of the error; "" for none
	}{
		{name: "zero config", issuers: []auth.Issuer{{JWS: jws.New(ks)}}},
		{name: "full config", opts: auth.Options{Leeway: time.Second, MaxGroups: 10, CacheBytes: 1 << 20}, issuers: []auth.Issuer{{Config: auth.Config{Issuer: "https://idp", Audiences: []string{"a"}, Algorithms: []string{"RS256", "EdDSA"}, GroupsClaim: "realm_access.roles", RequiredScope: "plants:read"}, JWS: jws.New(ks)}}},
		{name: "no issuer", wantErr: "no issuer"},
		{name: "nil keys", issuers: []auth.Issuer{{}}, wantErr: "no key source"},
		{name: "none", issuers: []auth.Issuer{{Config: auth.Config{Algorithms: []string{"RS256", "none"}}, JWS: jws.New(ks)}}, wantErr: `"none"`},
		{name: "None", issuers: []auth.Issuer{{Config: auth.Config{Algorithms: []string{"None"}}, JWS: jws.New(ks)}}, wantErr: `"none"`},
		{name: "unknown alg", issuers: []auth.Issuer{{Config: auth.Config{Algorithms: []string{"HS1"}}, JWS: jws.New(ks)}}, wantErr: `"HS1"`},
		{name: "lower-case alg", issuers: []auth.Issuer{{Config: auth.Config{Algorithms: []string{"rs256"}}, JWS: jws.New(ks)}}, wantErr: `"rs256"`},
		{name: "negative leeway", opts: auth.Options{Leeway: -time.Second}, issuers: []auth.Issuer{{JWS: jws.New(ks)}}, wantErr: "leeway"},
		{name: "negative max groups, the default", opts: auth.Options{MaxGroups: -1}, issuers: []auth.Issuer{{JWS: jws.New(ks)}}},
		{name: "blank audience", issuers: []auth.Issuer{{Config: auth.Config{Audiences: []string{""}}, JWS: jws.New(ks)}}, wantErr: "blank audience"},
		{name: "blank among audiences", issuers: []auth.Issuer{{Config: auth.Config{Audiences: []string{"a", " "}}, JWS: jws.New(ks)}}, wantErr: "blank audience"},
		{name: "empty groups path element", issuers: []auth.Issuer{{Config: auth.Config{GroupsClaim: "realm_access..roles"}, JWS: jws.New(ks)}}, wantErr: "empty path element"},
		{name: "trailing dot in groups path", issuers: []auth.Issuer{{Config: auth.Config{GroupsClaim: "groups."}, JWS: jws.New(ks)}}, wantErr: "empty path element"},
		{name: "scope with a space", issuers: []auth.Issuer{{Config: auth.Config{RequiredScope: "plants read"}, JWS: jws.New(ks)}}, wantErr: "scope"},
		{name: "scope with a quote", issuers: []auth.Issuer{{Config: auth.Config{RequiredScope: `plants"`}, JWS: jws.New(ks)}}, wantErr: "scope"},
		{name: "scope with a backslash", issuers: []auth.Issuer{{Config: auth.Config{RequiredScope: `plants\`}, JWS: jws.New(ks)}}, wantErr: "scope"},
		{name: "static ks that fit no allowed algorithm", issuers: []auth.Issuer{{Config: auth.Config{Algorithms: []string{"RS256", "ES256"}}, JWS: jws.New(hmacOnly)}}, wantErr: "no key for the allowed algorithms RS256,ES256"},
		{name: "one of two static sources fits nothing", issuers: []auth.Issuer{{Config: auth.Config{Algorithms: []string{"RS256"}}, JWS: jws.New(keys.Combine(authtest.KeySet(rsa), hmacOnly))}}, wantErr: "no key for the allowed algorithms RS256"},
		{name: "empty static key set", issuers: []auth.Issuer{{JWS: jws.New(keys.NewKeySet(nil))}}, wantErr: "no key for the allowed algorithms"},
		{name: "two named issuers", issuers: []auth.Issuer{named("staff", "https://a"), named("customers", "https://b")}},
		{name: "unnamed with named", issuers: []auth.Issuer{{JWS: jws.New(ks)}, named("staff", "https://a")}, wantErr: "unnamed"},
		{name: "repeated name", issuers: []auth.Issuer{named("staff", "https://a"), named("staff", "https://b")}, wantErr: "twice"},
		{name: "repeated iss", issuers: []auth.Issuer{named("staff", "https://a"), named("customers", "https://a")}, wantErr: `iss "https://a" is also that of issuer staff`},
		{name: "reserved name default", issuers: []auth.Issuer{named("default", "https://a")}, wantErr: "reserved"},
		{name: "reserved name unknown", issuers: []auth.Issuer{named("staff", "https://a"), named("unknown", "https://b")}, wantErr: "reserved"},
		{name: "iss URL with user information", issuers: []auth.Issuer{{Config: auth.Config{Issuer: "https://user:pw@idp.example/r"}, JWS: jws.New(ks)}}, wantErr: "without user information or query"},
		{name: "iss URL with a query", issuers: []auth.Issuer{named("staff", "https://idp.example/r?tenant=1")}, wantErr: "without user information or query"},
		{name: "iss URL with an empty query", issuers: []auth.Issuer{named("staff", "https://idp.example/r?")}, wantErr: "without user information or query"},
		{name: "iss URL of an OpenID discovery document", issuers: []auth.Issuer{named("staff", "https://idp.example/r/.well-known/openid-configuration")}, wantErr: "use https://idp.example/r (the document's"},
		{name: "iss URL of an OAuth metadata document", issuers: []auth.Issuer{{Config: auth.Config{Issuer: "https://idp.example/.well-known/oauth-authorization-server"}, JWS: jws.New(ks)}}, wantErr: "use https://idp.example (the document's"},
		{name: "iss URL of an RFC 8414 document with a path", issuers: []auth.Issuer{named("staff", "https://idp.example/.well-known/oauth-authorization-server/tenant/")}, wantErr: "use https://idp.example/tenant (the document's"},
		{name: "iss that is no URL", issuers: []auth.Issuer{{Config: auth.Config{Issuer: "plantstore?"}, JWS: jws.New(ks)}}},
		{name: "named without iss", issuers: []auth.Issuer{named("staff", "")}, wantErr: "no iss"},
		{name: "bad name", issuers: []auth.Issuer{named("Staff", "https://a")}, wantErr: "issuer name"},
		{name: "name too long", issuers: []auth.Issuer{named(strings.Repeat("a", 33), "https://a")}, wantErr: "issuer name"},
		{name: "token types", issuers: []auth.Issuer{{Config: auth.Config{TokenTypes: []string{"AT+JWT", "application/jwt"}}, JWS: jws.New(ks)}}},
		{name: "token types any", issuers: []auth.Issuer{{Config: auth.Config{TokenTypes: []string{"any"}}, JWS: jws.New(ks)}}},
		{name: "token types any and at+jwt", issuers: []auth.Issuer{{Config: auth.Config{TokenTypes: []string{"any", "at+jwt"}}, JWS: jws.New(ks)}}, wantErr: "token_types: any already takes at+jwt"},
		{name: "token type of a DPoP proof", issuers: []auth.Issuer{{Config: auth.Config{TokenTypes: []string{"at+jwt", "dpop+jwt"}}, JWS: jws.New(ks)}}, wantErr: `token_types: "dpop+jwt" names another kind of JWT`},
		{name: "token type JOSE", issuers: []auth.Issuer{{Config: auth.Config{TokenTypes: []string{"JOSE"}}, JWS: jws.New(ks)}}, wantErr: `token_types: unknown token type "JOSE"`},
		{name: "blank client", issuers: []auth.Issuer{{Config: auth.Config{Clients: []string{"web", " "}}, JWS: jws.New(ks)}}, wantErr: "clients: blank client"},
		{name: "negative max lifetime", issuers: []auth.Issuer{{Config: auth.Config{MaxLifetime: -time.Second}, JWS: jws.New(ks)}}, wantErr: "max_lifetime: negative"},
		{name: "negative max stale", issuers: []auth.Issuer{{Config: auth.Config{MaxStale: -time.Second}, JWS: jws.New(ks)}}, wantErr: "max_stale: negative"},
		{name: "max stale of fetched keys", issuers: []auth.Issuer{{Config: auth.Config{MaxStale: time.Hour}, JWS: jws.New(keys.Combine(ks, jwks))}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := auth.NewVerifier(tt.opts, tt.issuers...)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("NewVerifier(%+v, %+v) = %v, %v; want error %q", tt.opts, tt.issuers, v, err, tt.wantErr)
			}
		})
	}
}

func TestVerifierIssuers(t *testing.T) {
	ks := authtest.KeySet(authtest.NewKey(t, "EdDSA"), authtest.NewKey(t, "ES256"))
	tests := []struct {
		name       string
		cfg        auth.Config
		wantAlgs   []string
		wantGroups string
		wantTypes  []string
	}{
		{name: "defaults", cfg: auth.Config{}, wantAlgs: auth.DefaultAlgorithms(), wantGroups: "groups"},
		{name: "given", cfg: auth.Config{Algorithms: []string{"EdDSA", "ES256", "EdDSA"}, GroupsClaim: "realm_access.roles"}, wantAlgs: []string{"EdDSA", "ES256"}, wantGroups: "realm_access.roles"},
		{name: "token types as compared", cfg: auth.Config{TokenTypes: []string{"AT+JWT", "application/at+jwt", " JWT"}}, wantAlgs: auth.DefaultAlgorithms(), wantGroups: "groups", wantTypes: []string{"at+jwt", "jwt"}},
		{name: "token types any", cfg: auth.Config{TokenTypes: []string{"Any"}}, wantAlgs: auth.DefaultAlgorithms(), wantGroups: "groups"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := newVerifier(t, tt.cfg, ks).Issuers()[0].Config
			if !slices.Equal(got.Algorithms, tt.wantAlgs) || got.GroupsClaim != tt.wantGroups || !slices.Equal(got.TokenTypes, tt.wantTypes) {
				t.Errorf("NewVerifier(%+v).Issuers()[0].Config = %+v; want Algorithms %v, GroupsClaim %q, TokenTypes %q", tt.cfg, got, tt.wantAlgs, tt.wantGroups, tt.wantTypes)
			}
		})
	}
	t.Run("none is not a default", func(t *testing.T) {
		for _, a := range auth.DefaultAlgorithms() {
			if strings.EqualFold(a, "none") {
				t.Errorf("DefaultAlgorithms() contains %q", a)
			}
		}
	})
}

func BenchmarkVerify(b *testing.B) {
	for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
		b.Run(alg, func(b *testing.B) {
			k := authtest.NewKey(b, alg)
			v := newVerifier(b, auth.Config{
				Issuer:      "https://idp.example.com",
				Audiences:   []string{"plantstore"},
				GroupsClaim: "realm_access.roles",
			}, authtest.KeySet(k, authtest.NewKey(b, alg)))
			token := authtest.Token(b, k, nil, authtest.Claims(map[string]any{
				"iss":          "https://idp.example.com",
				"aud":          "plantstore",
				"exp":          time.Now().Add(time.Hour).Unix(),
				"scope":        "openid plants:read",
				"realm_access": map[string]any{"roles": []string{"gardeners", "staff"}},
			}))
			ctx := b.Context()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(ctx, token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestConfigTokenType: a token made for an issuer carries a type it takes.
func TestConfigTokenType(t *testing.T) {
	for _, tt := range []struct {
		types []string
		want  string
	}{
		{nil, "at+jwt"},
		{[]string{"any"}, "at+jwt"},
		{[]string{"jwt", "application/AT+JWT"}, "at+jwt"},
		{[]string{"JWT"}, "JWT"},
	} {
		got, _, err := auth.Config{TokenTypes: tt.types}.Token("alice", nil, time.Now(), time.Minute)
		if err != nil || got != tt.want {
			t.Errorf("Config{TokenTypes: %q}.Token's typ = %q, %v; want %q", tt.types, got, err, tt.want)
		}
	}
}
