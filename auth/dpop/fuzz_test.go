package dpop

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/plantstore/plantstore/auth/keys"
)

// FuzzDPoPProof feeds any string to the DPoP proof checks (Parse,
// then the signature). They must never panic, and may accept a proof only
// when the proof's own bytes, read with encoding/json apart, say what RFC
// 9449 §4.3 asks: typ dpop+jwt, an allowed alg, no crit, a jwk that the
// key file (the JWKS decoder) takes and whose thumbprint is the token's
// cnf.jkt, htm and htu of the request, ath of the token, an iat in the
// window. With server nonces, the same string must get the same refusal
// (the nonce is checked last), and a proof that passes without them must
// pass with them exactly when its nonce claim, read with encoding/json,
// is one issued within the lifetime, and be refused with NeedsNonce
// otherwise.
func FuzzDPoPProof(f *testing.F) {
	d := sha256.Sum256([]byte("plantstore fuzz DPoP"))
	key, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d[:])
	if err != nil {
		f.Fatal(err)
	}
	jkt, err := keys.Thumbprint(&key.PublicKey)
	if err != nil {
		f.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	const token, uri = "eyJhbGciOiJFUzI1NiJ9.e30.c2ln", "https://api.example/plants"
	sum := sha256.Sum256([]byte(token))
	ath := base64.RawURLEncoding.EncodeToString(sum[:])
	req := Request{Method: "GET", URI: uri, ATH: ath, JKT: jkt, Algorithms: DefaultAlgorithms(), Now: now, Window: time.Minute, Leeway: 5 * time.Second}
	// The uncompressed point: 0x04, then X and Y of 32 bytes each.
	point, err := key.PublicKey.Bytes()
	if err != nil {
		f.Fatal(err)
	}
	jwk := map[string]any{
		"kty": "EC", "crv": "P-256",
		"x": base64.RawURLEncoding.EncodeToString(point[1:33]),
		"y": base64.RawURLEncoding.EncodeToString(point[33:]),
	}
	sign := func(header map[string]any, claims jwt.MapClaims) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
		for k, v := range header {
			tok.Header[k] = v
		}
		s, err := tok.SignedString(key)
		if err != nil {
			f.Fatal(err)
		}
		return s
	}
	good := jwt.MapClaims{"jti": "j1", "htm": "GET", "htu": uri, "iat": now.Unix(), "ath": ath}
	keyFile := filepath.Join(f.TempDir(), "nonce.key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("n", minNonceKey)), 0o600); err != nil {
		f.Fatal(err)
	}
	nonces, err := LoadNonces(keyFile, 4*time.Minute)
	if err != nil {
		f.Fatal(err)
	}
	nonceReq := req
	nonceReq.Nonces = nonces
	// The nonces accepted now: of this step, the three before it and the
	// one after it.
	var accepted []string
	for k := -3; k <= 1; k++ {
		accepted = append(accepted, nonces.Issue(now.Add(time.Duration(k)*time.Minute)))
	}
	f.Add(sign(map[string]any{"typ": "dpop+jwt", "jwk": jwk}, jwt.MapClaims{"jti": "j3", "htm": "GET", "htu": uri, "iat": now.Unix(), "ath": ath, "nonce": accepted[3]}))
	f.Add(sign(map[string]any{"typ": "dpop+jwt", "jwk": jwk}, jwt.MapClaims{"jti": "j4", "htm": "GET", "htu": uri, "iat": now.Unix(), "ath": ath, "nonce": nonces.Issue(now.Add(-4 * time.Minute))}))
	f.Add(sign(map[string]any{"typ": "dpop+jwt", "jwk": jwk}, good))
	f.Add(sign(map[string]any{"typ": "dpop+jwt", "jwk": jwk}, jwt.MapClaims{"jti": "j2", "htm": "POST", "htu": uri, "iat": now.Unix(), "ath": ath}))
	f.Add(sign(map[string]any{"typ": "JWT", "jwk": jwk}, good))
	f.Add(sign(map[string]any{"typ": "dpop+jwt"}, good))
	f.Add(sign(map[string]any{"typ": "dpop+jwt", "jwk": jwk, "crit": []string{"exp"}}, good))
	f.Add(sign(map[string]any{"typ": "dpop+jwt", "jwk": map[string]any{"kty": "EC", "crv": "P-256", "x": jwk["x"], "Y": jwk["y"]}}, good))
	f.Add("eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6Im5vbmUifQ.e30.")
	f.Add("")
	f.Fuzz(func(t *testing.T, proof string) {
		p, perr := Parse(proof, &req)
		_, nerr := Parse(proof, &nonceReq)
		switch {
		case perr != 0 && nerr != perr:
			t.Fatalf("Parse(%q) refused %v without nonces, %v with them: want the same refusal", proof, perr, nerr)
		case perr == 0 && nerr != 0 && nerr != NeedsNonce:
			t.Fatalf("Parse(%q) with nonces refused %v: want %v", proof, nerr, NeedsNonce)
		case perr == 0:
			var members map[string]json.RawMessage
			var nonce string
			cseg := strings.Split(proof, ".")[1]
			cb, _ := base64.RawURLEncoding.DecodeString(cseg)
			has := json.Unmarshal(cb, &members) == nil && members["nonce"] != nil && json.Unmarshal(members["nonce"], &nonce) == nil
			if want := has && slices.Contains(accepted, nonce); want != (nerr == 0) {
				t.Fatalf("Parse(%q) with nonces: %v; the nonce claim %q is accepted: %v", proof, nerr, members["nonce"], want)
			}
		}
		if perr != 0 {
			if !slices.Contains([]Problem{Invalid, WrongKey, WrongTarget, WrongToken, OutOfWindow}, perr) {
				t.Fatalf("Parse(%q) refusal %v: want the problem of a proof's own checks", proof, perr)
			}
			return
		}
		if !p.Verify() {
			return
		}
		iat := p.iat
		parts := strings.Split(proof, ".")
		if len(parts) != 3 {
			t.Fatalf("accepted %q, not three segments", proof)
		}
		var header struct {
			Typ string          `json:"typ"`
			Alg string          `json:"alg"`
			JWK json.RawMessage `json:"jwk"`
		}
		var claims struct {
			HTM, HTU, ATH string
			JTI           string
			IAT           float64
		}
		hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
		cb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
		var members map[string]json.RawMessage
		if err1 != nil || err2 != nil || json.Unmarshal(hb, &header) != nil || json.Unmarshal(cb, &claims) != nil || json.Unmarshal(hb, &members) != nil {
			t.Fatalf("accepted %q, whose segments do not decode", proof)
		}
		if _, ok := members["crit"]; ok {
			t.Fatalf("accepted %q with a crit header", proof)
		}
		k, err := keyOfJWK(t, header.JWK, header.Alg)
		if err != nil {
			t.Fatalf("accepted %q with a jwk that a key file could not hold: %v", proof, err)
		}
		tp, err := keys.Thumbprint(k.Public)
		switch {
		case err != nil || tp != jkt:
			t.Fatalf("accepted %q with a jwk of thumbprint %q, want %q", proof, tp, jkt)
		case !strings.EqualFold(header.Typ, "dpop+jwt"):
			t.Fatalf("accepted %q with typ %q", proof, header.Typ)
		case !strings.Contains(" "+strings.Join(DefaultAlgorithms(), " ")+" ", " "+header.Alg+" "):
			t.Fatalf("accepted %q with alg %q", proof, header.Alg)
		case claims.HTM != "GET" || claims.ATH != ath || claims.JTI == "":
			t.Fatalf("accepted %q with claims %+v", proof, claims)
		case iat.Before(now.Add(-time.Minute-5*time.Second)) || iat.After(now.Add(5*time.Second)):
			t.Fatalf("accepted %q with iat %v", proof, iat)
		}
		if n, ok := normalizeHTU(claims.HTU); !ok || n != uri {
			t.Fatalf("accepted %q with htu %q", proof, claims.HTU)
		}
	})
}

// keyOfJWK reads raw as the one key of a key file, by the rules a JWKS is
// read by (keys.LoadKeyFile), and returns it for alg.
func keyOfJWK(t *testing.T, raw json.RawMessage, alg string) (keys.Key, error) {
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, []byte(`{"keys":[`+string(raw)+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := keys.LoadKeyFile(path, nil)
	if err != nil {
		return keys.Key{}, err
	}
	return f.Key(t.Context(), "", alg)
}
