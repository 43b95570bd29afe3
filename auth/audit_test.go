package auth_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/observability/metricstest"
)

// auditedRules are a Config that sets every rule that can be audited.
func auditedRules() auth.Config {
	return auth.Config{
		TokenTypes:  []string{"at+jwt"},
		Clients:     []string{"plants-web"},
		MaxLifetime: time.Hour,
		Claims:      []auth.ClaimRule{{Path: "tid", OneOf: []any{"t-1"}}},
	}
}

// TestAuditNeverChangesResponse holds audit mode to its contract: a rule
// in audit mode never changes a response. Each token goes, twice (the
// second time from the cache), to a server whose issuer audits every rule
// it sets and to one that sets none, and the two answer with the same
// status, body and headers; the audited server counts and logs what it
// would have refused.
func TestAuditNeverChangesResponse(t *testing.T) {
	k := authtest.NewKey(t, "ES256")
	other := authtest.NewKey(t, "ES256")
	ks := authtest.KeySet(k)
	audited := auditedRules()
	audited.Audit = auth.AuditableRules()
	auditSrv := newAPIServer(t, audited, ks)
	plainSrv := newAPIServer(t, auth.Config{}, ks)
	enforceSrv := newAPIServer(t, auditedRules(), ks)

	at := map[string]any{"typ": "at+jwt"}
	good := map[string]any{"client_id": "plants-web", "tid": "t-1"}
	with := func(over map[string]any) map[string]any {
		c := authtest.Claims(good)
		for name, v := range over {
			if v == nil {
				delete(c, name)
				continue
			}
			c[name] = v
		}
		return c
	}
	yearLong := time.Now().Add(365 * 24 * time.Hour).Unix()
	tests := []struct {
		name  string
		token string
		// audit is what the audited server logs; enforced the reason the
		// server that enforces the same rules refuses with.
		audit    string
		enforced auth.Reason
	}{
		{"meets every rule", authtest.Token(t, k, at, with(nil)), "", ""},
		{"typ JWT", authtest.Token(t, k, map[string]any{"typ": "JWT"}, with(nil)), "token_type", auth.ReasonTokenType},
		{"no typ", authtest.Token(t, k, map[string]any{"typ": nil}, with(nil)), "token_type", auth.ReasonTokenType},
		{"another client", authtest.Token(t, k, at, with(map[string]any{"client_id": "reports-cli"})), "client", auth.ReasonClient},
		{"no client", authtest.Token(t, k, at, with(map[string]any{"client_id": nil})), "client", auth.ReasonClient},
		{"a year-long token", authtest.Token(t, k, at, with(map[string]any{"exp": yearLong})), "lifetime", auth.ReasonLifetime},
		{"another tenant", authtest.Token(t, k, at, with(map[string]any{"tid": "t-9"})), "claim", auth.ReasonClaim},
		{"the tenant as a number", authtest.Token(t, k, at, with(map[string]any{"tid": 1})), "claim", auth.ReasonClaim},
		{"every rule broken", authtest.Token(t, k, map[string]any{"typ": "JWT"}, with(map[string]any{"client_id": "x", "exp": yearLong, "tid": nil})), "token_type,lifetime,client,claim", auth.ReasonTokenType},
		// Refusals of rules that are not audited stay refusals.
		{"every rule broken, and expired", authtest.Token(t, k, map[string]any{"typ": "JWT"}, with(map[string]any{"client_id": "x", "tid": nil, "exp": time.Now().Add(-time.Hour).Unix()})), "", auth.ReasonTokenType},
		{"every rule broken, another key", authtest.Token(t, other, map[string]any{"typ": "JWT", "kid": k.Verify.ID}, with(map[string]any{"client_id": "x"})), "", auth.ReasonTokenType},
		{"a DPoP proof's typ", authtest.Token(t, k, map[string]any{"typ": "dpop+jwt"}, with(nil)), "", auth.ReasonTokenType},
		{"groups left out", authtest.Token(t, k, map[string]any{"typ": "JWT"}, with(map[string]any{"hasgroups": true})), "", auth.ReasonTokenType},
		{"no sub", authtest.Token(t, k, at, with(map[string]any{"sub": nil, "tid": "t-9"})), "", auth.ReasonClaim},
	}
	want := map[string]float64{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range 2 {
				a := respond(t, auditSrv.url, tt.token)
				p := respond(t, plainSrv.url, tt.token)
				if a != p {
					t.Errorf("request %d: audited server answered\n%s\nthe server without the rules\n%s", i+1, a, p)
				}
				status, challenge, _ := attackRequest(t, enforceSrv.url, "Bearer "+tt.token)
				switch {
				case tt.enforced == "" && status != http.StatusOK:
					t.Errorf("enforced: status %d, %q; want 200", status, challenge)
				case tt.enforced != "" && !strings.Contains(challenge, `error_description="`+tt.enforced.Description()+`"`):
					t.Errorf("enforced: status %d, %q; want 401 %s", status, challenge, tt.enforced)
				}
			}
			if tt.audit == "" {
				return
			}
			for r := range strings.SplitSeq(tt.audit, ",") {
				want[r] += 2
			}
			line := auditSrv.log.WaitLine(t, "audit="+tt.audit, func(l map[string]any) bool { return l["audit"] == tt.audit })
			if line["status"] != 200.0 || line["sub"] != "alice" || line["auth_failure"] != nil {
				t.Errorf("access line %v; want status 200 for alice, no auth_failure", line)
			}
			if wantRule := slices.Contains(strings.Split(tt.audit, ","), "claim"); (line["claim_rule"] == "tid") != wantRule {
				t.Errorf("access line %v; want claim_rule tid: %v", line, wantRule)
			}
		})
	}
	got := metricstest.ByLabel(t, auditSrv.reg, "plantstore_auth_audit_total", "reason")
	for _, r := range []string{"token_type", "client", "lifetime", "claim"} {
		if got[r] != want[r] {
			t.Errorf("plantstore_auth_audit_total{reason=%q} = %v; want %v", r, got[r], want[r])
		}
	}
	if n := len(metricstest.ByLabel(t, plainSrv.reg, "plantstore_auth_audit_total", "reason")); n != 0 {
		for r, v := range metricstest.ByLabel(t, plainSrv.reg, "plantstore_auth_audit_total", "reason") {
			if v != 0 {
				t.Errorf("the server without rules counted %v audits of %s", v, r)
			}
		}
	}
}

// respond returns the response to a request for url with the bearer
// token, as text: status, the headers but Date and X-Request-Id, and the
// body, with the server's address written as HOST.
func respond(t *testing.T, url, token string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Header.Del("Date")
	resp.Header.Del("X-Request-Id")
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", resp.StatusCode)
	if err := resp.Header.Write(&b); err != nil {
		t.Fatal(err)
	}
	b.Write(body)
	return strings.ReplaceAll(b.String(), req.URL.Host, "HOST")
}

// TestAuditCallers: plantstore_auth_audit_callers counts the distinct
// callers whose requests an audited rule would have refused, in the
// current hour: a caller asking again is not counted again, and the next
// hour counts from zero.
func TestAuditCallers(t *testing.T) {
	k := authtest.NewKey(t, "ES256")
	var tenant any = "t-1"
	v := newVerifier(t, auth.Config{Claims: []auth.ClaimRule{{Path: "tid", Equals: &tenant}}, Audit: []string{"claims"}}, authtest.KeySet(k))
	clock := newTestClock(time.Unix(time.Now().Unix(), 0).Truncate(time.Hour).Add(time.Minute))
	auth.SetClock(v, clock.Now)
	srv := serveVerifier(t, v)
	token := func(sub string) string {
		return authtest.Token(t, k, nil, authtest.Claims(map[string]any{
			"sub": sub, "tid": "t-9", "iat": clock.Now().Unix(), "exp": clock.Now().Add(3 * time.Hour).Unix(),
		}))
	}
	callers := func() float64 {
		return metricstest.Sum(t, srv.reg, "plantstore_auth_audit_callers", map[string]string{"issuer": "default", "reason": "claim"})
	}
	alice := token("alice")
	for _, tok := range []string{alice, token("bob"), alice, alice} {
		if status, challenge, _ := attackRequest(t, srv.url, "Bearer "+tok); status != http.StatusOK {
			t.Fatalf("status %d, %q; want 200 (the rule is audited)", status, challenge)
		}
	}
	if n := callers(); n != 2 {
		t.Errorf("distinct callers after alice, bob, alice, alice: %v; want 2", n)
	}
	if n := metricstest.Sum(t, srv.reg, "plantstore_auth_audit_total", map[string]string{"issuer": "default", "reason": "claim"}); n != 4 {
		t.Errorf("audited requests: %v; want 4", n)
	}
	clock.Add(time.Hour)
	if status, _, _ := attackRequest(t, srv.url, "Bearer "+token("carol")); status != http.StatusOK {
		t.Fatalf("status %d; want 200", status)
	}
	if n := callers(); n != 1 {
		t.Errorf("distinct callers the next hour, after carol: %v; want 1", n)
	}
}
