package keys

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math/big"
)

// Thumbprint returns the RFC 7638 JWK thumbprint of a public key: the
// SHA-256 of its required members in lexicographic order, base64url without
// padding. It is the kid of keys read from PEM and of keys made by keygen.
func Thumbprint(pub any) (string, error) {
	var canon string
	b64 := base64.RawURLEncoding.EncodeToString
	switch k := pub.(type) {
	case *rsa.PublicKey:
		canon = fmt.Sprintf(`{"e":%q,"kty":"RSA","n":%q}`, b64(big.NewInt(int64(k.E)).Bytes()), b64(k.N.Bytes()))
	case *ecdsa.PublicKey:
		crv, size := "", (k.Curve.Params().BitSize+7)/8
		switch k.Curve.Params().Name {
		case "P-256", "P-384", "P-521":
			crv = k.Curve.Params().Name
		default:
			return "", fmt.Errorf("thumbprint: unsupported curve %s", k.Curve.Params().Name)
		}
		raw, err := k.Bytes() // uncompressed point: 0x04 || X || Y
		if err != nil {
			return "", fmt.Errorf("thumbprint: %w", err)
		}
		canon = fmt.Sprintf(`{"crv":%q,"kty":"EC","x":%q,"y":%q}`, crv, b64(raw[1:1+size]), b64(raw[1+size:]))
	case ed25519.PublicKey:
		canon = fmt.Sprintf(`{"crv":"Ed25519","kty":"OKP","x":%q}`, b64(k))
	default:
		return "", fmt.Errorf("thumbprint: unsupported key type %T", pub)
	}
	sum := sha256.Sum256([]byte(canon))
	return b64(sum[:]), nil
}
