package auth

import (
	"encoding/base64"
	"fmt"
)

// BindingMode is how an issuer's tokens may be bound to a proof of
// possession of one kind: a DPoP key ([DPoPMode]) or a client certificate
// ([MTLSMode]). The zero value is optional.
type BindingMode int

// The binding modes; [DPoPMode] and [MTLSMode] name them for their kind.
const (
	// BindingOptional accepts unbound tokens, and bound ones with their proof.
	BindingOptional BindingMode = iota
	// BindingOff refuses bound tokens.
	BindingOff
	// BindingRequired accepts bound tokens with their proof only.
	BindingRequired
)

// ParseBindingMode returns the mode named s: off, optional or required;
// "" is optional.
func ParseBindingMode(s string) (BindingMode, error) {
	switch s {
	case "", "optional":
		return BindingOptional, nil
	case "off":
		return BindingOff, nil
	case "required":
		return BindingRequired, nil
	}
	return 0, fmt.Errorf("%q: want off, optional or required", s)
}

// UnmarshalText sets m to the mode named text, as [ParseBindingMode]
// reads it: how the issuers file reads dpop and mtls.
func (m *BindingMode) UnmarshalText(text []byte) error {
	mode, err := ParseBindingMode(string(text))
	if err != nil {
		return err
	}
	*m = mode
	return nil
}

// MarshalText returns the mode's name.
func (m BindingMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// String returns the mode's name.
func (m BindingMode) String() string {
	switch m {
	case BindingOff:
		return "off"
	case BindingRequired:
		return "required"
	}
	return "optional"
}

// binding is what a token is bound to by its cnf claim (RFC 7800): the
// proofs of possession every request presenting it must carry. The zero
// value is an unbound token, a bearer token.
type binding struct {
	// jkt is cnf.jkt (RFC 9449 §6.1): the RFC 7638 thumbprint of the key
	// that signs the DPoP proof of each request.
	jkt string
	// x5t is cnf.x5t#S256 (RFC 8705 §3.1): the base64url SHA-256 of the
	// DER of the client certificate each request comes with.
	x5t string
}

// dpop reports whether b binds the token to a DPoP key.
func (b binding) dpop() bool { return b.jkt != "" }

// cert reports whether b binds the token to a client certificate.
func (b binding) cert() bool { return b.x5t != "" }

// bindingOf returns the binding the cnf claim of a token names. It is the
// one place that says which confirmation methods this service checks: a
// token bound in a way that goes unchecked would be a bearer token for
// whoever holds it, which is what binding it meant to prevent, so every
// member of cnf must be one that is checked on each request: jkt (by a
// DPoP proof, see [Verifier.bindProof]) and x5t#S256 (by the client
// certificate the gateway forwards, see [Verifier.bindCert]); a token
// with both must satisfy both. Any other member (jwk, jwe, jku, kid, x5t
// of SHA-1, ...) is refused with [ReasonUnknownBinding]. A cnf that is
// not an object, a jkt that is not a non-empty string, or an x5t#S256
// that is not the base64url (unpadded, canonical) of 32 bytes is
// [ReasonClaims]: no certificate could ever match it. An empty cnf binds
// nothing.
func bindingOf(claims Claims) (binding, *Error) {
	raw, ok := claims["cnf"]
	if !ok {
		return binding{}, nil
	}
	cnf, ok := raw.(map[string]any)
	if !ok {
		return binding{}, invalidToken(ReasonClaims)
	}
	var b binding
	for name, v := range cnf {
		s, isString := v.(string)
		switch name {
		case "jkt":
			if !isString || s == "" {
				return binding{}, invalidToken(ReasonClaims)
			}
			b.jkt = s
		case "x5t#S256":
			if !isString || !isThumbprint(s) {
				return binding{}, invalidToken(ReasonClaims)
			}
			b.x5t = s
		default:
			return binding{}, invalidToken(ReasonUnknownBinding)
		}
	}
	return b, nil
}

// isThumbprint reports whether s is a SHA-256 thumbprint as RFC 8705 §3.1
// writes it: 32 bytes in canonical unpadded base64url, 43 characters.
func isThumbprint(s string) bool {
	if len(s) != base64.RawURLEncoding.EncodedLen(32) {
		return false
	}
	var sum [32]byte
	n, err := base64.RawURLEncoding.Strict().Decode(sum[:], []byte(s))
	return err == nil && n == len(sum)
}
