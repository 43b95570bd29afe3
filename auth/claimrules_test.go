package auth_test

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
)

// TestClaimRuleLog: a token a claim rule refuses is logged with the
// reason claim and the rule's path, never the value the token carries.
func TestClaimRuleLog(t *testing.T) {
	k := authtest.NewKey(t, "ES256")
	srv := newAPIServer(t, auth.Config{Claims: []auth.ClaimRule{{Path: "tid", OneOf: []any{"t-1", "t-2"}}}}, authtest.KeySet(k))
	const secret = "tenant-of-someone-else-0xdecafbad"
	status, _, _ := attackRequest(t, srv.url, "Bearer "+authtest.Token(t, k, nil, authtest.Claims(map[string]any{"tid": secret})))
	if status != http.StatusUnauthorized {
		t.Fatalf("status %d; want 401", status)
	}
	line := srv.log.WaitLine(t, "of the refusal", func(l map[string]any) bool { return l["msg"] == "request" })
	if line["auth_failure"] != "claim" || line["claim_rule"] != "tid" {
		t.Errorf("access line %v; want auth_failure claim and claim_rule tid", line)
	}
	if strings.Contains(srv.log.String(), secret) {
		t.Errorf("the log holds the claim's value:\n%s", srv.log.String())
	}
}

// TestParseClaimRules: the JSON of -jwt-claims, each refusal saying what
// is wrong.
func TestParseClaimRules(t *testing.T) {
	rules, err := auth.ParseClaimRules(`[{"path":"email_verified","equals":true},{"path":"tid","one_of":["t-1",2]},{"path":"act","exists":false},{"path":"realm_access.roles","prefix":"plants-"}]`)
	if err != nil || len(rules) != 4 {
		t.Fatalf("ParseClaimRules = %v, %v; want 4 rules", rules, err)
	}
	if got := rules[0].String() + "; " + rules[1].String() + "; " + rules[2].String() + "; " + rules[3].String(); got != `email_verified equals true; tid one of ["t-1",2]; act absent; realm_access.roles starts with "plants-"` {
		t.Errorf("rules read as %s", got)
	}
	if rules, err := auth.ParseClaimRules(""); err != nil || rules != nil {
		t.Errorf("ParseClaimRules(\"\") = %v, %v; want no rule", rules, err)
	}
	for in, want := range map[string]string{
		`{"path":"tid","exists":true}`:       "want a list",
		`[{"path":"tid","exist":true}]`:      `unknown key "exist"`,
		`[{"path":"tid","exists":true}] [1]`: "text after the list",
		`[{"path":"tid",}]`:                  "not JSON",
		`[{"path":"tid","exists":"yes"}]`:    "want a list",
	} {
		if _, err := auth.ParseClaimRules(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseClaimRules(%s) = %v; want an error with %q", in, err, want)
		}
	}
}

// tenRules are ten claim rules, of every operator, and claims that meet
// them all.
func tenRules() ([]auth.ClaimRule, map[string]any) {
	var yes, tenant, org any = true, "t-1", map[string]any{"id": "o-1"}
	no, present, prefix := false, true, "plants-"
	rules := []auth.ClaimRule{
		{Path: "email_verified", Equals: &yes},
		{Path: "tid", OneOf: []any{"t-0", tenant}},
		{Path: "act", Exists: &no},
		{Path: "realm_access.roles", Prefix: &prefix},
		{Path: "org", Equals: &org},
		{Path: "amr", Prefix: &prefix},
		{Path: "acr", OneOf: []any{"1", "2", "3"}},
		{Path: "sid", Exists: &present},
		{Path: "https://plants.example.com/tenant", Equals: &tenant},
		{Path: "may_act", Exists: &no},
	}
	claims := map[string]any{
		"email_verified": true, "tid": "t-1", "realm_access": map[string]any{"roles": []string{"offline", "plants-read"}},
		"org": map[string]any{"id": "o-1"}, "amr": []string{"pwd", "plants-mfa"}, "acr": "2", "sid": "s-1",
		"https://plants.example.com/tenant": "t-1", "exp": time.Now().Add(time.Hour).Unix(),
	}
	return rules, claims
}

// BenchmarkClaimRules is what ten claim rules cost a cached token beside
// none, the same ES256 token to both verifiers: through Authenticate alone
// (authenticate/...), through a whole request on a loopback server with
// the access log (request/...), and the two requests in turns, reporting
// the ruled one's median time as a ratio of the plain one's, measured in
// the same moments (x-none); and the ten rules in audit mode, of which
// one would refuse the token, counted and logged on every request
// (audited).
//
//	go test ./auth -run '^$' -bench ClaimRules -count 10
func BenchmarkClaimRules(b *testing.B) {
	k := authtest.NewKey(b, "ES256")
	rules, claims := tenRules()
	ks := authtest.KeySet(k)
	plain := newVerifier(b, auth.Config{}, ks)
	ruled := newVerifier(b, auth.Config{Claims: rules}, ks)
	audited := newVerifier(b, auth.Config{Claims: rules, Audit: []string{"claims"}}, ks)
	token := authtest.Token(b, k, nil, authtest.Claims(claims))
	// A token of the same size that the first rule refuses.
	wrong := maps.Clone(claims)
	wrong["email_verified"] = 0
	refused := authtest.Token(b, k, nil, authtest.Claims(wrong))
	for _, tt := range []struct {
		name  string
		v     *auth.Verifier
		token string
	}{{"none", plain, token}, {"rules", ruled, token}, {"audited", audited, refused}} {
		b.Run("authenticate/"+tt.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/plants?limit=10", nil)
			req.Header.Set("Authorization", "Bearer "+tt.token)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tt.v.Authenticate(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	get := func(b *testing.B, url, token string) {
		req, err := http.NewRequest("GET", url+"?limit=10", nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	plainSrv, ruledSrv, auditedSrv := serveVerifier(b, plain), serveVerifier(b, ruled), serveVerifier(b, audited)
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2])
	}
	for _, tt := range []struct {
		name       string
		url, token string
	}{{"rules", ruledSrv.url, token}, {"audited", auditedSrv.url, refused}} {
		b.Run("request/in-turns/"+tt.name, func(b *testing.B) {
			// Medians, not sums: one request descheduled for milliseconds
			// by the rest of the machine would outweigh thousands.
			var dRuled, dPlain []time.Duration
			for i := 0; b.Loop(); i++ {
				x, y := inTurns(i, func() { get(b, tt.url, tt.token) }, func() { get(b, plainSrv.url, token) })
				dRuled, dPlain = append(dRuled, x), append(dPlain, y)
			}
			b.ReportMetric(median(dRuled), "ns/op")
			b.ReportMetric(median(dRuled)/median(dPlain), "x-none")
		})
	}
}
