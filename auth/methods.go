package auth

import (
	"sync"

	"github.com/golang-jwt/jwt/v5"
)

// ed25519Method is golang-jwt's EdDSA under the name Ed25519, its
// fully-specified name (RFC 9864), which newer clients sign DPoP proofs
// with.
type ed25519Method struct{ *jwt.SigningMethodEd25519 }

func (ed25519Method) Alg() string { return "Ed25519" }

// signingMethod returns the method that signs alg: golang-jwt's, or
// ed25519Method for Ed25519. Signing never needs golang-jwt's table of
// methods, so minting works before any [Verifier] exists.
func signingMethod(alg string) jwt.SigningMethod {
	if alg == "Ed25519" {
		return ed25519Method{jwt.SigningMethodEdDSA}
	}
	return jwt.GetSigningMethod(alg)
}

// registerEd25519 makes golang-jwt's parsers know the alg Ed25519.
//
// A golang-jwt parser finds the method of a token's alg in one table of
// the process (jwt.RegisterSigningMethod), and has no option for a table
// of its own. [NewVerifier] calls this once per process, through a
// sync.Once: it adds the one name, as an alias of EdDSA, and changes no
// other, so a second Verifier, or a test, finds the table as the first
// left it.
func registerEd25519() { ed25519Once.Do(register) }

var ed25519Once sync.Once

func register() {
	jwt.RegisterSigningMethod("Ed25519", func() jwt.SigningMethod { return ed25519Method{jwt.SigningMethodEdDSA} })
}
