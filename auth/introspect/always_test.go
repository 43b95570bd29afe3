package introspect_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/issuers"
)

// TestAlwaysFromFile: an issuer of the issuers file with tokens: always
// has its JWTs introspected too, after their signature verified, so a JWT
// it revoked is refused once its answer expires and one it never signed
// costs its endpoint nothing; its opaque tokens go to it; another issuer's
// JWTs are verified by their signature, never sent to its endpoint.
func TestAlwaysFromFile(t *testing.T) {
	p := newIDP(t)
	key := authtest.NewKey(t, "ES256")
	otherKey := authtest.NewKey(t, "ES256")
	dir := t.TempDir()
	yaml := fmt.Sprintf(`issuers:
  - name: staff
    issuer: %s
    key_file: %s
    audiences: [plantstore]
    introspection:
      tokens: always
      endpoint: %s
      client_id: %s
      client_secret_file: %s
      cache: 200ms
  - name: partners
    issuer: https://partners.example
    key_file: %s
`, testIssuer, authtest.WriteJWKS(t, key), p.srv.URL, p.clientID, secretFile(t, p.secret), authtest.WriteJWKS(t, otherKey))
	path := filepath.Join(dir, "issuers.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var v *auth.Verifier
	set, err := issuers.Load(t.Context(), path, issuers.Options{}, func(is []auth.Issuer) (err error) {
		v, err = auth.NewVerifier(auth.Options{}, is...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Wait)
	s := serve(t, v, nil)
	jwt := authtest.Token(t, key, nil, valid())
	p.answer(jwt, nil)
	if got := s.get(t, jwt); got.status != http.StatusOK || got.id.Issuer != "staff" || !got.id.Introspected {
		t.Fatalf("staff JWT: %d %+v; want 200, introspected, of staff", got.status, got.id)
	}
	if p.calls.Load() != 1 {
		t.Errorf("%d calls for the staff JWT; want 1", p.calls.Load())
	}
	if got := s.get(t, p.issue(nil)); got.status != http.StatusOK || got.id.Issuer != "staff" {
		t.Errorf("opaque token: %d %+v; want 200 of staff", got.status, got.id)
	}
	// A JWT naming staff that staff never signed is refused by its
	// signature, never asked about.
	before := p.calls.Load()
	forged := authtest.Token(t, otherKey, map[string]any{"kid": key.Verify.ID}, valid())
	p.answer(forged, nil)
	if got := s.get(t, forged); got.status != http.StatusUnauthorized || got.reason() != string(auth.ReasonBadSignature) {
		t.Errorf("forged staff JWT: %d %q; want 401 bad_signature", got.status, got.challenge)
	}
	if p.calls.Load() != before {
		t.Error("a forged JWT was sent to the endpoint")
	}
	partner := authtest.Token(t, otherKey, nil, authtest.Claims(map[string]any{"iss": "https://partners.example"}))
	before = p.calls.Load()
	if got := s.get(t, partner); got.status != http.StatusOK || got.id.Introspected {
		t.Errorf("partner JWT: %d %+v; want 200, verified by signature", got.status, got.id)
	}
	if p.calls.Load() != before {
		t.Error("the partner's JWT was sent to the staff endpoint")
	}
	p.revoke(jwt)
	start := time.Now()
	authtest.WaitFor(t, "the revoked JWT refused", func() bool { return s.get(t, jwt).status == http.StatusUnauthorized })
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the revoked JWT passed for %s; want about the cache's 200ms", d)
	}
}
