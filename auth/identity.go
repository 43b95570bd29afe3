// Package auth decides who is calling and whether they may: the
// verification pipeline. It reads the credential (RFC 6750 bearer, RFC
// 9449 DPoP), routes a token to its issuer, has the issuer's
// [Authenticator] turn it into claims (package jws verifies signatures;
// another way of trust is a package beside it), holds the claims to the
// rules every token meets whatever trusted it (registered claims, the
// issuer's rules, the caller's groups and scope), caches verified tokens,
// checks the binding of each request (DPoP proofs through package dpop,
// client certificates through package edge), admits it (rate, replay),
// and owns the failure taxonomy shared by the WWW-Authenticate challenge,
// the metrics and the access log, the gin middleware and the resource
// metadata. authenticate.go is the path a request's credential takes;
// authenticator.go the seam; verifier.go the issuers and their table;
// config.go an issuer's rules; claims.go what a verified token says about
// its caller.
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
	// Introspected tells that the issuer was asked about the token
	// (RFC 7662) rather than its signature verified.
	Introspected bool

	// audit is what the issuer's audited rules would have refused the
	// token with.
	audit audited
}

type contextKey struct{}

// NewContext returns a copy of ctx that carries id.
func NewContext(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, contextKey{}, id)
}

// FromContext returns the Identity stored in ctx by [NewContext] or
// [Middleware] (when no access log's middleware runs before it; see
// [FromGin]) and reports whether there was one. Its slices are shared
// with other requests and must not be modified.
func FromContext(ctx context.Context) (Identity, bool) {
	if id, ok := ctx.Value(contextKey{}).(*Identity); ok && id != nil {
		return *id, true
	}
	return Identity{}, false
}
