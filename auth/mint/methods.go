package mint

import "github.com/golang-jwt/jwt/v5"

// ed25519Method is golang-jwt's EdDSA under the name Ed25519, its
// fully-specified name (RFC 9864), which newer clients sign DPoP proofs
// with.
type ed25519Method struct{ *jwt.SigningMethodEd25519 }

func (ed25519Method) Alg() string { return "Ed25519" }

// signingMethod returns the method that signs alg: golang-jwt's, or
// ed25519Method for Ed25519, a name golang-jwt's table of methods does
// not know (and is not taught: package dpop verifies proofs).
func signingMethod(alg string) jwt.SigningMethod {
	if alg == "Ed25519" {
		return ed25519Method{jwt.SigningMethodEdDSA}
	}
	return jwt.GetSigningMethod(alg)
}
