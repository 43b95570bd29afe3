package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/jws"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/plants"
)

// TestIssuersFileServe serves two issuers from an issuers file, with a
// catalog whose readers name them: the same subject of each issuer sees
// its own plants, the access line and the metrics name the issuer, and a
// SIGHUP that removes an issuer refuses its tokens from then on.
func TestIssuersFileServe(t *testing.T) {
	dir := t.TempDir()
	staff, cust := authtest.NewKeyID(t, "ES256", "same-kid"), authtest.NewKeyID(t, "EdDSA", "same-kid")
	staffKeys, custKeys := authtest.WriteJWKS(t, staff), authtest.WriteJWKS(t, cust)
	issuers := filepath.Join(dir, "issuers.yaml")
	write := func(yaml string) {
		t.Helper()
		if err := os.WriteFile(issuers, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	both := fmt.Sprintf(`issuers:
  - name: staff
    issuer: https://sso.example/realms/staff
    key_file: %s
    groups_claim: realm_access.roles
  - name: customers
    issuer: https://sso.example/realms/customers
    key_file: %s
    required_scope: plants:read
`, staffKeys, custKeys)
	write(both)
	catalog := filepath.Join(dir, "catalog.json")
	if err := os.WriteFile(catalog, []byte(`[
		{"name": "Open to all", "readers": ["*"]},
		{"name": "Staff alice's", "readers": ["user@staff:alice"]},
		{"name": "Staff gardeners'", "readers": ["group@staff:gardeners"]},
		{"name": "Any customer's", "readers": ["*@customers"]},
		{"name": "Customer alice's", "readers": ["user@customers:alice"]},
		{"name": "Unnamed alice's", "readers": ["user:alice"]}
	]`), 0o644); err != nil {
		t.Fatal(err)
	}
	in := startServe(t, nil, "-jwt-issuers-file", issuers, "-data", catalog)
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	// "user:alice" names a caller of the -jwt-* flags' issuer, which the
	// file replaces: the plant is hidden, and the start says so.
	const unmatched = "the catalog names readers that no configured issuer can match; the plants they name are hidden from the callers they mean"
	warning := in.stderr.WaitLine(t, "warning of the unmatched reader", func(l map[string]any) bool { return l["msg"] == unmatched })
	wantWarning(t, warning, 1, []string{"user:alice"}, 1, 1, []string{"staff", "customers"}, `with an issuers file, name the issuer: "user@<name>:<sub>"`)

	staffTok := authtest.Token(t, staff, nil, authtest.Claims(map[string]any{"iss": "https://sso.example/realms/staff", "realm_access": map[string]any{"roles": []string{"gardeners"}}}))
	custTok := authtest.Token(t, cust, nil, authtest.Claims(map[string]any{"iss": "https://sso.example/realms/customers", "scope": "plants:read", "groups": []string{"gardeners"}}))
	unscoped := authtest.Token(t, cust, nil, authtest.Claims(map[string]any{"iss": "https://sso.example/realms/customers"}))
	spoof := authtest.Token(t, cust, nil, authtest.Claims(map[string]any{"iss": "https://sso.example/realms/staff"}))
	names := func(token string) (int, []string) {
		status, body, _ := get(t, in.api+"/plants", token)
		var ps []wirePlant
		_ = json.Unmarshal(body, &ps)
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return status, out
	}
	for _, tt := range []struct {
		name   string
		token  string
		status int
		want   []string
	}{
		{"staff alice", staffTok, 200, []string{"Open to all", "Staff alice's", "Staff gardeners'"}},
		{"customer alice", custTok, 200, []string{"Any customer's", "Customer alice's", "Open to all"}},
		{"customer without the scope the customers issuer requires", unscoped, 403, nil},
		{"customers' key, staff's iss", spoof, 401, nil},
	} {
		status, got := names(tt.token)
		if status != tt.status || !slices.Equal(got, tt.want) {
			t.Errorf("%s: %d %q; want %d %q", tt.name, status, got, tt.status, tt.want)
		}
	}
	line := in.stderr.WaitLine(t, "for the access line of a customer", func(l map[string]any) bool {
		return l["msg"] == "request" && l["iss"] == "customers" && l["sub"] == "alice"
	})
	// plants is the count the list handler wrote: customer alice's three.
	if line["status"] != 200.0 || line["plants"] != 3.0 {
		t.Errorf("access line %v; want status 200 and plants 3", line)
	}
	_, metrics, _ := get(t, in.admin+"/metrics", "")
	for _, want := range []string{
		`plantstore_auth_failures_total{issuer="staff",reason="unknown_key"} 1`,
		`plantstore_auth_failures_total{issuer="customers",reason="insufficient_scope"} 1`,
		`plantstore_jwks_keys{issuer="staff"} 1`,
		`plantstore_jwks_keys{issuer="customers"} 1`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// Remove the customers issuer and reload.
	write(strings.Split(both, "  - name: customers")[0])
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	in.stderr.WaitLine(t, "for the reload", func(l map[string]any) bool { return l["msg"] == "issuers file reloaded" })
	in.stderr.WaitCount(t, unmatched, 2)
	warnings := slices.DeleteFunc(in.stderr.Lines(t), func(l map[string]any) bool { return l["msg"] != unmatched })
	wantWarning(t, warnings[1], 3, []string{"*@customers", "user@customers:alice", "user:alice"}, 3, 3, []string{"staff"}, "")
	if status, _ := names(custTok); status != 401 {
		t.Errorf("customer after its issuer was removed: %d, want 401", status)
	}
	if status, got := names(staffTok); status != 200 || len(got) != 3 {
		t.Errorf("staff after the reload: %d %q", status, got)
	}
	_, metrics, _ = get(t, in.admin+"/metrics", "")
	if regexp.MustCompile(`plantstore_jwks_keys\{issuer="customers"\}`).Match(metrics) {
		t.Errorf("/metrics still counts the removed issuer's keys")
	}
	// A bad file keeps the last good issuers.
	write("issuers:\n  - name: staff\n    unknown_key: 1\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	in.stderr.WaitLine(t, "for the refusal", func(l map[string]any) bool {
		return l["msg"] == "issuers file reload refused; the previous issuers keep serving"
	})
	if status, _ := names(staffTok); status != 200 {
		t.Errorf("staff after a refused reload: %d, want 200", status)
	}
	// The catalog file, reloaded on that SIGHUP, did not change: one
	// warning for it, as for every catalog and issuers reloaded.
	in.stderr.WaitCount(t, unmatched, 3)
	// A catalog whose readers all match is quiet.
	if err := os.WriteFile(catalog, []byte(`[{"name": "Staff alice's", "readers": ["user@staff:alice"]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	in.stderr.WaitCount(t, "catalog reloaded", 3)
	in.stop()
	<-in.done
	in.done <- nil
	if n := strings.Count(in.stderr.String(), `"msg":"`+unmatched+`"`); n != 3 {
		t.Errorf("%d warnings of unmatched readers; want 3: at the start and on two reloads, none for the catalog that matches", n)
	}
}

// wantWarning checks a warning of unmatched readers.
func wantWarning(t testing.TB, l map[string]any, readers int, examples []string, plants, hidden int, issuers []string, hint string) {
	t.Helper()
	strs := func(v any) []string {
		var out []string
		for _, x := range v.([]any) {
			out = append(out, x.(string))
		}
		return out
	}
	if l["level"] != "warn" || l["readers"] != float64(readers) || !slices.Equal(strs(l["examples"]), examples) ||
		l["plants"] != float64(plants) || l["hidden"] != float64(hidden) || !slices.Equal(strs(l["issuers"]), issuers) ||
		!strings.Contains(l["hint"].(string), hint) {
		t.Errorf("warning %v; want %d readers such as %q, %d plants, %d hidden, issuers %q, a hint holding %q", l, readers, examples, plants, hidden, issuers, hint)
	}
}

// TestIssuersFileUsage checks that the file excludes the per-issuer flags
// and -dev, and that what the file says wrong is a usage error naming its
// line.
func TestIssuersFileUsage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "issuers.yaml")
	if err := os.WriteFile(path, []byte("issuers:\n  - name: staff\n    issuer: https://a\n    audiance: [x]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A good file: what is wrong in the rows below comes from a flag.
	good := filepath.Join(t.TempDir(), "good.yaml")
	if err := os.WriteFile(good, []byte("issuers:\n  - name: staff\n    issuer: https://a\n    key_file: "+
		authtest.WriteJWKS(t, authtest.NewKey(t, "ES256"))+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reserved, fetched := filepath.Join(t.TempDir(), "reserved.yaml"), filepath.Join(t.TempDir(), "fetched.yaml")
	if err := os.WriteFile(reserved, []byte("issuers:\n  - name: default\n    issuer: https://a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fetched, []byte("issuers:\n  - name: staff\n    issuer: https://a\n    jwks_url: http://127.0.0.1:1/jwks\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	document := filepath.Join(t.TempDir(), "document.yaml")
	if err := os.WriteFile(document, []byte("issuers:\n  - name: staff\n    issuer: http://127.0.0.1:1/realms/staff/.well-known/openid-configuration\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	staleBad := filepath.Join(t.TempDir(), "stale.yaml")
	if err := os.WriteFile(staleBad, []byte("issuers:\n  - name: staff\n    issuer: https://a\n    jwks_url: http://127.0.0.1:1/jwks\n    max_stale: -1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"-jwt-issuers-file", path}, nil, path + `:4: unknown key "audiance"`},
		// The whole refusal is matched: the file's own error names
		// -jwt-issuers-file, which holds "-jwt-issuer" too.
		{[]string{"-jwt-issuers-file", path, "-jwt-audience", "x"}, nil, "-jwt-audience (PLANTSTORE_JWT_AUDIENCE) belongs to one issuer"},
		{[]string{"-jwt-issuers-file", path}, map[string]string{"PLANTSTORE_JWT_GROUPS_CLAIM": "roles"}, "(PLANTSTORE_JWT_GROUPS_CLAIM) belongs to one issuer"},
		{[]string{"-jwt-issuers-file", path, "-jwt-issuer", "https://a"}, nil, "-jwt-issuer (PLANTSTORE_JWT_ISSUER) belongs to one issuer"},
		{[]string{"-dev", "-jwt-issuers-file", path}, nil, "cannot be combined with -jwt-issuers-file"},
		// A flag every issuer shares, or one a file issuer falls back to,
		// is named as the flag, not as a line of the file.
		{[]string{"-jwt-issuers-file", good, "-jwt-leeway", "-1s"}, nil, `invalid value "-1s" for flag -jwt-leeway`},
		{[]string{"-jwt-issuers-file", good}, map[string]string{"PLANTSTORE_DPOP_WINDOW": "-1s"}, `PLANTSTORE_DPOP_WINDOW`},
		{[]string{"-jwt-issuers-file", good, "-jwt-required-scope", "two words"}, nil, `invalid value "two words" for flag -jwt-required-scope`},
		{[]string{"-jwt-issuers-file", reserved}, nil, reserved + `:2: name: issuer name "default" is reserved`},
		{[]string{"-jwt-issuers-file", document}, nil, document + `:3: issuer staff: issuer: this is the URL of the issuer's discovery document, not the issuer: use http://127.0.0.1:1/realms/staff (the document's "issuer")`},
		{[]string{"-jwt-issuers-file", fetched, "-jwks-refresh", "-1s"}, nil, `invalid value "-1s" for flag -jwks-refresh`},
		// The rules on tokens meant for this resource are each issuer's.
		{[]string{"-jwt-issuers-file", staleBad}, nil, staleBad + ":5: issuer staff: max_stale: negative duration"},
	} {
		err := run(t.Context(), append([]string{"serve", "-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0"}, tt.args...), envOf(tt.env), nil, io.Discard, io.Discard)
		if !isUsage(err) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("serve %q = %v; want a usage error containing %q", tt.args, err, tt.want)
		}
	}
}

// TestIssuerNameRules holds the two readers of issuer names to one rule:
// auth, which refuses to configure an issuer of a name, and plants, which
// refuses a catalog reader qualified by a name ("group@<name>:x"). They
// agree on every name of the corpus but the two that auth keeps for the
// metrics' issuer label: a reader of "default" or "unknown" is well
// formed, and no caller can ever hold it.
func TestIssuerNameRules(t *testing.T) {
	keys := keys.NewKeySet([]keys.Key{{ID: "k", Public: []byte(strings.Repeat("s", 32))}})
	corpus := []string{
		"staff", "a", "0", "-", "a-b-c", "x9", strings.Repeat("a", 32), strings.Repeat("a", 33), "",
		"Staff", "st aff", "staff!", "staff@x", "st:aff", "stäff", "st\x00aff", "st.aff", "st_aff",
		auth.UnnamedIssuerLabel, auth.UnknownIssuerLabel, "defaults", "unknown-1",
	}
	for _, name := range corpus {
		_, err := auth.NewVerifier(auth.Options{}, auth.Issuer{Name: name, Config: auth.Config{Issuer: "https://idp.example/" + name}, JWS: jws.New(keys)})
		authOK := err == nil
		plantsOK := plants.ValidIssuerName(name)
		reserved := name == auth.UnnamedIssuerLabel || name == auth.UnknownIssuerLabel
		switch {
		case name == "" && authOK:
			// The unnamed issuer, which qualifies nobody.
		case reserved && (authOK || !plantsOK):
			t.Errorf("reserved name %q: auth accepts %v, plants %v; want auth to refuse a name plants reads", name, authOK, plantsOK)
		case !reserved && authOK != plantsOK:
			t.Errorf("issuer name %q: auth accepts %v (%v), plants %v; want them to agree", name, authOK, err, plantsOK)
		}
	}
}
