package keys_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"testing"

	"github.com/MicahParks/jwkset"

	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/keys"
)

func mustB64Int(t testing.TB, s string) *big.Int {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return new(big.Int).SetBytes(b)
}

// jwksetThumbprint computes the RFC 7638 thumbprint of pub independently of
// keys.Thumbprint: the required members come from jwkset's JWK encoding.
func jwksetThumbprint(t testing.TB, pub any) string {
	t.Helper()
	j, err := jwkset.NewJWKFromKey(pub, jwkset.JWKOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := j.Marshal()
	var members map[string]string
	switch m.KTY {
	case jwkset.KtyEC:
		members = map[string]string{"crv": string(m.CRV), "kty": "EC", "x": m.X, "y": m.Y}
	case jwkset.KtyOKP:
		members = map[string]string{"crv": string(m.CRV), "kty": "OKP", "x": m.X}
	case jwkset.KtyRSA:
		members = map[string]string{"e": m.E, "kty": "RSA", "n": m.N}
	}
	// encoding/json writes map keys sorted and without spaces, which is
	// the RFC 7638 canonical form for these members.
	canon, err := json.Marshal(members)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canon)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func TestThumbprint(t *testing.T) {
	// RFC 7638 section 3.1.
	rfc7638 := &rsa.PublicKey{
		N: mustB64Int(t, "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"),
		E: 65537,
	}
	// RFC 8037 appendix A.3.
	rfc8037, err := base64.RawURLEncoding.DecodeString("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
	if err != nil {
		t.Fatal(err)
	}

	tests := []thumbprintTest{
		{name: "RFC 7638 RSA example", pub: rfc7638, want: "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"},
		{name: "RFC 8037 Ed25519 example", pub: ed25519.PublicKey(rfc8037), want: "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"},
		{name: "HMAC secret", pub: []byte("secret"), wantErr: true},
		{name: "private key", pub: authtest.NewKey(t, "EdDSA").Private, wantErr: true},
	}
	for _, curve := range []elliptic.Curve{elliptic.P256(), elliptic.P384(), elliptic.P521()} {
		// Several keys per curve, so that short coordinates (leading zero
		// bytes, which must be kept) turn up now and then.
		for range 8 {
			k, err := ecdsa.GenerateKey(curve, rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			tests = append(tests, jwksetRow(t, curve.Params().Name, &k.PublicKey))
		}
	}
	rk := authtest.NewKey(t, "RS256").Verify.Public
	tests = append(tests, jwksetRow(t, "RSA 2048", rk))

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := keys.Thumbprint(tt.pub)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("Thumbprint(%T) = %q, %v; want %q, error %t", tt.pub, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

type thumbprintTest struct {
	name    string
	pub     any
	want    string
	wantErr bool
}

// jwksetRow is a row whose expected thumbprint jwkset's encoding gives.
func jwksetRow(t testing.TB, name string, pub any) thumbprintTest {
	t.Helper()
	return thumbprintTest{name: name + " against jwkset", pub: pub, want: jwksetThumbprint(t, pub)}
}
