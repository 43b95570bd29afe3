package introspect_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/introspect"
	"github.com/plantstore/plantstore/auth/mint"
	"github.com/plantstore/plantstore/observability/logtest"
)

// TestSecretFollowed: a secret rotated in its file is used from then on,
// without a restart, and a file made unreadable keeps the last secret.
func TestSecretFollowed(t *testing.T) {
	p := newIDP(t)
	path := secretFile(t, p.secret)
	cfg := baseConfig()
	cfg.Introspection = auth.Introspection{Tokens: auth.IntrospectOpaque, Endpoint: p.srv.URL, ClientID: p.clientID, ClientSecretFile: path, Cache: time.Minute}
	trust, err := introspect.New(introspect.Config{Issuer: cfg.Issuer, Introspection: cfg.Introspection}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	stopped := trust.Watch(t.Context())
	v, err := auth.NewVerifier(auth.Options{}, auth.Issuer{Config: cfg, Opaque: trust})
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, v, trust)
	if got := s.get(t, p.issue(nil)); got.status != http.StatusOK {
		t.Fatalf("%d; want 200", got.status)
	}
	p.mu.Lock()
	p.secret = "rotated-" + p.secret
	p.mu.Unlock()
	if err := os.WriteFile(path, []byte(p.secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	authtest.WaitFor(t, "the rotated secret used", func() bool { return s.get(t, p.issue(nil)).status == http.StatusOK })
	_ = stopped
}

// TestPrivateKeyJWT: with a private key file, the client authenticates
// with an RFC 7523 assertion signed with it, which the endpoint verifies
// with the public half.
func TestPrivateKeyJWT(t *testing.T) {
	p := newIDP(t)
	key := authtest.NewKey(t, "ES256")
	pemKey, err := mint.MarshalPrivateKey(key.Private)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(t.TempDir(), "client.pem")
	if err := os.WriteFile(keyPath, pemKey, 0o600); err != nil {
		t.Fatal(err)
	}
	var assertions []jwt.MapClaims
	p.set(func(w http.ResponseWriter, r *http.Request) {
		if r.ParseForm() != nil || r.PostForm.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		tok, err := jwt.Parse(r.PostForm.Get("client_assertion"), func(*jwt.Token) (any, error) { return key.Verify.Public, nil }, jwt.WithValidMethods([]string{"ES256"}))
		if err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		claims := tok.Claims.(jwt.MapClaims)
		assertions = append(assertions, claims)
		aud, _ := claims.GetAudience()
		if claims["iss"] != p.clientID || claims["sub"] != p.clientID || !slices.Contains(aud, p.srv.URL) || claims["jti"] == nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		a := valid()
		a["active"] = true
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a)
	})
	cfg := baseConfig()
	cfg.Introspection = auth.Introspection{Tokens: auth.IntrospectOpaque, Endpoint: p.srv.URL, ClientID: p.clientID, PrivateKeyFile: keyPath}
	trust, err := introspect.New(introspect.Config{Issuer: cfg.Issuer, Introspection: cfg.Introspection}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(auth.Options{}, auth.Issuer{Config: cfg, Opaque: trust})
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, v, trust)
	for range 2 {
		if got := s.get(t, randomToken()); got.status != http.StatusOK {
			t.Fatalf("%d %q; want 200", got.status, got.challenge)
		}
	}
	if len(assertions) != 2 || assertions[0]["jti"] == assertions[1]["jti"] {
		t.Errorf("assertions %v; want two, each with a jti of its own", assertions)
	}

	// A key file that is no key is refused, naming the file, never what
	// it holds.
	bad := filepath.Join(t.TempDir(), "bad.pem")
	if err := os.WriteFile(bad, []byte("-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWJ5dGVz\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Introspection.PrivateKeyFile = bad
	_, err = introspect.New(introspect.Config{Issuer: cfg.Issuer, Introspection: cfg.Introspection}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), "c2VjcmV0") {
		t.Errorf("a key file that is no key: %v; want an error naming the file only", err)
	}
}

// TestDiscoveredEndpoint: without an endpoint, the issuer's discovery
// document names it; a document of another issuer is not believed.
func TestDiscoveredEndpoint(t *testing.T) {
	p := newIDP(t)
	issuer := p.srv.URL
	var answers func(doc map[string]any) http.HandlerFunc
	answers = func(doc map[string]any) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/.well-known/openid-configuration" {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(doc)
				return
			}
			if r.URL.Path != "/introspect" {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			p.override.Store(nil)
			p.ServeHTTP(w, r)
			h := answers(doc)
			p.set(h)
		}
	}
	for _, tt := range []struct {
		name string
		doc  map[string]any
		want int
	}{
		{"the issuer's", map[string]any{"issuer": issuer, "introspection_endpoint": issuer + "/introspect"}, http.StatusOK},
		{"another issuer's", map[string]any{"issuer": "https://evil.example", "introspection_endpoint": issuer + "/introspect"}, http.StatusServiceUnavailable},
		{"none named", map[string]any{"issuer": issuer}, http.StatusServiceUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p.set(answers(tt.doc))
			cfg := baseConfig()
			cfg.Issuer = issuer
			cfg.Introspection = auth.Introspection{Tokens: auth.IntrospectOpaque, ClientID: p.clientID, ClientSecretFile: secretFile(t, p.secret)}
			if _, err := auth.CheckIssuers(auth.Issuer{Config: cfg}); err != nil {
				t.Fatal(err)
			}
			trust, err := introspect.New(introspect.Config{Issuer: issuer, Introspection: cfg.Introspection}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			v, err := auth.NewVerifier(auth.Options{}, auth.Issuer{Config: cfg, Opaque: trust})
			if err != nil {
				t.Fatal(err)
			}
			if got := serve(t, v, trust).get(t, p.issue(map[string]any{"iss": issuer})); got.status != tt.want {
				t.Errorf("%d %q; want %d", got.status, got.challenge, tt.want)
			}
		})
	}
}

// TestSignedAnswers: with jwt_response, only an answer signed by the
// issuer (RFC 9701: typ token-introspection+jwt, iss the issuer, aud the
// client, the answer in token_introspection) is believed.
func TestSignedAnswers(t *testing.T) {
	p := newIDP(t)
	key := authtest.NewKey(t, "ES256")
	other := authtest.NewKey(t, "ES256")
	sign := func(k authtest.Key, typ string, over map[string]any) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Accept") != "application/token-introspection+jwt" {
				w.WriteHeader(http.StatusNotAcceptable)
				return
			}
			inner := valid()
			inner["active"] = true
			claims := map[string]any{"iss": testIssuer, "aud": p.clientID, "iat": time.Now().Unix(), "token_introspection": inner}
			for k, v := range over {
				claims[k] = v
			}
			w.Header().Set("Content-Type", "application/token-introspection+jwt")
			_, _ = io.WriteString(w, authtest.Token(t, k, map[string]any{"typ": typ}, claims))
		}
	}
	cfg := baseConfig()
	cfg.Introspection = auth.Introspection{Tokens: auth.IntrospectOpaque, Endpoint: p.srv.URL, ClientID: p.clientID,
		ClientSecretFile: secretFile(t, p.secret), JWTResponse: true}
	trust, err := introspect.New(introspect.Config{Issuer: cfg.Issuer, Introspection: cfg.Introspection, Keys: authtest.KeySet(key)}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(auth.Options{}, auth.Issuer{Config: cfg, Opaque: trust})
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, v, trust)
	for _, tt := range []struct {
		name    string
		handler http.HandlerFunc
		want    int
	}{
		{"signed by the issuer", sign(key, "token-introspection+jwt", nil), http.StatusOK},
		{"typ with application/", sign(key, "application/token-introspection+jwt", nil), http.StatusOK},
		{"signed by another key", sign(other, "token-introspection+jwt", nil), http.StatusServiceUnavailable},
		{"typ of an access token", sign(key, "at+jwt", nil), http.StatusServiceUnavailable},
		{"another issuer", sign(key, "token-introspection+jwt", map[string]any{"iss": "https://evil.example"}), http.StatusServiceUnavailable},
		{"for another client", sign(key, "token-introspection+jwt", map[string]any{"aud": "someone-else"}), http.StatusServiceUnavailable},
		{"no token_introspection", sign(key, "token-introspection+jwt", map[string]any{"token_introspection": "yes"}), http.StatusServiceUnavailable},
		{"unsigned JSON", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"active":true,"sub":"mallory","exp":9999999999}`)
		}, http.StatusServiceUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p.set(tt.handler)
			if got := s.get(t, randomToken()); got.status != tt.want {
				t.Errorf("%d %q; want %d", got.status, got.challenge, tt.want)
			}
		})
	}
	// Without keys, signed answers cannot be asked for.
	if _, err := introspect.New(introspect.Config{Issuer: cfg.Issuer, Introspection: cfg.Introspection}, nil, nil); err == nil {
		t.Error("jwt_response without keys: no error")
	}
}

// TestSecretNeverShown: the client's secret appears in no log line and no
// error, whatever fails: the endpoint refusing the client, the endpoint
// gone, an answer that is none.
func TestSecretNeverShown(t *testing.T) {
	p := newIDP(t)
	logs := &logtest.Buffer{}
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(logs), zap.DebugLevel))
	cfg := baseConfig()
	secret := "never-shown-" + randomToken()
	cfg.Introspection = auth.Introspection{Tokens: auth.IntrospectOpaque, Endpoint: p.srv.URL + "/?q=1", ClientID: p.clientID, ClientSecretFile: secretFile(t, secret)}
	trust, err := introspect.New(introspect.Config{Issuer: cfg.Issuer, Introspection: cfg.Introspection}, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(auth.Options{}, auth.Issuer{Config: cfg, Opaque: trust})
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, v, trust)
	token := randomToken()
	s.get(t, token) // refused: the endpoint does not know this secret
	p.set(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "not json") })
	s.get(t, randomToken())
	p.srv.Close()
	s.get(t, randomToken())
	if !strings.Contains(logs.String(), "introspection") {
		t.Fatalf("no failure logged:\n%s", logs)
	}
	for _, leak := range []string{secret, token, "q=1"} {
		if strings.Contains(logs.String(), leak) {
			t.Errorf("the log holds %q:\n%s", leak, logs)
		}
	}
}

// TestDPoPBoundAnswer: an answer whose cnf.jkt binds the token to a key
// (RFC 9449 §6.2) is served only with the DPoP scheme and a proof of that
// key, on every request, cached or not.
func TestDPoPBoundAnswer(t *testing.T) {
	p := newIDP(t)
	s := newService(t, p, baseConfig(), time.Minute, nil, auth.Options{})
	client := authtest.NewKey(t, "ES256")
	other := authtest.NewKey(t, "ES256")
	token := p.issue(map[string]any{"cnf": map[string]any{"jkt": client.Verify.ID}})
	send := func(k authtest.Key) int {
		proof, err := mint.Proof(k.Private, "", http.MethodGet, s.url, token)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodGet, s.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "DPoP "+token)
		req.Header.Set("DPoP", proof)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 2 { // the second from the cache
		if got := send(client); got != http.StatusOK {
			t.Errorf("request %d with a proof of the bound key: %d; want 200", i, got)
		}
	}
	if got := send(other); got != http.StatusUnauthorized {
		t.Errorf("a proof of another key: %d; want 401", got)
	}
	if got := s.get(t, token); got.status != http.StatusUnauthorized || got.reason() != string(auth.ReasonDPoPBound) {
		t.Errorf("as a bearer token: %d %q; want 401 dpop_bound", got.status, got.challenge)
	}
	if p.calls.Load() != 1 {
		t.Errorf("%d calls; want 1", p.calls.Load())
	}
}
