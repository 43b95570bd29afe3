package auth_test

import (
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/jws"
	"github.com/plantstore/plantstore/auth/keys"
)

// TestMaxStaleKeepsKeysFresh: a max_stale shorter than the refresh period
// makes the keys refresh at half of it, so that an identity provider that
// answers never lets them go stale, and a reload that turns max_stale off
// gives the refresh period back.
func TestMaxStaleKeepsKeysFresh(t *testing.T) {
	key := authtest.NewKey(t, "ES256")
	idp := authtest.NewServer(t, authtest.JWKS(t, key))
	j, err := keys.NewJWKS(t.Context(), keys.JWKSOptions{URL: idp.URL, Refresh: time.Hour}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	authtest.WaitFor(t, "the first JWKS fetch", func() bool { return j.Ready() == nil })
	const maxStale = 400 * time.Millisecond
	v, err := auth.NewVerifier(auth.Options{}, auth.Issuer{Name: "staff", Config: auth.Config{Issuer: "https://idp.example", MaxStale: maxStale}, JWS: jws.New(j)})
	if err != nil {
		t.Fatal(err)
	}
	start := idp.Hits.Load()
	authtest.WaitFor(t, "three refreshes within max_stale/2 each", func() bool { return idp.Hits.Load() >= start+3 })
	if err := v.Ready(); err != nil {
		t.Errorf("Ready with the IdP answering and max_stale %s = %v; want nil", maxStale, err)
	}

	if err := v.SetIssuers(auth.Issuer{Name: "staff", Config: auth.Config{Issuer: "https://idp.example"}, JWS: jws.New(j)}); err != nil {
		t.Fatal(err)
	}
	// Without max_stale the period is the hour again: the refreshes stop.
	// One may already have started; give the loop time to fall asleep.
	time.Sleep(2 * maxStale)
	settled := idp.Hits.Load()
	time.Sleep(2 * maxStale)
	if got := idp.Hits.Load(); got != settled {
		t.Errorf("max_stale off: the IdP got %d more requests in %s; want none (refresh 1h)", got-settled, 2*maxStale)
	}
}
