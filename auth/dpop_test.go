package auth_test

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
)

// dpopServer is a loopback server with the service's middleware around
// GET /plants, whose verifier trusts one issuer key with the given DPoP
// mode.
type dpopServer struct {
	url string // of /plants
	reg *prometheus.Registry
	v   *auth.Verifier
}

func newDPoPServer(t testing.TB, issuerKey authtest.Key, mode auth.DPoPMode, o auth.Options) dpopServer {
	t.Helper()
	v := newVerifierOpts(t, o, auth.Config{DPoP: mode}, authtest.KeySet(issuerKey))
	reg := prometheus.NewRegistry()
	r := gin.New()
	r.Use(renderErrors)
	r.GET("/plants", auth.Middleware(v, auth.NewMetrics(reg)), func(c *gin.Context) {
		id, _ := auth.FromContext(c.Request.Context())
		c.JSON(http.StatusOK, id)
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return dpopServer{url: srv.URL + "/plants", reg: reg, v: v}
}

// dpopRequest sends GET (or method) to url with the Authorization header
// and the DPoP headers given, and returns the status and challenge.
func dpopRequest(t testing.TB, method, url, authz string, proofs ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	for _, p := range proofs {
		req.Header.Add("DPoP", p)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	ch := withoutMetadata(t, resp.Header.Values("WWW-Authenticate"))
	return resp.StatusCode, strings.Join(ch, "")
}

// TestDPoPAttacks replays the attacks RFC 9449 guards against, each with
// the section that rules it out, over HTTP through the middleware.
func TestDPoPAttacks(t *testing.T) {
	issuer := authtest.NewKey(t, "RS256")
	client := authtest.NewKey(t, "ES256")
	other := authtest.NewKey(t, "ES256")
	srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{})
	bound := func(k authtest.Key) string {
		return authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"jkt": k.Thumbprint(t)}}))
	}
	token := bound(client)
	otherToken := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"jti": "another", "cnf": map[string]any{"jkt": client.Thumbprint(t)}}))
	unbound := authtest.Token(t, issuer, nil, authtest.Claims(nil))
	u := srv.url
	proof := func(over map[string]any) string { return authtest.Proof(t, client, "GET", u, token, nil, over) }
	withHeader := func(h map[string]any) string { return authtest.Proof(t, client, "GET", u, token, h, nil) }
	replayed := proof(nil)
	if status, _ := dpopRequest(t, "GET", u, "DPoP "+token, replayed); status != http.StatusOK {
		t.Fatalf("first use of a proof: %d, want 200", status)
	}
	weakPriv, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	weak := authtest.Key{Alg: "RS256", Private: weakPriv, Verify: auth.Key{Public: &weakPriv.PublicKey}}
	privateJWK := func() map[string]any {
		j := map[string]any{}
		b, _ := json.Marshal(client.JWK(t))
		json.Unmarshal(b, &j)
		j["d"] = "AAAA"
		return j
	}()
	ed := authtest.NewKey(t, "EdDSA")
	edToken := bound(ed)

	tests := []struct {
		name, ref string
		authz     string
		proofs    []string
		method    string
		want      auth.Reason
		wantDPoP  bool // a DPoP challenge, not a Bearer one
	}{
		{name: "control: a valid proof", ref: "RFC 9449 §4.3", authz: "DPoP " + token, proofs: []string{proof(nil)}},
		{name: "control: an EdDSA proof", ref: "RFC 9449 §4.3", authz: "DPoP " + edToken, proofs: []string{authtest.Proof(t, ed, "GET", u, edToken, nil, nil)}},
		{name: "control: scheme in lower case", ref: "RFC 9110 §11.1", authz: "dpop " + token, proofs: []string{proof(nil)}},
		{name: "control: htu with a query and a fragment", ref: "RFC 9449 §4.3 (query and fragment ignored)", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"htu": u + "?limit=1#x"})}},
		{name: "control: htu with an explicit default port in another case", ref: "RFC 9449 §4.3, RFC 3986 §6.2.3", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"htu": strings.Replace(u, "http://", "HTTP://", 1)})}},
		{name: "control: an unbound token as Bearer", ref: "RFC 6750", authz: "Bearer " + unbound},
		{name: "replayed proof", ref: "RFC 9449 §11.1, §4.3 (jti)", authz: "DPoP " + token, proofs: []string{replayed}, want: auth.ReasonDPoPReplay, wantDPoP: true},
		{name: "proof for another token", ref: "RFC 9449 §4.3 (ath), §7", authz: "DPoP " + otherToken, proofs: []string{proof(nil)}, want: auth.ReasonDPoPAth, wantDPoP: true},
		{name: "wrong ath", ref: "RFC 9449 §4.3 (ath)", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"ath": "AAAA"})}, want: auth.ReasonDPoPAth, wantDPoP: true},
		{name: "no ath", ref: "RFC 9449 §4.2 (ath required with a token)", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"ath": nil})}, want: auth.ReasonDPoPAth, wantDPoP: true},
		{name: "another method", ref: "RFC 9449 §4.3 (htm)", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"htm": "POST"})}, want: auth.ReasonDPoPTarget, wantDPoP: true},
		{name: "method in lower case", ref: "RFC 9449 §4.2 (htm is the method, case-sensitive)", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"htm": "get"})}, want: auth.ReasonDPoPTarget, wantDPoP: true},
		{name: "another URL: path", ref: "RFC 9449 §4.3 (htu)", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"htu": strings.TrimSuffix(u, "/plants") + "/admin"})}, want: auth.ReasonDPoPTarget, wantDPoP: true},
		{name: "another URL: host", ref: "RFC 9449 §4.3 (htu)", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"htu": "http://evil.example/plants"})}, want: auth.ReasonDPoPTarget, wantDPoP: true},
		{name: "another URL: scheme", ref: "RFC 9449 §4.3 (htu)", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"htu": strings.Replace(u, "http://", "https://", 1)})}, want: auth.ReasonDPoPTarget, wantDPoP: true},
		{name: "htu not a URL", ref: "RFC 9449 §4.2", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"htu": 7})}, want: auth.ReasonDPoPTarget, wantDPoP: true},
		{name: "stale iat", ref: "RFC 9449 §4.3 (iat within an acceptable window), §11.1", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"iat": time.Now().Add(-2 * time.Minute).Unix()})}, want: auth.ReasonDPoPIat, wantDPoP: true},
		{name: "future iat", ref: "RFC 9449 §4.3, §11.1", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"iat": time.Now().Add(2 * time.Minute).Unix()})}, want: auth.ReasonDPoPIat, wantDPoP: true},
		{name: "iat far in the future (overflow)", ref: "RFC 9449 §4.3, RFC 7519 §2", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"iat": 1e19})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "no iat", ref: "RFC 9449 §4.2", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"iat": nil})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "no jti", ref: "RFC 9449 §4.2", authz: "DPoP " + token, proofs: []string{proof(map[string]any{"jti": nil})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "private key in jwk", ref: "RFC 9449 §4.3 (jwk does not contain a private key)", authz: "DPoP " + token, proofs: []string{withHeader(map[string]any{"jwk": privateJWK})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "no jwk", ref: "RFC 9449 §4.2", authz: "DPoP " + token, proofs: []string{withHeader(map[string]any{"jwk": nil})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "jwk of another key than the signer", ref: "RFC 9449 §4.3 (signature with the jwk)", authz: "DPoP " + token, proofs: []string{authtest.Proof(t, other, "GET", u, token, map[string]any{"jwk": client.JWK(t)}, nil)}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "alg none", ref: "RFC 9449 §4.3 (not none), RFC 8725 §3.1", authz: "DPoP " + token, proofs: []string{authtest.RawToken(t, map[string]any{"typ": "dpop+jwt", "alg": "none", "jwk": client.JWK(t)}, map[string]any{"jti": "x", "htm": "GET", "htu": u, "iat": time.Now().Unix()}, "")}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "alg HS256 with the public key as secret", ref: "RFC 9449 §4.3 (asymmetric), RFC 8725 §2.1", authz: "DPoP " + token, proofs: []string{authtest.TokenAlg(t, authtest.Key{Private: []byte("not a key of the client at all!!"), Verify: client.Verify}, "HS256", map[string]any{"typ": "dpop+jwt", "jwk": client.JWK(t), "kid": nil}, map[string]any{"jti": "x", "htm": "GET", "htu": u, "iat": time.Now().Unix()})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "typ JWT", ref: "RFC 9449 §4.3 (typ dpop+jwt)", authz: "DPoP " + token, proofs: []string{withHeader(map[string]any{"typ": "JWT"})}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "the access token as its own proof", ref: "RFC 9449 §4.3 (typ), RFC 8725 §3.11", authz: "DPoP " + token, proofs: []string{token}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "RSA key of 1024 bits", ref: "RFC 9449 §4.3, RFC 7518 §3.3", authz: "DPoP " + bound(weak), proofs: []string{authtest.Proof(t, weak, "GET", u, bound(weak), nil, nil)}, want: auth.ReasonDPoPInvalid, wantDPoP: true},
		{name: "thumbprint mismatch: a valid proof by another key", ref: "RFC 9449 §6.1 (cnf.jkt), §4.3", authz: "DPoP " + token, proofs: []string{authtest.Proof(t, other, "GET", u, token, nil, nil)}, want: auth.ReasonDPoPKey, wantDPoP: true},
		{name: "token without proof", ref: "RFC 9449 §7.1", authz: "DPoP " + token, want: auth.ReasonDPoPMissing, wantDPoP: true},
		{name: "two proofs", ref: "RFC 9449 §4.3 (one DPoP header)", authz: "DPoP " + token, proofs: []string{proof(nil), proof(nil)}, want: auth.ReasonDPoPMissing, wantDPoP: true},
		{name: "proof without token", ref: "RFC 9449 §7.1, RFC 6750 §3.1", proofs: []string{proof(nil)}, want: auth.ReasonMissing},
		{name: "bound token as Bearer", ref: "RFC 9449 §7.2", authz: "Bearer " + token, want: auth.ReasonDPoPBound},
		{name: "bound token as Bearer with a proof", ref: "RFC 9449 §7.2", authz: "Bearer " + token, proofs: []string{proof(nil)}, want: auth.ReasonDPoPBound},
		{name: "unbound token under the DPoP scheme", ref: "RFC 9449 §7.1", authz: "DPoP " + unbound, proofs: []string{authtest.Proof(t, client, "GET", u, unbound, nil, nil)}, want: auth.ReasonDPoPUnbound, wantDPoP: true},
		{name: "DPoP scheme, expired token", ref: "RFC 9449 §7.1 (invalid_token)", authz: "DPoP " + authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"exp": 1, "cnf": map[string]any{"jkt": client.Thumbprint(t)}})), proofs: []string{proof(nil)}, want: auth.ReasonExpired, wantDPoP: true},
		{name: "cnf not an object", ref: "RFC 7800 §3.1", authz: "DPoP " + authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": "x"})), proofs: []string{proof(nil)}, want: auth.ReasonClaims, wantDPoP: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = "GET"
			}
			status, challenge := dpopRequest(t, method, u, tt.authz, tt.proofs...)
			if tt.want == "" {
				if status != http.StatusOK {
					t.Fatalf("%s [%s]: %d %q; want 200", tt.name, tt.ref, status, challenge)
				}
				return
			}
			code := "invalid_token"
			if strings.HasPrefix(string(tt.want), "dpop_") && tt.wantDPoP && tt.want != auth.ReasonDPoPUnbound && tt.want != auth.ReasonDPoPRequired {
				code = "invalid_dpop_proof"
			}
			want := `Bearer realm="plantstore", error="` + code + `", error_description="` + tt.want.Description() + `"`
			if tt.wantDPoP {
				want = `DPoP realm="plantstore", algs="ES256 ES384 ES512 EdDSA Ed25519 PS256 PS384 PS512 RS256 RS384 RS512", error="` + code + `", error_description="` + tt.want.Description() + `"`
			}
			if tt.want == auth.ReasonMissing {
				want = `Bearer realm="plantstore"`
			}
			if status != http.StatusUnauthorized || challenge != want {
				t.Errorf("%s [%s]: %d %q; want 401 %q", tt.name, tt.ref, status, challenge, want)
			}
		})
	}
}

// TestDPoPCachedTokenNeedsProof: a bound token verified once (and cached)
// still needs a fresh valid proof on every request.
func TestDPoPCachedTokenNeedsProof(t *testing.T) {
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "EdDSA")
	srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{})
	token := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"jkt": client.Thumbprint(t)}}))
	for i := range 5 {
		if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+token, authtest.Proof(t, client, "GET", srv.url, token, nil, nil)); status != http.StatusOK {
			t.Fatalf("request %d with a fresh proof: %d %q", i, status, ch)
		}
	}
	for _, tt := range []struct {
		name   string
		proofs []string
	}{{"no proof", nil}, {"a stale proof", []string{authtest.Proof(t, client, "GET", srv.url, token, nil, map[string]any{"iat": time.Now().Add(-time.Hour).Unix()})}}} {
		if status, _ := dpopRequest(t, "GET", srv.url, "DPoP "+token, tt.proofs...); status != http.StatusUnauthorized {
			t.Errorf("cached bound token with %s: %d, want 401", tt.name, status)
		}
	}
}

// TestDPoPQuota: a client flooding with its own bound token fills only its
// key's share of the replay cache (2 of 4 entries here). Past it, its new
// proofs get 429 with Retry-After and no challenge, other clients are
// served, and no live proof is forgotten, so none can be replayed.
func TestDPoPQuota(t *testing.T) {
	issuer := authtest.NewKey(t, "ES256")
	srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{Leeway: 5 * time.Second})
	auth.SetReplayLimits(srv.v, 4, 2)
	bound := func(client authtest.Key) string {
		return authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"jkt": client.Thumbprint(t)}}))
	}
	flood, victim := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	floodTok, victimTok := bound(flood), bound(victim)
	first := authtest.Proof(t, flood, "GET", srv.url, floodTok, nil, nil)
	for i, p := range []string{first, authtest.Proof(t, flood, "GET", srv.url, floodTok, nil, nil)} {
		if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+floodTok, p); status != http.StatusOK {
			t.Fatalf("flood request %d, within the quota: %d %q", i, status, ch)
		}
	}

	req, err := http.NewRequestWithContext(t.Context(), "GET", srv.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "DPoP "+floodTok)
	req.Header.Set("DPoP", authtest.Proof(t, flood, "GET", srv.url, floodTok, nil, nil))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Until the oldest proof expires: its iat (whole seconds, this second
	// or the last), the window (60 s) and twice the leeway.
	if ra := resp.Header.Get("Retry-After"); resp.StatusCode != http.StatusTooManyRequests || ra != "69" && ra != "70" || resp.Header.Get("WWW-Authenticate") != "" {
		t.Errorf("flood request over the quota: %d, Retry-After %q, WWW-Authenticate %q; want 429, 69 or 70, none",
			resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("WWW-Authenticate"))
	}

	if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+victimTok, authtest.Proof(t, victim, "GET", srv.url, victimTok, nil, nil)); status != http.StatusOK {
		t.Errorf("another client during the flood: %d %q; want 200", status, ch)
	}
	if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+floodTok, first); status != http.StatusUnauthorized || !strings.Contains(ch, "already used") {
		t.Errorf("the flood's first proof again: %d %q; want 401, already used", status, ch)
	}
	got := failures(t, srv.reg)
	if got["dpop_quota"] != 1 || got["dpop_replay"] != 1 {
		t.Errorf("auth failures %v; want dpop_quota 1 and dpop_replay 1", got)
	}
}

// TestDPoPWindow: -dpop-window (Options.DPoPWindow) bounds a proof's age,
// the leeway on top: with a window of 10 s and no leeway, a proof 5 s old
// is accepted and one 30 s old, which the default window would take, is
// refused.
func TestDPoPWindow(t *testing.T) {
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	token := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"jkt": client.Thumbprint(t)}}))
	for _, tt := range []struct {
		window time.Duration
		age    time.Duration
		want   int
	}{
		{10 * time.Second, 5 * time.Second, http.StatusOK},
		{10 * time.Second, 30 * time.Second, http.StatusUnauthorized},
		{0, 30 * time.Second, http.StatusOK}, // the default, 60 s
	} {
		srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{DPoPWindow: tt.window})
		proof := authtest.Proof(t, client, "GET", srv.url, token, nil, map[string]any{"iat": time.Now().Add(-tt.age).Unix()})
		if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+token, proof); status != tt.want {
			t.Errorf("window %v, proof %v old: %d %q; want %d", tt.window, tt.age, status, ch, tt.want)
		}
	}
}

// TestDPoPEd25519 accepts proofs whose alg is Ed25519, EdDSA's
// fully-specified name (RFC 9864), as oauth4webapi signs them.
func TestDPoPEd25519(t *testing.T) {
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "EdDSA")
	srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{})
	token := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"jkt": client.Thumbprint(t)}}))
	proof := authtest.Proof(t, client, "GET", srv.url, token, map[string]any{"alg": "Ed25519"}, nil)
	if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+token, proof); status != http.StatusOK {
		t.Fatalf("an Ed25519 proof: %d %q, want 200", status, ch)
	}
	if !slices.Contains(auth.DPoPAlgorithms(), "Ed25519") {
		t.Errorf("DPoPAlgorithms() = %v, want Ed25519 among them (the metadata and the algs= challenge list them)", auth.DPoPAlgorithms())
	}
}

// TestDPoPModes checks the issuer's mode: off refuses bound tokens,
// required refuses unbound ones with a DPoP challenge.
func TestDPoPModes(t *testing.T) {
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	token := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"jkt": client.Thumbprint(t)}}))
	unbound := authtest.Token(t, issuer, nil, authtest.Claims(nil))
	for _, tt := range []struct {
		mode      auth.DPoPMode
		bound     int
		unbound   int
		challenge string // of a request without credential
	}{
		{auth.DPoPOptional, 200, 200, `Bearer realm="plantstore"`},
		{auth.DPoPOff, 401, 200, `Bearer realm="plantstore"`},
		{auth.DPoPRequired, 200, 401, `DPoP realm="plantstore", algs="ES256 ES384 ES512 EdDSA Ed25519 PS256 PS384 PS512 RS256 RS384 RS512"`},
	} {
		t.Run(tt.mode.String(), func(t *testing.T) {
			srv := newDPoPServer(t, issuer, tt.mode, auth.Options{})
			if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+token, authtest.Proof(t, client, "GET", srv.url, token, nil, nil)); status != tt.bound {
				t.Errorf("bound token with a proof: %d %q, want %d", status, ch, tt.bound)
			}
			status, ch := dpopRequest(t, "GET", srv.url, "Bearer "+unbound)
			if status != tt.unbound {
				t.Errorf("unbound bearer token: %d %q, want %d", status, ch, tt.unbound)
			}
			if tt.mode == auth.DPoPRequired && !strings.Contains(ch, `DPoP realm="plantstore"`) {
				t.Errorf("unbound token where DPoP is required: challenge %q, want a DPoP one", ch)
			}
			if _, ch := dpopRequest(t, "GET", srv.url, ""); ch != tt.challenge {
				t.Errorf("no credential: challenge %q, want %q", ch, tt.challenge)
			}
		})
	}
}

// TestDPoPPublicURL: with a public URL, proofs name it (the gateway's), not
// the address the service is reached at.
func TestDPoPPublicURL(t *testing.T) {
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	public, _ := url.Parse("https://api.example.com/garden")
	srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{PublicURL: public})
	token := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"jkt": client.Thumbprint(t)}}))
	for _, tt := range []struct {
		htu  string
		want int
	}{
		{"https://api.example.com/garden/plants", 200},
		{"https://API.example.com:443/garden/plants", 200},
		{srv.url, 401},
		{"https://api.example.com/plants", 401},
	} {
		if status, _ := dpopRequest(t, "GET", srv.url, "DPoP "+token, authtest.Proof(t, client, "GET", tt.htu, token, nil, nil)); status != tt.want {
			t.Errorf("proof for %s: %d, want %d", tt.htu, status, tt.want)
		}
	}
}

// TestResourceMetadata checks the RFC 9728 document and its URL, with and
// without a public URL, for each mix of issuer DPoP modes.
func TestResourceMetadata(t *testing.T) {
	key := authtest.NewKey(t, "ES256")
	keys := authtest.KeySet(key)
	jwks, _ := newSrcJWKS(t, auth.JWKSOptions{URL: authtest.NewServer(t, authtest.JWKS(t, key)).URL})
	named := func(name, iss, scope string, mode auth.DPoPMode) auth.Issuer {
		return auth.Issuer{Name: name, Config: auth.Config{Issuer: iss, RequiredScope: scope, DPoP: mode}, Keys: keys}
	}
	public, _ := url.Parse("https://gw.example.com/garden/")
	tests := []struct {
		name    string
		opts    auth.Options
		issuers []auth.Issuer
		host    string
		forward map[string]string
		want    auth.ResourceMetadata
		wantURL string
	}{
		{
			name:    "flags issuer, no public URL",
			issuers: []auth.Issuer{{Config: auth.Config{Issuer: "https://idp.example", RequiredScope: "plants:read"}, Keys: keys}},
			host:    "plants.internal:8080",
			want: auth.ResourceMetadata{Resource: "http://plants.internal:8080", AuthorizationServers: []string{"https://idp.example"},
				ScopesSupported: []string{"plants:read"}, BearerMethodsSupported: []string{"header"}, DPoPSigningAlgValuesSupported: auth.DPoPAlgorithms()},
			wantURL: "http://plants.internal:8080/.well-known/oauth-protected-resource",
		},
		{
			name:    "forwarded by an untrusted peer: ignored",
			issuers: []auth.Issuer{{Keys: keys}},
			host:    "plants.internal",
			forward: map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example"},
			want:    auth.ResourceMetadata{Resource: "http://plants.internal", BearerMethodsSupported: []string{"header"}, DPoPSigningAlgValuesSupported: auth.DPoPAlgorithms()},
			wantURL: "http://plants.internal/.well-known/oauth-protected-resource",
		},
		{
			name:    "forwarded by a trusted proxy",
			opts:    auth.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}},
			issuers: []auth.Issuer{{Keys: keys, Config: auth.Config{DPoP: auth.DPoPOff}}},
			host:    "plants.internal",
			forward: map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "API.example.com, other"},
			want:    auth.ResourceMetadata{Resource: "https://api.example.com", BearerMethodsSupported: []string{"header"}},
			wantURL: "https://api.example.com/.well-known/oauth-protected-resource",
		},
		{
			name:    "a forwarded host that needs quoting is not believed",
			opts:    auth.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}},
			issuers: []auth.Issuer{{Keys: keys, Config: auth.Config{DPoP: auth.DPoPOff}}},
			host:    "plants.internal",
			forward: map[string]string{"X-Forwarded-Host": `a"b`},
			want:    auth.ResourceMetadata{Resource: "http://plants.internal", BearerMethodsSupported: []string{"header"}},
			wantURL: "http://plants.internal/.well-known/oauth-protected-resource",
		},
		{
			name:    "public URL with a path, every issuer requires DPoP",
			opts:    auth.Options{PublicURL: public},
			issuers: []auth.Issuer{named("staff", "https://sso/staff", "plants:read", auth.DPoPRequired), named("apps", "https://sso/apps", "plants:list", auth.DPoPRequired)},
			host:    "plants.internal",
			want: auth.ResourceMetadata{Resource: "https://gw.example.com/garden", AuthorizationServers: []string{"https://sso/staff", "https://sso/apps"},
				ScopesSupported: []string{"plants:read", "plants:list"}, BearerMethodsSupported: []string{"header"},
				DPoPSigningAlgValuesSupported: auth.DPoPAlgorithms(), DPoPBoundAccessTokensRequired: true},
			wantURL: "https://gw.example.com/.well-known/oauth-protected-resource/garden",
		},
		{
			name: "token policies of the issuers that enforce one",
			issuers: []auth.Issuer{
				{Name: "staff", Config: auth.Config{Issuer: "https://sso/staff", TokenTypes: []string{"AT+JWT"}, Clients: []string{"plants-web"}, MaxLifetime: 90 * time.Minute}, Keys: keys},
				named("apps", "https://sso/apps", "", auth.DPoPOptional),
				{Name: "svc", Config: auth.Config{Issuer: "https://sso/svc", MaxStale: 24 * time.Hour}, Keys: jwks},
			},
			host: "plants.internal",
			want: auth.ResourceMetadata{Resource: "http://plants.internal", AuthorizationServers: []string{"https://sso/staff", "https://sso/apps", "https://sso/svc"},
				BearerMethodsSupported: []string{"header"}, DPoPSigningAlgValuesSupported: auth.DPoPAlgorithms(),
				TokenPolicies: []auth.TokenPolicy{
					{AuthorizationServer: "https://sso/staff", TokenTypes: []string{"at+jwt"}, ClientRestricted: true, MaxLifetime: 5400},
					{AuthorizationServer: "https://sso/svc", MaxStale: 86400},
				}},
			wantURL: "http://plants.internal/.well-known/oauth-protected-resource",
		},
		{
			name:    "one issuer of two requires DPoP",
			opts:    auth.Options{PublicURL: public},
			issuers: []auth.Issuer{named("staff", "https://sso/staff", "", auth.DPoPRequired), named("apps", "https://sso/apps", "", auth.DPoPOptional)},
			want: auth.ResourceMetadata{Resource: "https://gw.example.com/garden", AuthorizationServers: []string{"https://sso/staff", "https://sso/apps"},
				BearerMethodsSupported: []string{"header"}, DPoPSigningAlgValuesSupported: auth.DPoPAlgorithms()},
			wantURL: "https://gw.example.com/.well-known/oauth-protected-resource/garden",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := auth.NewVerifier(tt.opts, tt.issuers...)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("GET", auth.ResourceMetadataPath, nil)
			r.Host, r.RemoteAddr = tt.host, "192.0.2.7:4444"
			for k, val := range tt.forward {
				r.Header.Set(k, val)
			}
			got := v.Metadata(r)
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(tt.want)
			if string(gb) != string(wb) {
				t.Errorf("Metadata =\n%s\nwant\n%s", gb, wb)
			}
			if u := v.MetadataURL(r); u != tt.wantURL {
				t.Errorf("MetadataURL = %q, want %q", u, tt.wantURL)
			}
		})
	}
}

// BenchmarkDPoP is the cost of a DPoP request's authentication: a bound
// ES256 token, cached after the first request, and a fresh ES256 proof
// each time, made while the timer is stopped. Its second half is one
// P-256 signature verification alone, the part no cache can take off, to
// compare with on the machine at hand.
func BenchmarkDPoP(b *testing.B) {
	issuer := authtest.NewKey(b, "ES256")
	client := authtest.NewKey(b, "ES256")
	v := newVerifierOpts(b, auth.Options{}, auth.Config{}, authtest.KeySet(issuer))
	token := authtest.Token(b, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"jkt": client.Thumbprint(b)}}))
	const uri = "http://127.0.0.1/plants"
	b.Run("authenticate", func(b *testing.B) {
		proofs := make([]string, 10_000)
		fresh := func() {
			for j := range proofs {
				proofs[j] = authtest.Proof(b, client, "GET", uri, token, nil, nil)
			}
		}
		fresh()
		req := httptest.NewRequest("GET", uri+"?limit=10", nil)
		req.Header.Set("Authorization", "DPoP "+token)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if i == len(proofs) {
				b.StopTimer()
				fresh()
				i = 0
				b.StartTimer()
			}
			req.Header.Set("DPoP", proofs[i])
			i++
			if _, err := v.Authenticate(req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("p256-verify", func(b *testing.B) {
		priv := client.Private.(*ecdsa.PrivateKey)
		digest := sha256.Sum256([]byte(token))
		sig, err := ecdsa.SignASN1(rand.Reader, priv, digest[:])
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if !ecdsa.VerifyASN1(&priv.PublicKey, digest[:], sig) {
				b.Fatal("signature does not verify")
			}
		}
	})
}
