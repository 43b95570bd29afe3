// Package auth decides who is calling and whether they may: credential
// extraction (RFC 6750 bearer), JWT verification against each trusted
// issuer's keys, the claims checks of the service contract, and the failure
// taxonomy shared by the WWW-Authenticate challenge, the metrics and the
// access log. authenticate.go is the path a request's credential takes;
// verifier.go the issuers it is checked against and how they are
// configured; claims.go what a verified token says about its caller.
package auth

import "context"

// Identity is a verified caller. It is built only from a token whose
// signature and claims passed every check.
type Identity struct {
	// Issuer is the configured name of the issuer that vouched for the
	// caller: "" for the unnamed issuer of the -jwt-* flags.
	Issuer string
	// Subject is the token's non-empty sub claim.
	Subject string
	// Groups are the values found at the issuer's groups claim path.
	Groups []string
	// Scopes are the values of the scope or scp claim.
	Scopes []string
}

type contextKey struct{}

// NewContext returns a copy of ctx that carries id.
func NewContext(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, contextKey{}, id)
}

// FromContext returns the Identity stored in ctx by [NewContext] or
// [Middleware] and reports whether there was one. Its slices are shared
// with other requests and must not be modified.
func FromContext(ctx context.Context) (Identity, bool) {
	if id, ok := ctx.Value(contextKey{}).(*Identity); ok && id != nil {
		return *id, true
	}
	return Identity{}, false
}
