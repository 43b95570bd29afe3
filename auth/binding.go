package auth

// binding is what a token is bound to by its cnf claim (RFC 7800): the
// proof of possession every request presenting it must carry. The zero
// value is an unbound token, a bearer token.
type binding struct {
	// jkt is cnf.jkt (RFC 9449 §6.1): the RFC 7638 thumbprint of the key
	// that signs the DPoP proof of each request.
	jkt string
}

// bound reports whether b binds the token to anything.
func (b binding) bound() bool { return b.jkt != "" }

// bindingOf returns the binding the cnf claim of a token names. It is the
// one place that says which confirmation methods this service checks: a
// token bound in a way that goes unchecked would be a bearer token for
// whoever holds it, which is what binding it meant to prevent, so every
// member of cnf must be one that is checked on each request. jkt is (by a
// DPoP proof); x5t#S256, a certificate binding (RFC 8705 §3.1), is refused
// with [ReasonCertBound]; any other member (jwk, jwe, jku, kid, ...) with
// [ReasonUnknownBinding]. A cnf that is not an object, or a jkt that is
// not a non-empty string, is [ReasonClaims]; an empty cnf binds nothing.
func bindingOf(claims claimSet) (binding, *Error) {
	raw, ok := claims["cnf"]
	if !ok {
		return binding{}, nil
	}
	cnf, ok := raw.(map[string]any)
	if !ok {
		return binding{}, invalidToken(ReasonClaims)
	}
	if _, ok := cnf["x5t#S256"]; ok {
		return binding{}, invalidToken(ReasonCertBound)
	}
	var b binding
	for name, v := range cnf {
		if name != "jkt" {
			return binding{}, invalidToken(ReasonUnknownBinding)
		}
		jkt, ok := v.(string)
		if !ok || jkt == "" {
			return binding{}, invalidToken(ReasonClaims)
		}
		b.jkt = jkt
	}
	return b, nil
}
