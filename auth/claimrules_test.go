package auth_test

import (
	"net/http"
	"strings"
	"testing"

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
