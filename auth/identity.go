// Package auth decides who is calling and whether they may: RFC 6750 bearer
// extraction, JWT verification against configured key sources, the claims
// checks of the service contract, and the failure taxonomy shared by the
// WWW-Authenticate challenge, the metrics and the access log.
package auth

import "context"

// Identity is a verified caller. It is built only from a token whose
// signature and claims passed every check.
type Identity struct {
	// Subject is the token's non-empty sub claim.
	Subject string
	// Groups are the values found at the configured groups claim path.
	Groups []string
	// Scopes are the values of the scope or scp claim.
	Scopes []string
}

type contextKey struct{}

// NewContext returns a copy of ctx that carries id.
func NewContext(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, contextKey{}, id)
}

// FromContext returns the Identity stored in ctx by [NewContext] or
// [Middleware] and reports whether there was one.
func FromContext(ctx context.Context) (Identity, bool) {
	switch x := ctx.Value(contextKey{}).(type) {
	case Identity:
		return x, true
	case *verified:
		// Stored by Middleware and shared with the cache: a copy.
		return x.identity(), true
	}
	return Identity{}, false
}
