package introspect

import (
	"context"
	"time"

	"github.com/plantstore/plantstore/auth"
)

// After returns the Trust of the JWTs of an issuer that introspects them
// too (tokens: always): each is first trusted by sig, its signature's way
// (its header, key and signature, so that a JWT the issuer never signed
// costs the endpoint nothing), then asked about, the answer's claims being
// the verdict's. Keep the returned pointer for as long as sig and t are
// the issuer's: an issuer whose Trusts are the same keeps its cached
// tokens across a reload.
func (t *Trust) After(sig auth.Trust) auth.Trust { return &chain{sig: sig, ask: t} }

// chain trusts a JWT by its signature, then by the issuer's answer.
type chain struct {
	sig auth.Trust
	ask *Trust
}

func (c *chain) Authenticator(cfg auth.Config, now func() time.Time) (auth.Authenticator, error) {
	sig, err := c.sig.Authenticator(cfg, now)
	if err != nil {
		return nil, err
	}
	ask, err := c.ask.Authenticator(cfg, now)
	if err != nil {
		return nil, err
	}
	return &chained{sig: sig, ask: ask}, nil
}

// chained is the Authenticator of a chain.
type chained struct {
	sig, ask auth.Authenticator
}

// Authenticate verifies token's signature, then asks about it; the
// verdict is the answer's.
func (c *chained) Authenticate(ctx context.Context, token string) (auth.Verdict, *auth.Error) {
	if _, err := c.sig.Authenticate(ctx, token); err != nil {
		return auth.Verdict{}, err
	}
	return c.ask.Authenticate(ctx, token)
}

// Holds is the answer's: its deadline, at most the issuer's cache setting.
func (c *chained) Holds(stamp uint64, now time.Time) bool { return c.ask.Holds(stamp, now) }

// Ready is the keys': the endpoint is no part of readiness.
func (c *chained) Ready(now time.Time) error { return c.sig.Ready(now) }
