package introspect_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/introspect"
)

func init() { gin.SetMode(gin.ReleaseMode) }

// idp is an RFC 7662 introspection endpoint on loopback: it checks the
// client's Basic credentials and the form, and answers about the tokens it
// issued (active with their claims, or revoked), and active:false about any
// other. A test may put a handler of its own in front.
type idp struct {
	srv      *httptest.Server
	calls    atomic.Int64
	clientID string
	secret   string
	mu       sync.Mutex
	answers  map[string]map[string]any
	override atomic.Pointer[http.HandlerFunc]
	// bad counts requests that were not a well-formed introspection
	// request of the client.
	bad atomic.Int64
}

func newIDP(t testing.TB) *idp {
	t.Helper()
	p := &idp{clientID: "plant store", secret: "s3cret:with/odd+chars", answers: map[string]map[string]any{}}
	p.srv = httptest.NewServer(p)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *idp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.calls.Add(1)
	if h := p.override.Load(); h != nil {
		(*h)(w, r)
		return
	}
	user, pass, ok := r.BasicAuth()
	id, err1 := url.QueryUnescape(user)
	secret, err2 := url.QueryUnescape(pass)
	p.mu.Lock()
	want := p.secret
	p.mu.Unlock()
	if r.Method != http.MethodPost || !ok || err1 != nil || err2 != nil || id != p.clientID || secret != want ||
		r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" || r.ParseForm() != nil ||
		r.PostForm.Get("token_type_hint") != "access_token" {
		p.bad.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"invalid_client"}`)
		return
	}
	p.mu.Lock()
	answer, known := p.answers[r.PostForm.Get("token")]
	p.mu.Unlock()
	if !known {
		answer = map[string]any{"active": false}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}

// set puts h in front of the endpoint's own answers.
func (p *idp) set(h http.HandlerFunc) { p.override.Store(&h) }

// issue returns a new opaque token the endpoint says is active with the
// claims of valid, changed by over (a nil value removes a claim).
func (p *idp) issue(over map[string]any) string {
	token := randomToken()
	p.answer(token, over)
	return token
}

// answer sets what the endpoint says about token: active with the claims
// of valid changed by over.
func (p *idp) answer(token string, over map[string]any) {
	a := map[string]any{"active": true}
	for k, v := range valid() {
		a[k] = v
	}
	for k, v := range over {
		if v == nil {
			delete(a, k)
			continue
		}
		a[k] = v
	}
	p.mu.Lock()
	p.answers[token] = a
	p.mu.Unlock()
}

// revoke makes the endpoint say token is not active.
func (p *idp) revoke(token string) {
	p.mu.Lock()
	p.answers[token] = map[string]any{"active": false}
	p.mu.Unlock()
}

// valid is what the endpoint says about an active token of alice.
func valid() map[string]any {
	now := time.Now()
	return map[string]any{
		"sub": "alice", "iss": testIssuer, "aud": "plantstore", "scope": "plants:read openid",
		"groups": []any{"gardeners"}, "client_id": "web", "token_type": "Bearer",
		"iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(),
	}
}

const testIssuer = "https://idp.example"

// randomToken returns a fresh opaque token: 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// baseConfig is the Config of the issuer the tests introspect with.
func baseConfig() auth.Config {
	return auth.Config{Issuer: testIssuer, Audiences: []string{"plantstore"}, RequiredScope: "plants:read"}
}

// secretFile writes secret to a file of its own and returns its path.
func secretFile(t testing.TB, secret string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// service is a verifier that introspects with p, behind the service's
// middleware on a loopback server.
type service struct {
	v     *auth.Verifier
	trust *introspect.Trust
	url   string
	reg   *prometheus.Registry
}

// newService returns the service of cfg, whose issuer introspects opaque
// tokens at p within lim (nil: the defaults).
func newService(t testing.TB, p *idp, cfg auth.Config, cache time.Duration, lim *introspect.Limits, o auth.Options) service {
	t.Helper()
	cfg.Introspection = auth.Introspection{Tokens: auth.IntrospectOpaque, Endpoint: p.srv.URL, ClientID: p.clientID,
		ClientSecretFile: secretFile(t, p.secret), Cache: cache}
	trust, err := introspect.New(introspect.Config{Issuer: cfg.Issuer, Introspection: cfg.Introspection}, lim, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(o, auth.Issuer{Config: cfg, Opaque: trust})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, v, trust)
}

// serve puts v behind the middleware, on a loopback server.
func serve(t testing.TB, v *auth.Verifier, trust *introspect.Trust) service {
	t.Helper()
	reg := prometheus.NewRegistry()
	r := gin.New()
	r.GET("/plants", func(c *gin.Context) {
		c.Next()
		if len(c.Errors) == 0 || c.Writer.Written() {
			return
		}
		status := http.StatusInternalServerError
		var hs interface{ HTTPStatus() int }
		if errors.As(c.Errors.Last().Err, &hs) {
			status = hs.HTTPStatus()
		}
		c.JSON(status, gin.H{"error": status, "message": http.StatusText(status)})
	}, auth.Middleware(v, auth.NewMetrics(reg)), func(c *gin.Context) {
		id, _ := auth.FromGin(c)
		c.JSON(http.StatusOK, id)
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return service{v: v, trust: trust, url: srv.URL + "/plants", reg: reg}
}

// reply is what the service answered.
type reply struct {
	status     int
	challenge  string
	retryAfter string
	id         auth.Identity
}

// get sends token to s as a bearer token.
func (s service) get(t testing.TB, token string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := reply{status: resp.StatusCode, challenge: resp.Header.Get("WWW-Authenticate"), retryAfter: resp.Header.Get("Retry-After")}
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&out.id); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// reasonOf returns the reason of the challenge, "" for none.
func (r reply) reason() string {
	_, rest, ok := strings.Cut(r.challenge, `error_description="`)
	if !ok {
		return ""
	}
	d, _, _ := strings.Cut(rest, `"`)
	for _, reason := range auth.Reasons() {
		if reason.Description() == d {
			return string(reason)
		}
	}
	return d
}
