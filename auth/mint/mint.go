// Package mint makes what the service's clients make: signed access
// tokens (the token command, the -dev banner), DPoP proofs (the proof
// command, tests), and new signing keys with their public JWKS (keygen).
// It verifies nothing; a token it makes meets the rules of an issuer when
// the claims come from that issuer's [auth.Config.Token].
package mint

import (
	"bytes"
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
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/dpop"
	"github.com/plantstore/plantstore/auth/edge"
	"github.com/plantstore/plantstore/auth/keys"
)

// Claims are the claims of a token made by [Mint]. Empty fields are
// left out of the token.
type Claims struct {
	// Subject is the sub claim.
	Subject string
	// Issuer is the iss claim.
	Issuer string
	// Audience is the aud claim: a string when it has one value, an array
	// when it has several.
	Audience []string
	// Groups are the caller's groups, an array at GroupsClaim.
	Groups []string
	// GroupsClaim is where Groups go: a claim name or a dotted path into
	// nested objects ("realm_access.roles"); empty means "groups".
	GroupsClaim string
	// Scope is the scope claim, space-separated.
	Scope string
	// TTL is the token's lifetime: exp is Now plus TTL. It must not be
	// zero; a negative TTL makes a token that has already expired.
	TTL time.Duration
	// NotBefore, when not zero, is the nbf claim.
	NotBefore time.Time
	// BoundTo, when set, is the public key the token is bound to: its RFC
	// 7638 thumbprint goes in cnf.jkt (RFC 9449 §6.1), and the token is
	// accepted only with DPoP proofs signed by the matching private key.
	BoundTo crypto.PublicKey
	// BoundToCert, when set, is the DER of the client certificate the
	// token is bound to: its SHA-256 thumbprint goes in cnf.x5t#S256 (RFC
	// 8705 §3.1), and the token is accepted only with that certificate.
	BoundToCert []byte
	// KeyID is the kid header. Empty means the RFC 7638 thumbprint of the
	// key's public half (see [keys.Thumbprint]); an HMAC token then has no kid.
	KeyID string
	// Now is the iat claim; the zero value means time.Now().
	Now time.Time
	// Type is the typ header; empty means "at+jwt", the type of a JWT
	// access token (RFC 9068 §2.1).
	Type string
	// ClientID, when set, is the client_id claim: the client the token
	// was issued to (RFC 9068 §2.2).
	ClientID string
}

// Mint returns a JWT with the claims c, signed with key using alg. The key
// is an *rsa.PrivateKey (RS256/384/512, PS256/384/512), an
// *ecdsa.PrivateKey (ES256 on P-256, ES384 on P-384, ES512 on P-521), an
// ed25519.PrivateKey (EdDSA), or a non-empty []byte HMAC secret
// (HS256/384/512); any other pairing is an error.
func Mint(key crypto.PrivateKey, alg string, c Claims) (string, error) {
	key, method, err := signer(key, alg)
	if err != nil {
		return "", err
	}
	if c.TTL == 0 {
		return "", errors.New("mint token: ttl is zero (a negative ttl makes an expired token)")
	}
	now := c.Now
	if now.IsZero() {
		now = time.Now()
	}
	// The claims of an issuer's token: sub, iss, aud, the groups at the
	// groups claim, iat and exp, as auth.Config.Token makes them.
	issuer := auth.Config{Issuer: c.Issuer, Audiences: c.Audience, GroupsClaim: c.GroupsClaim}
	_, claims, err := issuer.Token(c.Subject, c.Groups, now, c.TTL)
	if err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	if !c.NotBefore.IsZero() {
		claims["nbf"] = c.NotBefore.Unix()
	}
	if c.BoundTo != nil {
		jkt, err := keys.Thumbprint(c.BoundTo)
		if err != nil {
			return "", fmt.Errorf("mint token: bound key: %w", err)
		}
		claims["cnf"] = map[string]any{"jkt": jkt}
	}
	if c.BoundToCert != nil {
		cnf, _ := claims["cnf"].(map[string]any)
		if cnf == nil {
			cnf = map[string]any{}
			claims["cnf"] = cnf
		}
		cnf["x5t#S256"] = edge.CertificateThumbprint(c.BoundToCert)
	}
	if c.Scope != "" {
		claims["scope"] = c.Scope
	}
	if c.ClientID != "" {
		claims["client_id"] = c.ClientID
	}
	typ := "at+jwt"
	if c.Type != "" {
		typ = c.Type
	}
	return sign(key, method, typ, c.KeyID, jwt.MapClaims(claims))
}

// Sign returns a JWT of claims with the typ header typ (an access token's
// when empty), signed with key using alg (the key's default when empty),
// whose kid is the RFC 7638 thumbprint of the key's public half (none for
// an HMAC secret): a token of the claims an issuer's auth.Config.Token
// asks for. The keys and algorithms are those of [Mint].
func Sign(key crypto.PrivateKey, alg, typ string, claims map[string]any) (string, error) {
	key, method, err := signer(key, alg)
	if err != nil {
		return "", err
	}
	if typ == "" {
		typ = "at+jwt"
	}
	return sign(key, method, typ, "", jwt.MapClaims(claims))
}

// signer returns key in the form golang-jwt signs with, and the method of
// alg (the key's default for ""), or why key cannot sign alg.
func signer(key crypto.PrivateKey, alg string) (crypto.PrivateKey, jwt.SigningMethod, error) {
	key = normalizePrivate(key)
	if alg == "" {
		alg = DefaultAlgorithm(key)
	}
	if err := fitsPrivate(key, alg); err != nil {
		return nil, nil, fmt.Errorf("mint token: %w", err)
	}
	method := signingMethod(alg)
	if method == nil {
		return nil, nil, fmt.Errorf("mint token: unknown algorithm %q", alg)
	}
	return key, method, nil
}

// sign signs claims with key by method, with the typ and kid headers; an
// empty kid is the thumbprint of the key's public half, none for a secret.
func sign(key crypto.PrivateKey, method jwt.SigningMethod, typ, kid string, claims jwt.MapClaims) (string, error) {
	tok := jwt.NewWithClaims(method, claims)
	tok.Header["typ"] = typ
	if kid == "" {
		if s, ok := key.(crypto.Signer); ok {
			tp, err := keys.Thumbprint(s.Public())
			if err != nil {
				return "", fmt.Errorf("mint token: %w", err)
			}
			kid = tp
		}
	}
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	return s, nil
}

// normalizePrivate turns pointer forms of key types into the forms
// golang-jwt signs with.
func normalizePrivate(key crypto.PrivateKey) crypto.PrivateKey {
	if k, ok := key.(*ed25519.PrivateKey); ok && k != nil {
		return *k
	}
	return key
}

// DefaultAlgorithm returns the algorithm a key signs with when none is
// named: RS256 for RSA, ES256/ES384/ES512 by the ECDSA curve, EdDSA for
// Ed25519, HS256 for an HMAC secret, and "" for anything else.
func DefaultAlgorithm(key crypto.PrivateKey) string {
	switch k := normalizePrivate(key).(type) {
	case *rsa.PrivateKey:
		return "RS256"
	case *ecdsa.PrivateKey:
		switch k.Curve.Params().Name {
		case "P-256":
			return "ES256"
		case "P-384":
			return "ES384"
		case "P-521":
			return "ES512"
		}
	case ed25519.PrivateKey:
		return "EdDSA"
	case []byte:
		return "HS256"
	}
	return ""
}

// fitsPrivate reports, as an error, whether key cannot sign alg.
func fitsPrivate(key crypto.PrivateKey, alg string) error {
	ok := false
	switch k := key.(type) {
	case *rsa.PrivateKey:
		ok = keys.Key{Public: &k.PublicKey}.Fits(alg)
	case *ecdsa.PrivateKey:
		ok = keys.Key{Public: &k.PublicKey}.Fits(alg)
	case ed25519.PrivateKey:
		ok = keys.Key{Public: k.Public()}.Fits(alg) && len(k) == ed25519.PrivateKeySize
	case []byte:
		if len(k) == 0 {
			return errors.New("empty HMAC secret")
		}
		ok = keys.Key{Public: k}.Fits(alg)
	default:
		return fmt.Errorf("unsupported key type %T", key)
	}
	if !ok {
		return fmt.Errorf("algorithm %q does not fit a %s key", alg, keyFamily(key))
	}
	return nil
}

// keyFamily names the family of key for error messages.
func keyFamily(key crypto.PrivateKey) string {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return "RSA"
	case *ecdsa.PrivateKey:
		return "ECDSA " + k.Curve.Params().Name
	case ed25519.PrivateKey:
		return "Ed25519"
	case []byte:
		return "HMAC"
	}
	return fmt.Sprintf("%T", key)
}

// GenerateKey returns a new signing key for alg (RS256 for 2048-bit RSA,
// ES256 for ECDSA P-256, EdDSA for Ed25519) and the public JWKS that
// verifies it: one key with its RFC 7638 thumbprint as kid, "alg" and
// "use":"sig".
func GenerateKey(alg string) (priv crypto.Signer, jwks []byte, err error) {
	switch alg {
	case "RS256":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "EdDSA":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, nil, fmt.Errorf("generate key: unsupported algorithm %q (want RS256, ES256 or EdDSA)", alg)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	kid, err := keys.Thumbprint(priv.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	jwk, err := jwkset.NewJWKFromKey(priv.Public(), jwkset.JWKOptions{
		Metadata: jwkset.JWKMetadataOptions{ALG: jwkset.ALG(alg), KID: kid, USE: jwkset.UseSig},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	jwks, err = json.MarshalIndent(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{jwk.Marshal()}}, "", "  ")
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	return priv, append(jwks, '\n'), nil
}

// MarshalPrivateKey returns priv as a PKCS#8 PEM block of type
// "PRIVATE KEY". HMAC secrets have no PKCS#8 form and are refused.
func MarshalPrivateKey(priv crypto.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(normalizePrivate(priv))
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ErrPublicKey reports a key file that holds a public key where a private
// key is needed, to sign.
var ErrPublicKey = errors.New("the file holds a public key, not a private one")

// ParsePrivateKey reads a signing key: a PEM "PRIVATE KEY" block (PKCS#8;
// the older "RSA PRIVATE KEY" and "EC PRIVATE KEY" forms are read too), or
// a private JWK, a JSON object with its private members ("kty":"oct" gives
// an HMAC secret as []byte). It returns *rsa.PrivateKey,
// *ecdsa.PrivateKey, ed25519.PrivateKey or []byte.
//
// A file that holds only public keys (a JWK Set, a public JWK, PEM
// "PUBLIC KEY" blocks or certificates) is refused with an error wrapping
// [ErrPublicKey].
func ParsePrivateKey(data []byte) (crypto.PrivateKey, error) {
	trimmed := bytes.TrimSpace(data)
	if bytes.HasPrefix(trimmed, []byte("{")) {
		var set struct {
			Keys json.RawMessage `json:"keys"`
		}
		if json.Unmarshal(trimmed, &set) == nil && set.Keys != nil {
			return nil, fmt.Errorf("parse private key: a JWK Set: %w", ErrPublicKey)
		}
		return parsePrivateJWK(trimmed)
	}
	rest := trimmed
	public := ""
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil && public != "" {
			return nil, fmt.Errorf("parse private key: PEM %s: %w", public, ErrPublicKey)
		}
		if block == nil {
			return nil, errors.New("parse private key: no PEM private key block or JWK found")
		}
		if block.Type == "PUBLIC KEY" || block.Type == "RSA PUBLIC KEY" || block.Type == "CERTIFICATE" {
			public = block.Type
		}
		var (
			key any
			err error
		)
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		default:
			// EC parameters and similar blocks precede the key in
			// some files.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("parse private key: %s block: %w", block.Type, err)
		}
		switch key.(type) {
		case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
			return key, nil
		}
		return nil, fmt.Errorf("parse private key: unsupported key type %T", key)
	}
}

// parsePrivateJWK reads a private JWK.
func parsePrivateJWK(data []byte) (crypto.PrivateKey, error) {
	jwk, err := jwkset.NewJWKFromRawJSON(data, jwkset.JWKMarshalOptions{Private: true}, jwkset.JWKValidateOptions{})
	if err != nil {
		return nil, fmt.Errorf("parse private key: JWK: %w", err)
	}
	switch k := jwk.Key().(type) {
	case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
		return k, nil
	case []byte:
		if len(k) == 0 {
			return nil, errors.New("parse private key: JWK: empty oct key")
		}
		return k, nil
	case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
		return nil, fmt.Errorf("parse private key: a public JWK: %w", ErrPublicKey)
	default:
		return nil, fmt.Errorf("parse private key: JWK: unsupported key type %T", k)
	}
}

// Proof returns a DPoP proof (RFC 9449 §4.2) for a request of method to
// uri that presents token (ath; none when token is ""), signed with key,
// an ECDSA, Ed25519 or RSA private key, by alg ("" for the key's default):
// typ dpop+jwt, the public jwk, a random jti, htm, htu and iat now.
func Proof(key crypto.PrivateKey, alg, method, uri, token string) (string, error) {
	return ProofWithNonce(key, alg, method, uri, token, "")
}

// ProofWithNonce is [Proof] with the server nonce nonce (RFC 9449 §8), a
// nonce claim, when it is not "".
func ProofWithNonce(key crypto.PrivateKey, alg, method, uri, token, nonce string) (string, error) {
	key = normalizePrivate(key)
	if alg == "" {
		alg = DefaultAlgorithm(key)
	}
	if !slices.Contains(dpop.DefaultAlgorithms(), alg) {
		return "", fmt.Errorf("proof: algorithm %q: want an asymmetric one (%s)", alg, strings.Join(dpop.DefaultAlgorithms(), ", "))
	}
	if err := fitsPrivate(key, alg); err != nil {
		return "", fmt.Errorf("proof: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return "", errors.New("proof: the key cannot sign")
	}
	jwk, err := jwkset.NewJWKFromKey(signer.Public(), jwkset.JWKOptions{})
	if err != nil {
		return "", fmt.Errorf("proof: %w", err)
	}
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", err
	}
	claims := jwt.MapClaims{
		"jti": base64.RawURLEncoding.EncodeToString(jti[:]),
		"htm": method,
		"htu": uri,
		"iat": time.Now().Unix(),
	}
	if token != "" {
		claims["ath"] = dpop.AccessTokenHash(token)
	}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	tok := jwt.NewWithClaims(signingMethod(alg), claims)
	tok.Header["typ"] = "dpop+jwt"
	tok.Header["jwk"] = jwk.Marshal()
	return tok.SignedString(key)
}
