package auth

import (
	"context"
	"time"
)

// An Authenticator turns the tokens of one issuer into claims, the way
// that issuer's tokens are trusted: by their signature with the issuer's
// keys (package jws), or by asking the issuer. It is the one thing the
// pipeline knows of how a token is trusted: the credential, the routing
// by issuer, the cache, every rule on the claims (times, iss, aud, the
// caller, the issuer's rules, the binding) and admission are the
// [Verifier]'s, the same whatever produced the claims. Implementations
// are safe for concurrent use.
type Authenticator interface {
	// Authenticate returns the claims of token as the issuer vouches
	// for them, or the refusal, whose Reason says what failed. It checks
	// what its way of trust requires (for a JWS: the header, the key and
	// the signature) and leaves every rule on the claims to the pipeline.
	Authenticate(ctx context.Context, token string) (Verdict, *Error)
	// Holds reports whether a verdict of stamp still holds at now, so
	// that its token may be served from the cache: for keys, that they
	// have not changed since and are fresh; for an answer of the issuer,
	// that its time is not up.
	Holds(stamp uint64, now time.Time) bool
	// Ready returns nil when the authenticator can accept tokens at now,
	// and otherwise why not (keys not fetched yet, or stale): its part of
	// readiness.
	Ready(now time.Time) error
}

// A Verdict is an [Authenticator]'s acceptance of a token.
type Verdict struct {
	// Claims are the token's claims, as the issuer vouches for them.
	Claims Claims
	// Stamp is what Holds checks the verdict against later: the
	// generation of the keys that verified it, a deadline.
	Stamp uint64
	// Cacheable tells whether the token may be served from the cache
	// while Holds says the verdict holds.
	Cacheable bool
	// Digest keeps the token in the cache as keyed hashes only, never
	// itself: for a token whose issuer is asked about it, which anyone
	// who read the cache's memory could otherwise present.
	Digest bool
	// Introspected tells that the issuer was asked about the token
	// rather than its signature verified: the access line says so.
	Introspected bool
	// Unlisted tells that the token's JOSE typ is none of the issuer's
	// TokenTypes, which it audits rather than enforces: the token is
	// accepted and the refusal counted ([Config.ListsType]).
	Unlisted bool
}

// A Trust is how an issuer's tokens are trusted, of which the [Verifier]
// makes the issuer's [Authenticator] once it has checked the issuer's
// Config. An issuer whose name, Config and Trusts are those of a current
// one is kept as it is, cached tokens and all: a Trust is compared as an
// interface value, so an implementation is a pointer that a reload keeps
// for as long as what it trusts is the same.
type Trust interface {
	// Authenticator returns the Authenticator of an issuer whose checked
	// Config is c, on the Verifier's clock now. Its error is a
	// *setting.Error when a setting of the issuer cannot work with what is
	// trusted (static keys that fit none of its algorithms).
	Authenticator(c Config, now func() time.Time) (Authenticator, error)
}
