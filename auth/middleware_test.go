package auth_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/observability/logtest"
)

// renderErrors stands in for plants.RenderErrors: after the handlers, it
// turns the last pushed error into its status and a JSON body.
func renderErrors(c *gin.Context) {
	c.Next()
	if len(c.Errors) == 0 || c.Writer.Written() {
		return
	}
	err := c.Errors.Last().Err
	status := http.StatusInternalServerError
	var hs interface{ HTTPStatus() int }
	if errors.As(err, &hs) {
		status = hs.HTTPStatus()
	}
	c.JSON(status, gin.H{"error": status, "message": err.Error()})
}

// apiServer is a loopback server with the service's middleware order
// around one protected route that answers with the caller's Identity.
type apiServer struct {
	url string
	reg *prometheus.Registry
	log *logtest.Buffer
}

func newAPIServer(t testing.TB, cfg auth.Config, ks keys.Keys) apiServer {
	t.Helper()
	return serveVerifier(t, newVerifier(t, cfg, ks))
}

// serveVerifier is newAPIServer around the verifier v.
func serveVerifier(t testing.TB, v *auth.Verifier) apiServer {
	t.Helper()
	reg := prometheus.NewRegistry()
	logs := &logtest.Buffer{}
	_, access, err := observability.NewLogger(logs, "debug", "json")
	if err != nil {
		t.Fatal(err)
	}

	r := gin.New()
	r.Use(observability.Middleware(access, observability.NewHTTPMetrics(reg), nil, nil), renderErrors)
	r.GET("/plants", auth.Middleware(v, auth.NewMetrics(reg)), func(c *gin.Context) {
		id, ok := auth.FromGin(c)
		if !ok {
			c.JSON(http.StatusInternalServerError, gin.H{"error": 500, "message": "no identity"})
			return
		}
		c.JSON(http.StatusOK, id)
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return apiServer{url: srv.URL + "/plants", reg: reg, log: logs}
}

func TestMiddleware(t *testing.T) {
	k := authtest.NewKey(t, "ES256")
	ks := authtest.KeySet(k)
	scoped := auth.Config{RequiredScope: "plants:read"}
	good := authtest.Token(t, k, nil, authtest.Claims(map[string]any{"groups": []string{"gardeners"}, "scope": "plants:read"}))
	expired := authtest.Token(t, k, nil, authtest.Claims(map[string]any{"exp": 1}))
	unscoped := authtest.Token(t, k, nil, authtest.Claims(map[string]any{"scope": "openid"}))

	const (
		missing   = `Bearer realm="plantstore"`
		malformed = `Bearer realm="plantstore", error="invalid_token", error_description="malformed bearer token"`
	)
	tests := []struct {
		name          string
		cfg           auth.Config
		auth          []string // Authorization header values, one line each
		wantStatus    int
		wantChallenge string
		wantReason    auth.Reason
	}{
		{name: "valid", auth: []string{"Bearer " + good}, wantStatus: http.StatusOK},
		{name: "lower-case scheme", auth: []string{"bearer " + good}, wantStatus: http.StatusOK},
		{name: "upper-case scheme", auth: []string{"BEARER " + good}, wantStatus: http.StatusOK},
		{name: "missing", wantStatus: http.StatusUnauthorized, wantChallenge: missing, wantReason: auth.ReasonMissing},
		{name: "other scheme", auth: []string{"Basic YWxpY2U6c2VjcmV0"}, wantStatus: http.StatusUnauthorized, wantChallenge: malformed, wantReason: auth.ReasonMalformed},
		{name: "scheme only", auth: []string{"Bearer"}, wantStatus: http.StatusUnauthorized, wantChallenge: malformed, wantReason: auth.ReasonMalformed},
		{name: "empty token", auth: []string{"Bearer "}, wantStatus: http.StatusUnauthorized, wantChallenge: malformed, wantReason: auth.ReasonMalformed},
		{name: "empty header", auth: []string{""}, wantStatus: http.StatusUnauthorized, wantChallenge: malformed, wantReason: auth.ReasonMalformed},
		{name: "token alone", auth: []string{good}, wantStatus: http.StatusUnauthorized, wantChallenge: malformed, wantReason: auth.ReasonMalformed},
		{name: "two spaces (RFC 6750: 1*SP)", auth: []string{"Bearer  " + good}, wantStatus: http.StatusOK},
		{name: "only spaces after the scheme", auth: []string{"Bearer    "}, wantStatus: http.StatusUnauthorized, wantChallenge: malformed, wantReason: auth.ReasonMalformed},
		{name: "tab after the scheme", auth: []string{"Bearer\t" + good}, wantStatus: http.StatusUnauthorized, wantChallenge: malformed, wantReason: auth.ReasonMalformed},
		{name: "space then tab", auth: []string{"Bearer \t" + good}, wantStatus: http.StatusUnauthorized, wantChallenge: malformed, wantReason: auth.ReasonMalformed},
		{name: "trailing word", auth: []string{"Bearer " + good + " x"}, wantStatus: http.StatusUnauthorized, wantChallenge: malformed, wantReason: auth.ReasonMalformed},
		{name: "quote in token", auth: []string{`Bearer "` + good + `"`}, wantStatus: http.StatusUnauthorized, wantChallenge: malformed, wantReason: auth.ReasonMalformed},
		{name: "not a JWT", auth: []string{"Bearer not-a-jwt"}, wantStatus: http.StatusUnauthorized, wantChallenge: malformed, wantReason: auth.ReasonMalformed},
		{name: "two headers", auth: []string{"Bearer " + good, "Bearer " + good}, wantStatus: http.StatusUnauthorized, wantChallenge: malformed, wantReason: auth.ReasonMalformed},
		{name: "header of 8 KiB", auth: []string{"Bearer " + strings.Repeat("A", 8<<10-len("Bearer "))}, wantStatus: http.StatusUnauthorized, wantChallenge: malformed, wantReason: auth.ReasonMalformed},
		{
			name: "header over 8 KiB", auth: []string{"Bearer " + strings.Repeat("A", 8<<10-len("Bearer ")+1)}, wantStatus: http.StatusUnauthorized,
			wantChallenge: `Bearer realm="plantstore", error="invalid_token", error_description="authorization header too large"`, wantReason: auth.ReasonTooLarge,
		},
		{
			name: "valid token padded over 8 KiB", auth: []string{"Bearer " + good + strings.Repeat("=", 8<<10)}, wantStatus: http.StatusUnauthorized,
			wantChallenge: `Bearer realm="plantstore", error="invalid_token", error_description="authorization header too large"`, wantReason: auth.ReasonTooLarge,
		},
		{
			name: "expired", auth: []string{"Bearer " + expired}, wantStatus: http.StatusUnauthorized,
			wantChallenge: `Bearer realm="plantstore", error="invalid_token", error_description="token expired"`, wantReason: auth.ReasonExpired,
		},
		{
			name: "unknown key", auth: []string{"Bearer " + authtest.Token(t, authtest.NewKey(t, "ES256"), nil, authtest.Claims(nil))}, wantStatus: http.StatusUnauthorized,
			wantChallenge: `Bearer realm="plantstore", error="invalid_token", error_description="unknown signing key"`, wantReason: auth.ReasonUnknownKey,
		},
		{
			name: "no subject", auth: []string{"Bearer " + authtest.Token(t, k, nil, authtest.Claims(map[string]any{"sub": ""}))}, wantStatus: http.StatusUnauthorized,
			wantChallenge: `Bearer realm="plantstore", error="invalid_token", error_description="token has no subject"`, wantReason: auth.ReasonNoSubject,
		},
		{name: "scope present", cfg: scoped, auth: []string{"Bearer " + good}, wantStatus: http.StatusOK},
		{
			name: "scope missing", cfg: scoped, auth: []string{"Bearer " + unscoped}, wantStatus: http.StatusForbidden,
			wantChallenge: `Bearer realm="plantstore", error="insufficient_scope", scope="plants:read"`, wantReason: auth.ReasonScope,
		},
		{
			name: "scope missing but token expired", cfg: scoped, auth: []string{"Bearer " + expired}, wantStatus: http.StatusUnauthorized,
			wantChallenge: `Bearer realm="plantstore", error="invalid_token", error_description="token expired"`, wantReason: auth.ReasonExpired,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newAPIServer(t, tt.cfg, ks)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range tt.auth {
				req.Header.Add("Authorization", a)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}

			if resp.StatusCode != tt.wantStatus {
				t.Errorf("GET with Authorization %.40q: status %d; want %d (body %s)", tt.auth, resp.StatusCode, tt.wantStatus, body)
			}
			challenges := withoutMetadata(t, resp.Header.Values("WWW-Authenticate"))
			if tt.wantChallenge == "" && len(challenges) != 0 || tt.wantChallenge != "" && !slices.Equal(challenges, []string{tt.wantChallenge}) {
				t.Errorf("GET with Authorization %.40q: WWW-Authenticate %q; want %q", tt.auth, challenges, tt.wantChallenge)
			}

			wantFailures := map[auth.Reason]float64{}
			if tt.wantReason != "" {
				wantFailures[tt.wantReason] = 1
			}
			// Every reason, so that a series missing altogether fails too.
			got := failures(t, srv.reg)
			for _, r := range auth.Reasons() {
				if n, ok := got[r]; !ok || n != wantFailures[r] {
					t.Errorf("GET with Authorization %.40q: plantstore_auth_failures_total{reason=%q} = %v (present: %t); want %v", tt.auth, r, n, ok, wantFailures[r])
				}
			}

			logs := srv.log.String()
			for _, a := range tt.auth {
				if len(a) > len("Bearer ") && (strings.Contains(string(body), a[len("Bearer "):]) || strings.Contains(logs, a[len("Bearer "):])) {
					t.Errorf("GET with Authorization %.40q: the credential appears in the body or the logs", tt.auth)
				}
			}
			var line map[string]any
			if err := json.Unmarshal([]byte(logs), &line); err != nil {
				t.Fatalf("access log %q: %v", logs, err)
			}
			if tt.wantReason == "" {
				if line["sub"] != "alice" || line["auth_failure"] != nil {
					t.Errorf("GET with Authorization %.40q: access log sub = %v, auth_failure = %v; want alice, none", tt.auth, line["sub"], line["auth_failure"])
				}
				var id auth.Identity
				if err := json.Unmarshal(body, &id); err != nil || id.Subject != "alice" || !slices.Equal(id.Groups, []string{"gardeners"}) {
					t.Errorf("GET with Authorization %.40q: identity in context %s (%v); want alice in gardeners", tt.auth, body, err)
				}
				return
			}
			// A valid token that only lacks the scope names a known caller.
			var wantSub any
			if tt.wantReason == auth.ReasonScope {
				wantSub = "alice"
			}
			if line["auth_failure"] != string(tt.wantReason) || line["sub"] != wantSub {
				t.Errorf("GET with Authorization %.40q: access log auth_failure = %v, sub = %v; want %q, %v", tt.auth, line["auth_failure"], line["sub"], tt.wantReason, wantSub)
			}
		})
	}
}

// TestMiddlewareWritesNoBody checks that the middleware leaves the response
// to the error renderer: without one, gin answers the aborted request with
// its default status and an empty body.
func TestMiddlewareWritesNoBody(t *testing.T) {
	v := newVerifier(t, auth.Config{}, authtest.KeySet(authtest.NewKey(t, "ES256")))
	tests := []struct {
		name      string
		auth      string
		wantCalls int
	}{
		{name: "refused", auth: "Bearer abc", wantCalls: 0},
		{name: "missing", auth: "", wantCalls: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			r := gin.New()
			r.GET("/plants", auth.Middleware(v, nil), func(c *gin.Context) { calls++ })
			w := httptest.NewRecorder()
			req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/plants", nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			r.ServeHTTP(w, req)
			if w.Body.Len() != 0 || calls != tt.wantCalls {
				t.Errorf("GET with Authorization %q: body %q, handler calls %d; want empty body, %d calls", tt.auth, w.Body, calls, tt.wantCalls)
			}
			if w.Header().Get("WWW-Authenticate") == "" {
				t.Errorf("GET with Authorization %q: no WWW-Authenticate", tt.auth)
			}
		})
	}
}

func TestReasonDescriptions(t *testing.T) {
	seen := map[string]auth.Reason{}
	for _, r := range auth.Reasons() {
		d := r.Description()
		if d == "" || strings.ContainsAny(d, "\"\\") || d == auth.Reason("no such reason").Description() {
			t.Errorf("Reason(%q).Description() = %q; want a specific text without quotes or backslashes", r, d)
		}
		for _, c := range d {
			if c < 0x20 || c > 0x7e {
				t.Errorf("Reason(%q).Description() = %q; want printable ASCII", r, d)
				break
			}
		}
		if other, ok := seen[d]; ok {
			t.Errorf("Reason(%q) and Reason(%q) share the description %q", r, other, d)
		}
		seen[d] = r
	}
}

// TestFromGin: behind the access log's middleware the identity reaches the
// handler without the request being copied for a new context; without
// that middleware it is in the request context. Both give the same
// identity through FromGin.
func TestFromGin(t *testing.T) {
	k := authtest.NewKey(t, "ES256")
	v := newVerifier(t, auth.Config{}, authtest.KeySet(k))
	token := authtest.Token(t, k, nil, authtest.Claims(map[string]any{"sub": "alice", "groups": []string{"gardeners"}}))
	_, access, err := observability.NewLogger(io.Discard, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	for _, logged := range []bool{true, false} {
		t.Run(map[bool]string{true: "logged", false: "bare"}[logged], func(t *testing.T) {
			r := gin.New()
			if logged {
				r.Use(observability.Middleware(access, observability.NewHTTPMetrics(prometheus.NewRegistry()), nil, nil))
			}
			var before *http.Request
			r.GET("/plants", func(c *gin.Context) { before = c.Request }, auth.Middleware(v, auth.NewMetrics(prometheus.NewRegistry())), func(c *gin.Context) {
				id, ok := auth.FromGin(c)
				_, inContext := auth.FromContext(c.Request.Context())
				if !ok || id.Subject != "alice" || !slices.Equal(id.Groups, []string{"gardeners"}) {
					t.Errorf("FromGin = %+v, %t; want alice of gardeners", id, ok)
				}
				if copied := c.Request != before; copied != !logged || inContext != !logged {
					t.Errorf("request copied %t, identity in its context %t; want %t for both", copied, inContext, !logged)
				}
				c.Status(http.StatusNoContent)
			})
			w := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/plants", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			r.ServeHTTP(w, req)
			if w.Code != http.StatusNoContent {
				t.Fatalf("status %d, want 204", w.Code)
			}
		})
	}
}
