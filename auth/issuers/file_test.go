package issuers_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/issuers"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/observability/logtest"
	"github.com/plantstore/plantstore/observability/metricstest"
	"github.com/plantstore/plantstore/observability/setting"
)

// writeIssuers writes an issuers file and returns its path.
func writeIssuers(t testing.TB, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "issuers.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadIssuersFileErrors(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(strings.Repeat("s", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, yaml string
		line       int
		want       string
	}{
		{"empty file", "", 0, "empty file"},
		{"no issuers", "issuers: []\n", 0, "no issuer"},
		{"not a list", "issuers: staff\n", 1, "the string `staff` where a list of issuers belongs"},
		{"an issuer not a mapping", "issuers:\n  - staff\n", 2, "the string `staff` where an issuer (a mapping of its settings) belongs"},
		{"unknown top key", "issuers: []\nextra: 1\n", 2, `unknown key "extra"`},
		{"unknown issuer key", "issuers:\n  - name: staff\n    issuer: https://a\n    audiance: [x]\n", 4, `unknown key "audiance"`},
		{"repeated key", "issuers:\n  - name: staff\n    issuer: https://a\n    issuer: https://b\n", 4, `"issuer" already defined at line 3`},
		{"repeated name", "issuers:\n  - name: staff\n    issuer: https://a\n  - name: staff\n    issuer: https://b\n", 4, `issuer name "staff" appears twice (first at line 2)`},
		{"repeated iss", "issuers:\n  - name: a\n    issuer: https://a\n  - name: b\n    issuer: https://a\n", 5, `also that of issuer a`},
		{"bad name", "issuers:\n  - name: Staff\n    issuer: https://a\n", 2, `issuer name "Staff"`},
		{"no iss", "issuers:\n  - name: staff\n    audiences: [x]\n", 2, "issuer staff: issuer: no iss value"},
		{"no name", "issuers:\n  - issuer: https://a\n", 2, "name: no name"},
		{"reserved name default", "issuers:\n  - name: default\n    issuer: https://a\n", 2, `issuer name "default" is reserved`},
		{"reserved name unknown", "issuers:\n  - name: a\n    issuer: https://a\n  - name: unknown\n    issuer: https://b\n", 4, `issuer name "unknown" is reserved`},
		{"iss with a password", "issuers:\n  - name: staff\n    issuer: https://u:s3cret@a/r\n", 3, "without user information or query"},
		{"iss with a query", "issuers:\n  - name: staff\n    key_file: k.json\n    issuer: https://a/r?k=v\n", 4, "without user information or query"},
		{"iss that is a discovery document", "issuers:\n  - name: staff\n    issuer: https://a/realms/r/.well-known/openid-configuration\n", 3, "the URL of the issuer's discovery document, not the issuer: use https://a/realms/r (the document's \"issuer\")"},
		{"iss that is an RFC 8414 document", "issuers:\n  - name: staff\n    issuer: https://a/.well-known/oauth-authorization-server/t1\n", 3, "use https://a/t1 (the document's"},
		{"a list of issuers without the key", "- name: staff\n  issuer: https://a\n", 1, `the file is a list; want "issuers:" at the top, with the issuers as a list under it`},
		{"an issuer without the key", "name: staff\nissuer: https://a\n", 1, `no key "issuers" (the file starts with "name")`},
		{"a string", "staff\n", 1, "the file is not a mapping"},
		{"two key sources", "issuers:\n  - name: staff\n    issuer: https://a\n    jwks_url: https://a/jwks\n    key_file: k.json\n", 5, "key_file: set at most one of jwks_url, key_file and hmac_secret_file"},
		{"bad dpop mode", "issuers:\n  - name: staff\n    issuer: https://a\n    dpop: always\n", 4, `dpop: "always"`},
		{"bad mtls mode", "issuers:\n  - name: staff\n    issuer: https://a\n    mtls: on\n", 4, `mtls: "on"`},
		{"wrong type", "issuers:\n  - name: staff\n    issuer: https://a\n    audiences: {a: b}\n", 4, "a mapping where a list of strings belongs"},
		{"a list for a string", "issuers:\n  - name: [staff]\n    issuer: https://a\n", 2, "a list where a string belongs"},
		{"blank audience", "issuers:\n  - name: staff\n    issuer: https://a\n    hmac_secret_file: " + secret + "\n    audiences: [' ']\n", 5, "audiences: blank audience"},
		{"unknown algorithm", "issuers:\n  - name: staff\n    issuer: https://a\n    hmac_secret_file: " + secret + "\n    algorithms: [HS256, XS1]\n", 5, `unknown algorithm "XS1"`},
		{"key source with no fitting key", "issuers:\n  - name: staff\n    issuer: https://a\n    hmac_secret_file: " + secret + "\n    algorithms: [RS256]\n", 4, "hmac_secret_file: hmac secret file " + secret + " has no key for the allowed algorithms RS256"},
		{"missing key file", "issuers:\n  - name: staff\n    issuer: https://a\n    key_file: /nonexistent/keys.json\n", 2, "/nonexistent/keys.json"},
		{"jwks url not http", "issuers:\n  - name: staff\n    issuer: https://a\n    jwks_url: ftp://a/jwks\n", 4, `jwks_url: scheme "ftp"`},
		{"issuer not a URL to discover", "issuers:\n  - name: staff\n    issuer: plantstore\n", 3, "issuer: OIDC discovery"},
		{"token type of a DPoP proof", "issuers:\n  - name: staff\n    issuer: https://a\n    token_types: [dpop+jwt]\n", 4, `issuer staff: token_types: "dpop+jwt" names another kind of JWT`},
		{"blank client", "issuers:\n  - name: staff\n    issuer: https://a\n    clients: [web, '']\n", 4, "issuer staff: clients: blank client"},
		{"claim rule with an unknown key", "issuers:\n  - name: staff\n    issuer: https://a\n    claims:\n      - {path: tid, equal: t-1}\n", 5, "equal"},
		{"claim rule with two operators", "issuers:\n  - name: staff\n    issuer: https://a\n    claims:\n      - {path: tid, equals: t-1, prefix: t-}\n", 5, `issuer staff: claims: rule 1 (path "tid"): two operators (equals and prefix)`},
		{"claim rule without a path", "issuers:\n  - name: staff\n    issuer: https://a\n    claims:\n      - {path: act, exists: false}\n      - {equals: true}\n", 6, "claims: rule 2: no path"},
		{"claim rule with an empty path element", "issuers:\n  - name: staff\n    issuer: https://a\n    claims: [{path: 'a..b', exists: true}]\n", 4, `has an empty path element`},
		{"claim rule without an operator", "issuers:\n  - name: staff\n    issuer: https://a\n    claims: [{path: tid}]\n", 4, "no operator"},
		{"claim rule one_of empty", "issuers:\n  - name: staff\n    issuer: https://a\n    claims: [{path: tid, one_of: []}]\n", 4, "one_of is empty"},
		{"audit of a rule that cannot be", "issuers:\n  - name: staff\n    issuer: https://a\n    audit: [claims, audiences]\n", 4, `issuer staff: audit: "audiences" is no rule that can be audited: want some of token_types, clients, max_lifetime, claims`},
		{"claim rules not a list", "issuers:\n  - name: staff\n    issuer: https://a\n    claims: {path: tid, exists: true}\n", 4, "a mapping where"},
		{"max lifetime without a unit", "issuers:\n  - name: staff\n    issuer: https://a\n    max_lifetime: 3600\n", 4, "the number `3600` where a duration with its unit (30s, 1h) belongs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeIssuers(t, tt.yaml)
			var v *auth.Verifier
			_, err := issuers.Load(t.Context(), path, issuers.Options{}, into(&v, auth.Options{}))
			var fe *setting.Error
			if !errors.As(err, &fe) || fe.File == "" {
				t.Fatalf("load %q = %v; want a *setting.Error of the file", tt.yaml, err)
			}
			if fe.File != path || fe.Line != tt.line || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("load %q = %q (line %d); want line %d and %q", tt.yaml, err, fe.Line, tt.line, tt.want)
			}
			if tt.line > 0 && !strings.HasPrefix(err.Error(), fmt.Sprintf("%s:%d: ", path, tt.line)) {
				t.Errorf("error %q does not start with FILE:LINE", err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q repeats a password of the file", err)
			}
		})
	}
}

// twoIssuers serves two issuers' JWKS that publish the same kid for
// different keys, and an issuers file naming both.
type twoIssuers struct {
	staffKey, custKey authtest.Key
	staffSrv, custSrv *authtest.Server
	path              string
	v                 *auth.Verifier
	f                 *issuers.Set
	reg               *prometheus.Registry
	m                 *auth.Metrics // on reg, as the sources' are
}

const (
	staffIss = "https://sso.example.com/realms/staff"
	custIss  = "https://sso.example.com/realms/customers"
)

func newTwoIssuers(t testing.TB) *twoIssuers {
	t.Helper()
	ti := &twoIssuers{
		staffKey: authtest.NewKeyID(t, "ES256", "shared-kid"),
		custKey:  authtest.NewKeyID(t, "ES256", "shared-kid"),
		reg:      prometheus.NewRegistry(),
	}
	ti.staffSrv = authtest.NewServer(t, authtest.JWKS(t, ti.staffKey))
	ti.custSrv = authtest.NewServer(t, authtest.JWKS(t, ti.custKey))
	ti.path = writeIssuers(t, fmt.Sprintf(`issuers:
  - name: staff
    issuer: %s
    jwks_url: %s
    audiences: [plantstore]
    groups_claim: realm_access.roles
  - name: customers
    issuer: %s
    jwks_url: %s
    audiences: [plantstore]
`, staffIss, ti.staffSrv.URL, custIss, ti.custSrv.URL))
	ti.m = auth.NewMetrics(ti.reg)
	f, err := issuers.Load(t.Context(), ti.path, issuers.Options{Sources: keys.SourceOptions{MinRefresh: time.Millisecond}, Metrics: ti.m}, into(&ti.v, auth.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	ti.f = f
	authtest.WaitFor(t, "both issuers' keys", func() bool { return ti.v.Ready() == nil })
	return ti
}

func (ti *twoIssuers) token(t testing.TB, k authtest.Key, iss, sub string, groups []string) string {
	t.Helper()
	c := authtest.Claims(map[string]any{"iss": iss, "aud": "plantstore", "sub": sub})
	if iss == staffIss {
		c["realm_access"] = map[string]any{"roles": groups}
	} else {
		c["groups"] = groups
	}
	return authtest.Token(t, k, nil, c)
}

// TestIssuersRouting covers routing by iss: each issuer's tokens verify
// with its keys and rules only, even when both publish the same kid, and
// the same subject in two issuers is two callers.
func TestIssuersRouting(t *testing.T) {
	ti := newTwoIssuers(t)
	tests := []struct {
		name       string
		token      string
		wantIssuer string
		wantGroups string
		want       auth.Reason
	}{
		{name: "staff token", token: ti.token(t, ti.staffKey, staffIss, "alice", []string{"gardeners"}), wantIssuer: "staff", wantGroups: "[gardeners]"},
		{name: "customers token, same sub", token: ti.token(t, ti.custKey, custIss, "alice", []string{"gardeners"}), wantIssuer: "customers", wantGroups: "[gardeners]"},
		{name: "groups at the other issuer's claim are not groups", token: authtest.Token(t, ti.custKey, nil, authtest.Claims(map[string]any{"iss": custIss, "aud": "plantstore", "realm_access": map[string]any{"roles": []string{"admins"}}})), wantIssuer: "customers", wantGroups: "[]"},
		{name: "iss spoof: customers' key, staff's iss, shared kid", token: ti.token(t, ti.custKey, staffIss, "alice", nil), want: auth.ReasonBadSignature},
		{name: "iss spoof: staff's key, customers' iss", token: ti.token(t, ti.staffKey, custIss, "alice", nil), want: auth.ReasonBadSignature},
		{name: "unknown iss", token: ti.token(t, ti.staffKey, "https://evil.example.com", "alice", nil), want: auth.ReasonUnknownIssuer},
		{name: "iss with a trailing slash is another iss", token: ti.token(t, ti.staffKey, staffIss+"/", "alice", nil), want: auth.ReasonUnknownIssuer},
		{name: "no iss", token: authtest.Token(t, ti.staffKey, nil, authtest.Claims(map[string]any{"aud": "plantstore"})), want: auth.ReasonUnknownIssuer},
		{name: "iss not a string", token: authtest.Token(t, ti.staffKey, nil, authtest.Claims(map[string]any{"iss": 7, "aud": "plantstore"})), want: auth.ReasonMalformed},
		{name: "wrong audience for the issuer", token: authtest.Token(t, ti.staffKey, nil, authtest.Claims(map[string]any{"iss": staffIss, "aud": "other"})), want: auth.ReasonAudience},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 { // the second time from the cache
				id, err := verify(t.Context(), ti.v, tt.token)
				if got := authtest.ReasonOf(t, err); got != tt.want {
					t.Fatalf("Verify = %v, %v; want reason %q", id, err, tt.want)
				}
				if err == nil && (id.Issuer != tt.wantIssuer || fmt.Sprint(id.Groups) != tt.wantGroups && !(tt.wantGroups == "[]" && len(id.Groups) == 0)) {
					t.Errorf("Verify = %+v; want issuer %q and groups %s", id, tt.wantIssuer, tt.wantGroups)
				}
			}
		})
	}
}

// TestUnknownIssuersCostNothing sends tokens with 1,000 random iss values:
// each is refused at once, no JWKS endpoint sees a request, and the
// metrics gain no series.
func TestUnknownIssuersCostNothing(t *testing.T) {
	ti := newTwoIssuers(t)
	e := gin.New()
	e.Use(observability.Middleware(nil, observability.NewHTTPMetrics(ti.reg), nil, nil), func(c *gin.Context) {
		// The status of the refusal auth.Middleware pushed.
		c.Next()
		var hs interface{ HTTPStatus() int }
		if last := c.Errors.Last(); last != nil && errors.As(last.Err, &hs) {
			c.Status(hs.HTTPStatus())
		}
	})
	e.GET("/plants", auth.Middleware(ti.v, ti.m), func(c *gin.Context) { c.Status(http.StatusOK) })
	send := func(tok string) int {
		req := httptest.NewRequest(http.MethodGet, "/plants", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec.Code
	}
	random := func(i int) string {
		return authtest.Token(t, ti.staffKey, map[string]any{"kid": fmt.Sprintf("kid-%d", i)}, authtest.Claims(map[string]any{"iss": fmt.Sprintf("https://random-%d.example", i)}))
	}
	series := func() int {
		mfs, err := ti.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, mf := range mfs {
			n += len(mf.GetMetric())
		}
		return n
	}
	// One of each answer first, so that their series exist.
	if code := send(ti.token(t, ti.staffKey, staffIss, "alice", nil)); code != http.StatusOK {
		t.Fatalf("staff token: %d", code)
	}
	if code := send(random(-1)); code != http.StatusUnauthorized {
		t.Fatalf("unknown issuer: %d", code)
	}
	hits := ti.staffSrv.Hits.Load() + ti.custSrv.Hits.Load()
	before := series()
	failures := func() float64 {
		return metricstest.Sum(t, ti.reg, "plantstore_auth_failures_total", map[string]string{"issuer": "unknown", "reason": "unknown_issuer"})
	}
	f0 := failures()
	for i := range 1000 {
		if code := send(random(i)); code != http.StatusUnauthorized {
			t.Fatalf("token %d of an unknown issuer: %d, want 401", i, code)
		}
	}
	if n := ti.staffSrv.Hits.Load() + ti.custSrv.Hits.Load(); n != hits {
		t.Errorf("the JWKS endpoints got %d requests for unknown issuers; want none", n-hits)
	}
	if n := series(); n != before {
		t.Errorf("metrics series went from %d to %d", before, n)
	}
	if got := failures() - f0; got != 1000 {
		t.Errorf("failures{issuer=unknown,reason=unknown_issuer} grew by %v, want 1000", got)
	}
}

// TestIssuerJWKSDown takes one issuer's JWKS down: its tokens with a kid
// it does not know are refused, /readyz-style readiness names it before
// its first fetch, and the other issuer keeps serving.
func TestIssuerJWKSDown(t *testing.T) {
	ti := newTwoIssuers(t)
	ti.custSrv.Set(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	if _, err := verify(t.Context(), ti.v, ti.token(t, ti.staffKey, staffIss, "alice", nil)); err != nil {
		t.Errorf("staff token while customers' JWKS is down: %v", err)
	}
	rotated := authtest.NewKeyID(t, "ES256", "new-kid")
	if _, err := verify(t.Context(), ti.v, ti.token(t, rotated, custIss, "bob", nil)); authtest.ReasonOf(t, err) != auth.ReasonUnknownKey {
		t.Errorf("customers token with a new kid while its JWKS is down = %v, want unknown_key", err)
	}
	if _, err := verify(t.Context(), ti.v, ti.token(t, ti.custKey, custIss, "bob", nil)); err != nil {
		t.Errorf("customers token of the last good key: %v", err)
	}
	if err := ti.v.Ready(); err != nil {
		t.Errorf("Ready() = %v; the last good keys serve", err)
	}

	// A third issuer whose JWKS was never up: readiness names it.
	down := authtest.NewServer(t, nil)
	down.Set(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	path := writeIssuers(t, fmt.Sprintf("issuers:\n  - name: staff\n    issuer: %s\n    jwks_url: %s\n  - name: partners\n    issuer: https://partners.example\n    jwks_url: %s\n", staffIss, ti.staffSrv.URL, down.URL))
	var v *auth.Verifier
	if _, err := issuers.Load(t.Context(), path, issuers.Options{}, into(&v, auth.Options{})); err != nil {
		t.Fatal(err)
	}
	authtest.WaitFor(t, "the staff keys", func() bool {
		err := v.Ready()
		return err != nil && !strings.Contains(err.Error(), "issuer staff")
	})
	if err := v.Ready(); err == nil || !strings.Contains(err.Error(), "issuer partners") {
		t.Errorf("Ready() = %v; want it to name issuer partners", err)
	}
}

// TestIssuerRotation rotates one issuer's key: its new kid is fetched on
// first sight, the other issuer's endpoint sees nothing.
func TestIssuerRotation(t *testing.T) {
	ti := newTwoIssuers(t)
	staffHits := ti.staffSrv.Hits.Load()
	next := authtest.NewKeyID(t, "ES256", "next")
	ti.custSrv.Serve(authtest.JWKS(t, ti.custKey, next))
	tok := ti.token(t, next, custIss, "bob", nil)
	// The new kid is fetched on sight, once the last fetch is older than
	// the (1 ms) minimum refresh.
	authtest.WaitFor(t, "the new key to verify", func() bool { _, err := verify(t.Context(), ti.v, tok); return err == nil })
	if n := ti.staffSrv.Hits.Load(); n != staffHits {
		t.Errorf("staff's JWKS got %d requests when customers rotated; want none", n-staffHits)
	}
}

// TestIssuersReloadUnderLoad adds and removes an issuer by reloading the
// file while requests of both kinds flow: the staff issuer never fails,
// the customers issuer is refused as unknown once removed and accepted
// again once added back.
func TestIssuersReloadUnderLoad(t *testing.T) {
	ti := newTwoIssuers(t)
	staffOnly := writeIssuers(t, fmt.Sprintf("issuers:\n  - name: staff\n    issuer: %s\n    jwks_url: %s\n    audiences: [plantstore]\n    groups_claim: realm_access.roles\n", staffIss, ti.staffSrv.URL))
	full, err := os.ReadFile(ti.path)
	if err != nil {
		t.Fatal(err)
	}
	staffTok := ti.token(t, ti.staffKey, staffIss, "alice", nil)
	custTok := ti.token(t, ti.custKey, custIss, "bob", nil)
	var failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := verify(t.Context(), ti.v, staffTok); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	apply := func(is []auth.Issuer) error { return ti.v.SetIssuers(is...) }
	for round := range 5 {
		staff, _ := os.ReadFile(staffOnly)
		if err := os.WriteFile(ti.path, staff, 0o644); err != nil {
			t.Fatal(err)
		}
		added, removed, err := ti.f.Reload(apply)
		if err != nil || len(added) != 0 || fmt.Sprint(removed) != "[customers]" {
			t.Fatalf("round %d: reload without customers = %v, %v, %v", round, added, removed, err)
		}
		if _, err := verify(t.Context(), ti.v, custTok); authtest.ReasonOf(t, err) != auth.ReasonUnknownIssuer {
			t.Fatalf("round %d: customers token after its removal = %v, want unknown_issuer", round, err)
		}
		if err := os.WriteFile(ti.path, full, 0o644); err != nil {
			t.Fatal(err)
		}
		added, removed, err = ti.f.Reload(apply)
		if err != nil || fmt.Sprint(added) != "[customers]" || len(removed) != 0 {
			t.Fatalf("round %d: reload with customers = %v, %v, %v", round, added, removed, err)
		}
		authtest.WaitFor(t, "the customers keys", func() bool { _, err := verify(t.Context(), ti.v, custTok); return err == nil })
	}
	// A bad file is refused; the last good issuers keep serving.
	if err := os.WriteFile(ti.path, []byte("issuers:\n  - name: staff\n    bogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ti.f.Reload(apply); err == nil {
		t.Error("reload of a bad file succeeded")
	}
	if _, err := verify(t.Context(), ti.v, custTok); err != nil {
		t.Errorf("customers token after a refused reload: %v", err)
	}
	close(stop)
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d staff verifications failed during the reloads; want none", n)
	}
}

// TestIssuersReloadKeepsMetrics: a reload that changes an issuer's rules
// keeps its series (the new source records under the same name), so does
// a reload that is refused, and a reload that removes an issuer drops
// them.
func TestIssuersReloadKeepsMetrics(t *testing.T) {
	ti := newTwoIssuers(t)
	ks := func() map[string]float64 {
		return metricstest.ByLabel(t, ti.reg, "plantstore_jwks_keys", "issuer")
	}
	if got := ks(); got["customers"] != 1 || got["staff"] != 1 {
		t.Fatalf("plantstore_jwks_keys before the reloads = %v; want 1 for each issuer", got)
	}
	original, err := os.ReadFile(ti.path)
	if err != nil {
		t.Fatal(err)
	}
	rewrite := func(old, new string) {
		t.Helper()
		if err := os.WriteFile(ti.path, []byte(strings.Replace(string(original), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	apply := func(is []auth.Issuer) error { return ti.v.SetIssuers(is...) }

	// The customers issuer gains an audience: a new source replaces its own.
	rewrite(custIss+"\n    jwks_url: "+ti.custSrv.URL+"\n    audiences: [plantstore]", custIss+"\n    jwks_url: "+ti.custSrv.URL+"\n    audiences: [plantstore, shop]")
	if _, _, err := ti.f.Reload(apply); err != nil {
		t.Fatal(err)
	}
	authtest.WaitFor(t, "the new customers source's keys", func() bool { return ti.v.Ready() == nil })
	if got := ks(); got["customers"] != 1 || got["staff"] != 1 {
		t.Errorf("plantstore_jwks_keys after the customers issuer changed = %v; want 1 for each issuer", got)
	}

	// A change the verifier refuses leaves the serving issuers' series.
	rewrite(custIss+"\n    jwks_url: "+ti.custSrv.URL+"\n    audiences: [plantstore]", custIss+"\n    jwks_url: "+ti.custSrv.URL+"\n    audiences: [other]")
	if _, _, err := ti.f.Reload(func([]auth.Issuer) error { return errors.New("refused") }); err == nil {
		t.Fatal("a reload whose apply fails succeeded")
	}
	if got := ks(); got["customers"] != 1 || got["staff"] != 1 {
		t.Errorf("plantstore_jwks_keys after a refused reload = %v; want 1 for each issuer", got)
	}

	// Without the customers issuer, its series go.
	staffOnly := fmt.Sprintf("issuers:\n  - name: staff\n    issuer: %s\n    jwks_url: %s\n    audiences: [plantstore]\n    groups_claim: realm_access.roles\n", staffIss, ti.staffSrv.URL)
	if err := os.WriteFile(ti.path, []byte(staffOnly), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, removed, err := ti.f.Reload(apply); err != nil || fmt.Sprint(removed) != "[customers]" {
		t.Fatalf("reload without customers = %v, %v", removed, err)
	}
	if got := ks(); got["staff"] != 1 {
		t.Errorf("plantstore_jwks_keys after the customers issuer was removed = %v; want staff's 1", got)
	} else if _, ok := got["customers"]; ok {
		t.Errorf("plantstore_jwks_keys after the customers issuer was removed = %v; want no customers series", got)
	}
}

// TestIssuersFileDefaults: an issuer that names no required_scope, dpop
// or mtls takes those of the defaults (the -jwt-required-scope,
// -jwt-dpop and -jwt-mtls flags); one that names them keeps its own.
func TestIssuersFileDefaults(t *testing.T) {
	ks := authtest.WriteJWKS(t, authtest.NewKey(t, "ES256"))
	path := writeIssuers(t, fmt.Sprintf(`issuers:
  - name: plain
    issuer: https://plain.example
    key_file: %[1]s
  - name: own
    issuer: https://own.example
    key_file: %[1]s
    required_scope: shop:read
    dpop: required
    mtls: required
`, ks))
	f, err := issuers.Load(t.Context(), path, issuers.Options{Defaults: auth.Config{RequiredScope: "plants:read", DPoP: auth.DPoPOff, MTLS: auth.MTLSOff}}, accept)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]auth.Config{}
	for _, is := range f.Issuers() {
		got[is.Name] = is.Config
	}
	for name, want := range map[string]struct {
		scope string
		dpop  auth.DPoPMode
		mtls  auth.MTLSMode
	}{"plain": {"plants:read", auth.DPoPOff, auth.MTLSOff}, "own": {"shop:read", auth.DPoPRequired, auth.MTLSRequired}} {
		if c := got[name]; c.RequiredScope != want.scope || c.DPoP != want.dpop || c.MTLS != want.mtls {
			t.Errorf("issuer %s: required scope %q, DPoP %v, mTLS %v; want %q, %v, %v", name, c.RequiredScope, c.DPoP, c.MTLS, want.scope, want.dpop, want.mtls)
		}
	}
}

// TestIssuersFileSettingsFromOptions: a bad value an issuer took from
// defaults (the flags) is returned as the *setting.Error of that
// setting, for the caller to name its flag, not at a line of the file;
// the same value written in the file is the file's, at its line.
func TestIssuersFileSettingsFromOptions(t *testing.T) {
	ks := authtest.WriteJWKS(t, authtest.NewKey(t, "ES256"))
	o := issuers.Options{Defaults: auth.Config{RequiredScope: "two words"}}
	inherits := writeIssuers(t, "issuers:\n  - name: staff\n    issuer: https://a\n    key_file: "+ks+"\n")
	_, err := issuers.Load(t.Context(), inherits, o, accept)
	var ce *setting.Error
	if !errors.As(err, &ce) || ce.Key != "required_scope" || ce.File != "" {
		t.Errorf("a bad scope from the options = %v; want the required_scope *setting.Error, not one of the file", err)
	}
	own := writeIssuers(t, "issuers:\n  - name: staff\n    issuer: https://a\n    key_file: "+ks+"\n    required_scope: two words\n")
	if _, err := issuers.Load(t.Context(), own, o, accept); !errors.As(err, &ce) || ce.File != own || ce.Line != 5 {
		t.Errorf("a bad scope of the file = %v; want a *setting.Error of the file at line 5", err)
	}

	// The rules of tokens meant for this resource: an issuer that leaves
	// one out takes the options', one that names it (even as off) keeps
	// its own.
	o = issuers.Options{Defaults: auth.Config{TokenTypes: []string{"at+jwt"}, Clients: []string{"web"}, MaxLifetime: time.Hour, MaxStale: 24 * time.Hour}}
	both := writeIssuers(t, "issuers:\n  - name: staff\n    issuer: https://a\n    key_file: "+ks+
		"\n  - name: shop\n    issuer: https://b\n    key_file: "+ks+"\n    token_types: [any]\n    clients: [app]\n    max_lifetime: 0s\n    max_stale: 0s\n")
	f, err := issuers.Load(t.Context(), both, o, accept)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]auth.Config{}
	for _, is := range f.Issuers() {
		got[is.Name] = is.Config
	}
	if c, d := got["staff"], o.Defaults; !slices.Equal(c.TokenTypes, d.TokenTypes) || !slices.Equal(c.Clients, d.Clients) || c.MaxLifetime != d.MaxLifetime || c.MaxStale != d.MaxStale {
		t.Errorf("staff, which names none of the four = %+v; want the defaults' %+v", c, d)
	}
	if c := got["shop"]; len(c.TokenTypes) != 0 || !slices.Equal(c.Clients, []string{"app"}) || c.MaxLifetime != 0 || c.MaxStale != 0 {
		t.Errorf("shop, which names all four (token_types any) = %+v; want its own", c)
	}
}

// rewrite replaces from with to in the issuers file, once, and reloads it
// into the verifier; it returns the requests the customers' JWKS had got
// before the reload.
func (ti *twoIssuers) rewrite(t *testing.T, from, to string) int64 {
	t.Helper()
	original, err := os.ReadFile(ti.path)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(original), from, to, 1)
	if changed == string(original) {
		t.Fatal("the rewrite changed nothing")
	}
	if err := os.WriteFile(ti.path, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	hits := ti.custSrv.Hits.Load()
	if _, _, err := ti.f.Reload(func(is []auth.Issuer) error { return ti.v.SetIssuers(is...) }); err != nil {
		t.Fatal(err)
	}
	return hits
}

// TestIssuersReloadKeepsKeys: a reload that changes an issuer's rules but
// not its key source (name, issuer, jwks_url) keeps that source: its keys
// verify at once, with no new fetch, so a reload never empties a key set
// that was serving.
func TestIssuersReloadKeepsKeys(t *testing.T) {
	ti := newTwoIssuers(t)
	custTok := ti.token(t, ti.custKey, custIss, "bob", nil)
	hits := ti.rewrite(t, custIss+"\n    jwks_url: "+ti.custSrv.URL+"\n    audiences: [plantstore]",
		custIss+"\n    jwks_url: "+ti.custSrv.URL+"\n    audiences: [plantstore, shop]\n    algorithms: [ES256]")
	if _, err := verify(t.Context(), ti.v, custTok); err != nil {
		t.Errorf("customers token right after a reload that changed its audiences: %v; want it verified by the kept keys", err)
	}
	if err := ti.v.Ready(); err != nil {
		t.Errorf("Ready() right after the reload = %v", err)
	}
	if n := ti.custSrv.Hits.Load(); n != hits {
		t.Errorf("the customers JWKS got %d requests on a reload that kept its source; want none", n-hits)
	}
	got := map[string]auth.Config{}
	for _, is := range ti.f.Issuers() {
		got[is.Name] = is.Config
	}
	if c := got["customers"]; !slices.Equal(c.Audiences, []string{"plantstore", "shop"}) || !slices.Equal(c.Algorithms, []string{"ES256"}) {
		t.Errorf("customers after the reload: %+v; want the new audiences and algorithms", c)
	}
}

// TestIssuersReloadIdPDown: with the customers issuer's IdP down, a reload
// that changes its rules but not its key source keeps its keys: its tokens
// verify at once, /readyz's check holds, and no fetch is tried.
func TestIssuersReloadIdPDown(t *testing.T) {
	ti := newTwoIssuers(t)
	custTok := ti.token(t, ti.custKey, custIss, "bob", nil)
	ti.custSrv.Set(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) })
	hits := ti.rewrite(t, custIss+"\n    jwks_url: "+ti.custSrv.URL+"\n    audiences: [plantstore]",
		custIss+"\n    jwks_url: "+ti.custSrv.URL+"\n    audiences: [plantstore, shop]\n    dpop: required")
	if err := ti.v.Ready(); err != nil {
		t.Errorf("Ready() after a reload with the IdP down = %v; want nil", err)
	}
	// dpop: required now: the bearer token is refused for that, once its
	// keys verified it.
	if _, err := verify(t.Context(), ti.v, custTok); authtest.ReasonOf(t, err) != auth.ReasonDPoPRequired {
		t.Errorf("customers token after the reload with its IdP down: %v; want it verified by the kept keys, then refused as dpop_required", err)
	}
	if n := ti.custSrv.Hits.Load(); n != hits {
		t.Errorf("the customers JWKS, down, got %d requests on a reload that kept its source; want none", n-hits)
	}
}

// TestIssuersReloadsUnderLoad reloads the issuers file 20 times while both
// issuers' tokens are verified from four goroutines, each reload changing
// both issuers' rules but neither's key source, with the customers IdP
// down throughout: no verification fails.
func TestIssuersReloadsUnderLoad(t *testing.T) {
	ti := newTwoIssuers(t)
	ti.custSrv.Set(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) })
	tokens := []string{ti.token(t, ti.staffKey, staffIss, "alice", nil), ti.token(t, ti.custKey, custIss, "bob", nil)}
	original, err := os.ReadFile(ti.path)
	if err != nil {
		t.Fatal(err)
	}
	variants := []string{string(original), strings.ReplaceAll(string(original), "audiences: [plantstore]", "audiences: [plantstore, shop]\n    algorithms: [ES256]")}
	if variants[0] == variants[1] {
		t.Fatal("the rewrite changed nothing")
	}
	var verified, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := verify(t.Context(), ti.v, tokens[i%2]); err != nil {
					failed.Add(1)
				} else {
					verified.Add(1)
				}
			}
		})
	}
	apply := func(is []auth.Issuer) error { return ti.v.SetIssuers(is...) }
	for round := range 20 {
		if err := os.WriteFile(ti.path, []byte(variants[(round+1)%2]), 0o644); err != nil {
			t.Fatal(err)
		}
		before := verified.Load()
		if added, removed, err := ti.f.Reload(apply); err != nil || len(added)+len(removed) != 0 {
			t.Fatalf("reload %d = %v, %v, %v; want the same issuers", round, added, removed, err)
		}
		// Some verifications between two reloads, so that each set of
		// issuers serves.
		authtest.WaitFor(t, "verifications after the reload", func() bool { return verified.Load() > before+8 })
	}
	close(stop)
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of %d verifications failed across 20 reloads; want none", n, n+verified.Load())
	}
}

// TestIssuersReloadTokenRules: a reload that makes an issuer require
// at+jwt tokens of one client, and bounds the age of its keys, applies to
// tokens verified before it (the cache holds none of the old rules), and
// keeps the issuer's key source.
func TestIssuersReloadTokenRules(t *testing.T) {
	ti := newTwoIssuers(t)
	before := ti.token(t, ti.custKey, custIss, "bob", nil)
	if _, err := verify(t.Context(), ti.v, before); err != nil {
		t.Fatalf("customers token before the reload: %v", err)
	}
	hits := ti.rewrite(t, custIss+"\n    jwks_url: "+ti.custSrv.URL+"\n",
		custIss+"\n    jwks_url: "+ti.custSrv.URL+"\n    token_types: [at+jwt]\n    clients: [shop-web]\n    max_lifetime: 10m\n    max_stale: 24h\n")
	claims := func(over map[string]any) map[string]any {
		return authtest.Claims(map[string]any{"iss": custIss, "aud": "plantstore", "sub": "bob", "client_id": "shop-web", "jti": fmt.Sprint(over)})
	}
	tests := []struct {
		name   string
		header map[string]any
		over   map[string]any
		want   auth.Reason
	}{
		{"at+jwt of shop-web", map[string]any{"typ": "at+jwt"}, nil, ""},
		{"typ JWT", nil, nil, auth.ReasonTokenType},
		{"another client", map[string]any{"typ": "at+jwt"}, map[string]any{"client_id": "admin-cli"}, auth.ReasonClient},
		{"an hour long", map[string]any{"typ": "at+jwt"}, map[string]any{"exp": time.Now().Add(time.Hour).Unix()}, auth.ReasonLifetime},
	}
	for _, tt := range tests {
		c := claims(tt.over)
		for k, v := range tt.over {
			c[k] = v
		}
		_, err := verify(t.Context(), ti.v, authtest.Token(t, ti.custKey, tt.header, c))
		if got := authtest.ReasonOf(t, err); got != tt.want {
			t.Errorf("%s after the reload: %v; want %q", tt.name, err, tt.want)
		}
	}
	if _, err := verify(t.Context(), ti.v, before); authtest.ReasonOf(t, err) != auth.ReasonTokenType {
		t.Errorf("the token verified before the reload: %v; want it refused as %s", err, auth.ReasonTokenType)
	}
	if n := ti.custSrv.Hits.Load(); n != hits {
		t.Errorf("the customers JWKS got %d requests on a reload that kept its source; want none", n-hits)
	}
	if err := ti.v.Ready(); err != nil {
		t.Errorf("Ready() after the reload = %v; want nil (keys confirmed just now)", err)
	}
}

// TestIssuersFileWatchesKeyFiles: the key file of an issuer of
// -jwt-issuers-file is watched as well.
func TestIssuersFileWatchesKeyFiles(t *testing.T) {
	a, b := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	vol := authtest.NewVolume(t, map[string][]byte{"jwks.json": authtest.JWKS(t, a)})
	logs := &logtest.Buffer{}
	log, _, err := observability.NewLogger(logs, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	const iss = "https://partners.example"
	path := writeIssuers(t, fmt.Sprintf("issuers:\n  - name: partners\n    issuer: %s\n    key_file: %s\n", iss, vol.Path("jwks.json")))
	ctx, cancel := context.WithCancel(context.Background())
	var v *auth.Verifier
	f, err := issuers.Load(ctx, path, issuers.Options{Sources: keys.SourceOptions{Log: log}}, into(&v, auth.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		f.Wait()
	})
	tokB := authtest.Token(t, b, nil, authtest.Claims(map[string]any{"iss": iss}))
	vol.Update(t, map[string][]byte{"jwks.json": authtest.JWKS(t, b)})
	line := logs.WaitLine(t, "for the issuer's new keys", func(l map[string]any) bool { return l["msg"] == "keys reloaded" })
	if line["issuer"] != "partners" {
		t.Errorf("keys reloaded line = %v; want issuer partners", line)
	}
	if _, err := verify(t.Context(), v, tokB); err != nil {
		t.Errorf("token of the issuer's new key: %v", err)
	}
}

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	os.Exit(m.Run())
}

// verify authenticates token, sent as a bearer token, with v.
func verify(ctx context.Context, v *auth.Verifier, token string) (*auth.Identity, error) {
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/plants", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	return v.Authenticate(r)
}

// into returns the apply function of Load that makes *v, a verifier of o
// over the issuers.
func into(v **auth.Verifier, o auth.Options) func([]auth.Issuer) error {
	return func(is []auth.Issuer) (err error) {
		*v, err = auth.NewVerifier(o, is...)
		return err
	}
}

// accept is the apply function of Load that takes the issuers as they
// are, for the tests that look at them rather than verify with them.
func accept([]auth.Issuer) error { return nil }

// TestFileReadsEveryConfigKey: each setting of auth.Config, under its
// yaml key, is read from the file into the issuer's Config, so a setting
// added to Config is a key of the file with nothing more to do.
func TestFileReadsEveryConfigKey(t *testing.T) {
	keyFile := authtest.WriteJWKS(t, authtest.NewKey(t, "ES256"))
	typ := reflect.TypeFor[auth.Config]()
	for f := range typ.Fields() {
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		t.Run(key, func(t *testing.T) {
			for _, sample := range []string{"https://b.example", "[ES256]", "[x]", "[at+jwt]", "1h", "off", "{cache: 1h}", "[{path: tid, exists: true}]", "[claims]"} {
				yaml := fmt.Sprintf("issuers:\n  - name: staff\n    issuer: https://a.example\n    key_file: %s\n", keyFile)
				if key != "issuer" {
					yaml += "    " + key + ": " + sample + "\n"
				} else {
					yaml = strings.Replace(yaml, "https://a.example", sample, 1)
				}
				f, err := issuers.Load(t.Context(), writeIssuers(t, yaml), issuers.Options{}, accept)
				if err != nil {
					continue // not a value of this setting
				}
				c := f.Issuers()[0].Config
				if !reflect.ValueOf(c).FieldByName(fieldName(typ, key)).IsZero() {
					return
				}
				t.Errorf("%s: %s read from the file leaves Config.%s unset", key, sample, fieldName(typ, key))
				return
			}
			t.Errorf("%s: no sample value the file takes; give this test one", key)
		})
	}
}

// fieldName returns the name of the field of typ whose yaml key is key.
func fieldName(typ reflect.Type, key string) string {
	for f := range typ.Fields() {
		if k, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); k == key {
			return f.Name
		}
	}
	return ""
}
