package auth_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/jws"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/auth/revoke"
)

// revocationAttacks are the rows of TestKnownAttacks on revocations: two
// named issuers over the same keys, each revocation scoped to one, and a
// token served from the cache before its revocation.
func revocationAttacks(t *testing.T, key authtest.Key, ks keys.Keys) []attack {
	const staffIss, partnersIss = "https://staff.example", "https://partners.example"
	revs := revoke.New(revoke.Options{})
	o := verifierOptions
	o.Revocations = revs
	v, err := auth.NewVerifier(o,
		auth.Issuer{Name: "staff", Config: auth.Config{Issuer: staffIss}, JWS: jws.New(ks)},
		auth.Issuer{Name: "partners", Config: auth.Config{Issuer: partnersIss}, JWS: jws.New(ks)},
	)
	if err != nil {
		t.Fatal(err)
	}
	srv := serveVerifier(t, v)
	now := time.Now()
	token := func(iss string, over map[string]any) string {
		c := map[string]any{"iss": iss}
		for k, v := range over {
			c[k] = v
		}
		return "Bearer " + authtest.Token(t, key, nil, authtest.Claims(c))
	}
	cached := token(staffIss, map[string]any{"sub": "erin"})
	if status, _, body := attackRequestWith(t, srv.url, cached, nil); status != http.StatusOK {
		t.Fatalf("erin's token before any revocation: %d %s", status, body)
	}
	revs.Replace([]revoke.Entry{
		{Issuer: "staff", JTI: "j-leaked", Until: now.Add(time.Hour)},
		{Issuer: "staff", Sub: "mallory", Before: now},
		{Issuer: "staff", Client: "old-app", Before: now.Add(time.Hour)}, // a cutoff in the future
		{Issuer: "staff", Sub: "erin", Before: now},
	}, now)
	return []attack{
		{name: "control: a staff token nothing revokes", ref: "-", server: &srv, authz: token(staffIss, map[string]any{"jti": "j-other"}), wantSub: "alice"},
		{name: "revoked jti", ref: "SPEC §17", server: &srv, authz: token(staffIss, map[string]any{"jti": "j-leaked"}), want: auth.ReasonRevoked},
		{name: "a jti entry for a token of another issuer", ref: "SPEC §17 (revocations scoped to an issuer)", server: &srv, authz: token(partnersIss, map[string]any{"jti": "j-leaked"}), wantSub: "alice"},
		{name: "revoked subject", ref: "SPEC §17", server: &srv, authz: token(staffIss, map[string]any{"sub": "mallory"}), want: auth.ReasonRevoked},
		{name: "revoked subject, no iat", ref: "SPEC §17 (no iat: any cutoff refuses)", server: &srv, authz: token(staffIss, map[string]any{"sub": "mallory", "iat": nil}), want: auth.ReasonRevoked},
		{name: "revoked subject, iat in the cutoff's second", ref: "SPEC §17 (the cutoff rounded to its second)", server: &srv, authz: token(staffIss, map[string]any{"sub": "mallory", "iat": now.Unix()}), want: auth.ReasonRevoked},
		{name: "the same subject at another issuer", ref: "SPEC §17", server: &srv, authz: token(partnersIss, map[string]any{"sub": "mallory"}), wantSub: "mallory"},
		{name: "a cutoff in the future refuses a token issued now", ref: "SPEC §17", server: &srv, authz: token(staffIss, map[string]any{"client_id": "old-app"}), want: auth.ReasonRevoked},
		{name: "a cutoff in the future, the client as azp", ref: "SPEC §17, OIDC Core §2", server: &srv, authz: token(staffIss, map[string]any{"azp": "old-app"}), want: auth.ReasonRevoked},
		{name: "client_id decides over azp", ref: "RFC 9068 §2.2", server: &srv, authz: token(staffIss, map[string]any{"client_id": "new-app", "azp": "old-app"}), wantSub: "alice"},
		{name: "a cached token revoked after caching", ref: "SPEC §17 (also in the verified-token cache)", server: &srv, authz: cached, want: auth.ReasonRevoked},
	}
}
