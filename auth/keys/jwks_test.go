package keys_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/observability/logtest"
)

// srcVerify checks tok's signature with the key ks finds for it.
func srcVerify(t testing.TB, ks keys.Keys, tok string) error {
	t.Helper()
	_, err := jwt.Parse(tok, func(tk *jwt.Token) (any, error) {
		kid, _ := tk.Header["kid"].(string)
		k, err := ks.Key(t.Context(), kid, tk.Method.Alg())
		if err != nil {
			return nil, err
		}
		return k.Public, nil
	}, jwt.WithValidMethods([]string{"RS256", "ES256", "ES384", "EdDSA", "HS256"}))
	return err
}

// srcMetric returns the value of the metric name (with result label
// result, when not empty) gathered from reg.
func srcMetric(t testing.TB, reg *prometheus.Registry, name, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if result != "" {
				match := false
				for _, l := range m.GetLabel() {
					match = match || (l.GetName() == "result" && l.GetValue() == result)
				}
				if !match {
					continue
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s{result=%q} not found", name, result)
	return 0
}

func TestNewJWKSOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    keys.JWKSOptions
		wantErr bool
	}{
		{name: "https URL", opts: keys.JWKSOptions{URL: "https://idp.example/jwks"}},
		{name: "http URL", opts: keys.JWKSOptions{URL: "http://127.0.0.1:1/jwks"}},
		{name: "issuer", opts: keys.JWKSOptions{Issuer: "https://idp.example/realms/a"}},
		{name: "nothing", opts: keys.JWKSOptions{}, wantErr: true},
		{name: "file URL", opts: keys.JWKSOptions{URL: "file:///etc/jwks.json"}, wantErr: true},
		{name: "relative URL", opts: keys.JWKSOptions{URL: "/jwks"}, wantErr: true},
		{name: "unparseable URL", opts: keys.JWKSOptions{URL: "http://[::1"}, wantErr: true},
		{name: "ftp issuer", opts: keys.JWKSOptions{Issuer: "ftp://idp.example"}, wantErr: true},
		{name: "negative refresh", opts: keys.JWKSOptions{URL: "https://idp.example/jwks", Refresh: -time.Second}, wantErr: true},
		{name: "negative max bytes", opts: keys.JWKSOptions{URL: "https://idp.example/jwks", MaxBytes: -1}, wantErr: true},
		{name: "backoff bounds swapped", opts: keys.JWKSOptions{URL: "https://idp.example/jwks", MinBackoff: time.Minute, MaxBackoff: time.Second}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			cancel() // no fetch should reach the network in this test
			_, err := keys.NewJWKS(ctx, tt.opts, nil, nil)
			if (err != nil) != tt.wantErr {
				t.Errorf("NewJWKS(%+v) error = %v, want error %t", tt.opts, err, tt.wantErr)
			}
		})
	}
}

func TestJWKSServesKeys(t *testing.T) {
	rs, es, ed := authtest.NewKeyID(t, "RS256", "rs"), authtest.NewKeyID(t, "ES384", "es"), authtest.NewKeyID(t, "EdDSA", "ed")
	srv := authtest.NewServer(t, authtest.JWKS(t, rs, es, ed))
	j, reg := authtest.NewJWKS(t, keys.JWKSOptions{URL: srv.URL, Refresh: time.Hour})
	authtest.WaitFor(t, "first key set", func() bool { return j.Ready() == nil })

	for _, k := range []authtest.Key{rs, es, ed} {
		if err := srcVerify(t, j, authtest.Token(t, k, nil, authtest.Claims(nil))); err != nil {
			t.Errorf("verify %s token with kid %q: %v, want nil", k.Alg, k.Verify.ID, err)
		}
	}
	if _, err := j.Key(t.Context(), "es", "ES256"); !errors.Is(err, keys.ErrKeyMismatch) {
		t.Errorf("Key(es, ES256) error = %v, want %v (P-384 key)", err, keys.ErrKeyMismatch)
	}
	if _, err := j.Key(t.Context(), "", "RS256"); err != nil {
		t.Errorf("Key(\"\", RS256) error = %v, want nil (one RSA key)", err)
	}
	accept := srv.Accept()
	if !strings.Contains(accept, "application/json") || !strings.Contains(accept, "application/jwk-set+json") {
		t.Errorf("Accept = %q, want application/json and application/jwk-set+json", accept)
	}
	if got := srcMetric(t, reg, "plantstore_jwks_keys", ""); got != 3 {
		t.Errorf("plantstore_jwks_keys = %v, want 3", got)
	}
	if got := srcMetric(t, reg, "plantstore_jwks_refreshes_total", "success"); got != 1 {
		t.Errorf("refreshes{success} = %v, want 1", got)
	}
}

func TestJWKSFirstFetchFailsThenSucceeds(t *testing.T) {
	k := authtest.NewKeyID(t, "ES256", "k1")
	doc := authtest.JWKS(t, k)
	var calls atomic.Int64
	srv := authtest.NewServer(t, nil)
	srv.Set(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) <= 3 {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.Write(doc)
	})
	j, reg := authtest.NewJWKS(t, keys.JWKSOptions{URL: srv.URL, Refresh: time.Hour, MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond})

	// The set is served from the fourth request on, so nothing can be
	// ready yet unless a failed fetch was taken for a good one.
	if err := j.Ready(); !errors.Is(err, keys.ErrNoKeys) {
		t.Errorf("Ready() before any good fetch = %v, want %v", err, keys.ErrNoKeys)
	}
	if _, err := j.Key(t.Context(), "k1", "ES256"); !errors.Is(err, keys.ErrNoKeys) {
		t.Errorf("Key(k1) before any good fetch error = %v, want %v", err, keys.ErrNoKeys)
	}
	authtest.WaitFor(t, "Ready() to turn nil", func() bool { return j.Ready() == nil })
	if err := srcVerify(t, j, authtest.Token(t, k, nil, authtest.Claims(nil))); err != nil {
		t.Errorf("verify token after recovery: %v", err)
	}
	if got := srcMetric(t, reg, "plantstore_jwks_refreshes_total", "failure"); got != 3 {
		t.Errorf("refreshes{failure} = %v, want 3", got)
	}
	if got := srv.Hits.Load(); got != 4 {
		t.Errorf("server got %d requests, want 4 (3 failed, 1 good, then quiet for an hour)", got)
	}
}

func TestJWKSKeepsKeysWhenFetchFails(t *testing.T) {
	k := authtest.NewKeyID(t, "ES256", "k1")
	good := authtest.JWKS(t, k)
	// A valid set, over 1 MiB only because of padding: refused by size.
	oversize := fmt.Sprintf(`{"keys":%s,"padding":"%s"}`, mustJSON(t, []jwkset.JWKMarshal{k.JWK(t)}), strings.Repeat("x", 1<<20))
	enc := authtest.NewKeyID(t, "RS256", "enc").JWK(t)
	enc.USE = jwkset.UseEnc
	tests := []struct {
		name string
		h    http.HandlerFunc
	}{
		{"status 500", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) }},
		{"status 404", func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) }},
		{"garbage", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("<html>maintenance</html>")) }},
		{"no keys array", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"issuer":"x"}`)) }},
		{"empty set", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"keys":[]}`)) }},
		{"only encryption keys", func(w http.ResponseWriter, _ *http.Request) {
			w.Write(mustJSON(t, jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{enc}}))
		}},
		{"oversize", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(oversize)) }},
		{"slower than the timeout", func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done() // the client gives up first
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := authtest.NewServer(t, good)
			j, reg := authtest.NewJWKS(t, keys.JWKSOptions{
				URL: srv.URL, Refresh: 5 * time.Millisecond, Timeout: 200 * time.Millisecond,
				MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
			})
			authtest.WaitFor(t, "first key set", func() bool { return j.Ready() == nil })
			srv.Set(tt.h)
			authtest.WaitFor(t, "two failed fetches", func() bool {
				return srcMetric(t, reg, "plantstore_jwks_refreshes_total", "failure") >= 2
			})
			if err := j.Ready(); err != nil {
				t.Errorf("Ready() after failed fetches = %v, want nil", err)
			}
			if err := srcVerify(t, j, authtest.Token(t, k, nil, authtest.Claims(nil))); err != nil {
				t.Errorf("verify token with the old key after failed fetches: %v", err)
			}
			if got := srcMetric(t, reg, "plantstore_jwks_keys", ""); got != 1 {
				t.Errorf("plantstore_jwks_keys = %v, want 1", got)
			}
		})
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestJWKSUnknownKidFlood(t *testing.T) {
	srv := authtest.NewServer(t, authtest.JWKS(t, authtest.NewKeyID(t, "ES256", "k1")))
	j, _ := authtest.NewJWKS(t, keys.JWKSOptions{URL: srv.URL, Refresh: time.Hour, MinRefresh: 30 * time.Second})
	authtest.WaitFor(t, "first key set", func() bool { return j.Ready() == nil })

	var wg sync.WaitGroup
	errs := make(chan error, 500)
	for i := range 500 {
		wg.Go(func() {
			_, err := j.Key(t.Context(), fmt.Sprintf("random-%d-%d", i, time.Now().UnixNano()), "ES256")
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, keys.ErrUnknownKey) {
			t.Errorf("Key(random kid) error = %v, want %v", err, keys.ErrUnknownKey)
			break
		}
	}
	// Calls one after the other, each after the last fetch ended, are
	// still inside the 30s window.
	for i := range 20 {
		if _, err := j.Key(t.Context(), fmt.Sprintf("sequential-%d", i), "ES256"); !errors.Is(err, keys.ErrUnknownKey) {
			t.Errorf("Key(sequential-%d) error = %v, want %v", i, err, keys.ErrUnknownKey)
		}
	}
	if got := srv.Hits.Load(); got > 2 {
		t.Errorf("520 unknown kids caused %d fetches in all, want at most 2", got)
	}
}

func TestJWKSUnknownKidNeverWaits(t *testing.T) {
	doc := authtest.JWKS(t, authtest.NewKeyID(t, "ES256", "k1"))
	srv := authtest.NewServer(t, doc)
	// MinRefresh 1ns: only the one-fetch-at-a-time rule limits fetches here.
	j, _ := authtest.NewJWKS(t, keys.JWKSOptions{URL: srv.URL, Refresh: time.Hour, MinRefresh: time.Nanosecond, Timeout: time.Minute})
	authtest.WaitFor(t, "first key set", func() bool { return j.Ready() == nil })

	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	srv.Set(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
			w.Write(doc)
		case <-r.Context().Done():
		}
	})

	const n = 500
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := j.Key(t.Context(), fmt.Sprintf("unknown-%d", i), "ES256")
			errs <- err
		}()
	}
	// One call started the fetch and waits for it; the fetch cannot end
	// before release, so the others must all come back on their own.
	for i := range n - 1 {
		select {
		case err := <-errs:
			if !errors.Is(err, keys.ErrUnknownKey) {
				t.Fatalf("Key(unknown kid) error = %v, want %v", err, keys.ErrUnknownKey)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d calls returned while a fetch was running; the others wait for it", i, n-1)
		}
	}
	select {
	case err := <-errs:
		t.Fatalf("all %d calls returned before the fetch ended (last error %v); none triggered a fetch", n, err)
	default:
	}
	releaseOnce.Do(func() { close(release) })
	if err := <-errs; !errors.Is(err, keys.ErrUnknownKey) {
		t.Errorf("Key(unknown kid) after the refetch error = %v, want %v", err, keys.ErrUnknownKey)
	}
	if got := srv.Hits.Load(); got != 2 {
		t.Errorf("server got %d requests, want 2 (first fetch and one refetch)", got)
	}
}

func TestJWKSRotation(t *testing.T) {
	oldKey, newKey := authtest.NewKeyID(t, "RS256", "old"), authtest.NewKeyID(t, "ES256", "new")

	t.Run("added key found by the refetch of an unknown kid", func(t *testing.T) {
		srv := authtest.NewServer(t, authtest.JWKS(t, oldKey))
		// Refresh is an hour: only the unknown kid can cause a fetch.
		j, _ := authtest.NewJWKS(t, keys.JWKSOptions{URL: srv.URL, Refresh: time.Hour, MinRefresh: time.Millisecond})
		authtest.WaitFor(t, "first key set", func() bool { return j.Ready() == nil })
		tok := authtest.Token(t, newKey, nil, authtest.Claims(nil))
		if err := srcVerify(t, j, tok); err == nil {
			t.Fatalf("token of a key not yet published verified")
		}
		srv.Serve(authtest.JWKS(t, oldKey, newKey))
		authtest.WaitFor(t, "the new kid to be found", func() bool { return srcVerify(t, j, tok) == nil })
		if got := srv.Hits.Load(); got < 2 {
			t.Errorf("server got %d requests, want a refetch", got)
		}
	})

	t.Run("removed key unknown after the next refresh", func(t *testing.T) {
		srv := authtest.NewServer(t, authtest.JWKS(t, oldKey, newKey))
		j, reg := authtest.NewJWKS(t, keys.JWKSOptions{URL: srv.URL, Refresh: 5 * time.Millisecond})
		authtest.WaitFor(t, "first key set", func() bool { return j.Ready() == nil })
		if err := srcVerify(t, j, authtest.Token(t, oldKey, nil, authtest.Claims(nil))); err != nil {
			t.Fatalf("verify token of the old key: %v", err)
		}
		srv.Serve(authtest.JWKS(t, newKey))
		authtest.WaitFor(t, "the old kid to be gone", func() bool {
			_, err := j.Key(t.Context(), "old", "RS256")
			return errors.Is(err, keys.ErrUnknownKey)
		})
		if err := srcVerify(t, j, authtest.Token(t, newKey, nil, authtest.Claims(nil))); err != nil {
			t.Errorf("verify token of the kept key: %v", err)
		}
		if got := srcMetric(t, reg, "plantstore_jwks_keys", ""); got != 1 {
			t.Errorf("plantstore_jwks_keys = %v, want 1", got)
		}
	})
}

// newIssuer serves a discovery document built by meta (given the server's
// URL) and, at /jwks, doc.
func newIssuer(t testing.TB, doc []byte, meta func(base string) map[string]any) *authtest.Server {
	t.Helper()
	srv := authtest.NewServer(t, nil)
	srv.Set(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(meta(srv.URL))
		case "/jwks":
			w.Write(doc)
		default:
			http.NotFound(w, r)
		}
	})
	return srv
}

func TestJWKSDiscovery(t *testing.T) {
	k := authtest.NewKeyID(t, "EdDSA", "ed")
	doc := authtest.JWKS(t, k)
	tests := []struct {
		name    string
		meta    func(base string) map[string]any
		wantErr error // nil: the keys must become usable
	}{
		{
			name: "issuer matches",
			meta: func(base string) map[string]any { return map[string]any{"issuer": base, "jwks_uri": base + "/jwks"} },
		},
		{
			name: "issuer mismatch",
			meta: func(base string) map[string]any {
				return map[string]any{"issuer": "https://evil.example", "jwks_uri": base + "/jwks"}
			},
			wantErr: keys.ErrDiscoveryIssuer,
		},
		{
			name: "issuer with a trailing slash",
			meta: func(base string) map[string]any {
				return map[string]any{"issuer": base + "/", "jwks_uri": base + "/jwks"}
			},
			wantErr: keys.ErrDiscoveryIssuer,
		},
		{
			name:    "no jwks_uri",
			meta:    func(base string) map[string]any { return map[string]any{"issuer": base} },
			wantErr: keys.ErrNoJWKSURI,
		},
		{
			name: "jwks_uri not http",
			meta: func(base string) map[string]any {
				return map[string]any{"issuer": base, "jwks_uri": "file:///etc/jwks.json"}
			},
			wantErr: keys.ErrNoJWKSURI,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newIssuer(t, doc, tt.meta)
			j, _ := authtest.NewJWKS(t, keys.JWKSOptions{Issuer: srv.URL, Refresh: time.Hour, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
			if tt.wantErr == nil {
				authtest.WaitFor(t, "keys from the discovered JWKS", func() bool { return j.Ready() == nil })
				if err := srcVerify(t, j, authtest.Token(t, k, nil, authtest.Claims(nil))); err != nil {
					t.Errorf("verify token: %v", err)
				}
				return
			}
			authtest.WaitFor(t, fmt.Sprintf("Ready() to report %v", tt.wantErr), func() bool { return errors.Is(j.Ready(), tt.wantErr) })
			if _, err := j.Key(t.Context(), "ed", "EdDSA"); !errors.Is(err, keys.ErrNoKeys) {
				t.Errorf("Key(ed) error = %v, want %v", err, keys.ErrNoKeys)
			}
		})
	}
}

func TestDiscover(t *testing.T) {
	tests := []struct {
		name    string
		meta    func(base string) map[string]any
		suffix  string // appended to the server URL to form the issuer
		want    string // jwks_uri relative to the server URL
		wantErr error
	}{
		{
			name: "happy path",
			meta: func(base string) map[string]any { return map[string]any{"issuer": base, "jwks_uri": base + "/jwks"} },
			want: "/jwks",
		},
		{
			name:   "issuer with a trailing slash",
			suffix: "/",
			meta: func(base string) map[string]any {
				return map[string]any{"issuer": base + "/", "jwks_uri": base + "/jwks"}
			},
			want: "/jwks",
		},
		{
			name: "issuer mismatch",
			meta: func(string) map[string]any {
				return map[string]any{"issuer": "https://idp.example", "jwks_uri": "https://idp.example/jwks"}
			},
			wantErr: keys.ErrDiscoveryIssuer,
		},
		{
			name:    "missing jwks_uri",
			meta:    func(base string) map[string]any { return map[string]any{"issuer": base} },
			wantErr: keys.ErrNoJWKSURI,
		},
		{
			name:    "relative jwks_uri",
			meta:    func(base string) map[string]any { return map[string]any{"issuer": base, "jwks_uri": "/jwks"} },
			wantErr: keys.ErrNoJWKSURI,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newIssuer(t, nil, tt.meta)
			got, err := keys.Discover(t.Context(), srv.Client(), srv.URL+tt.suffix, 0)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("Discover(%s) = %q, %v; want error %v", srv.URL+tt.suffix, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != srv.URL+tt.want {
				t.Errorf("Discover(%s) = %q, %v; want %q, nil", srv.URL+tt.suffix, got, err, srv.URL+tt.want)
			}
		})
	}

	t.Run("not found", func(t *testing.T) {
		srv := authtest.NewServer(t, nil)
		srv.Set(http.NotFound)
		if got, err := keys.Discover(t.Context(), nil, srv.URL, 0); err == nil || !strings.Contains(err.Error(), "404") {
			t.Errorf("Discover(%s) = %q, %v; want a 404 error", srv.URL, got, err)
		}
	})
	t.Run("oversize document", func(t *testing.T) {
		srv := newIssuer(t, nil, func(base string) map[string]any {
			return map[string]any{"issuer": base, "jwks_uri": base + "/jwks", "padding": strings.Repeat("x", 2048)}
		})
		if got, err := keys.Discover(t.Context(), nil, srv.URL, 1024); err == nil {
			t.Errorf("Discover(%s, max 1024 bytes) = %q, nil; want an error", srv.URL, got)
		}
	})
}

// TestJWKSNoFittingKey: a fetched set none of whose keys serves an allowed
// algorithm is a failed fetch, counted and logged as one, and keeps the
// source not ready.
func TestJWKSNoFittingKey(t *testing.T) {
	ed := authtest.NewKeyID(t, "EdDSA", "ed")
	srv := authtest.NewServer(t, authtest.JWKS(t, ed))
	logs := &logtest.Buffer{}
	log, _, err := observability.NewLogger(logs, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	j, err := keys.NewJWKS(t.Context(), keys.JWKSOptions{URL: srv.URL, Algorithms: []string{"RS256", "ES256"}}, log, auth.NewMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	line := logs.WaitLine(t, "for the failed fetch", func(l map[string]any) bool { return l["msg"] == "jwks fetch failed" })
	if e, _ := line["error"].(string); !strings.Contains(e, "no key for the allowed algorithms RS256,ES256") {
		t.Errorf("jwks fetch failed line = %v; want the reason", line)
	}
	if err := j.Ready(); err == nil {
		t.Error("Ready() = nil with no fitting key; want an error")
	}
	if n := srcMetric(t, reg, "plantstore_jwks_refreshes_total", "failure"); n < 1 {
		t.Errorf("refresh failures = %v, want at least 1", n)
	}
}

// TestJWKSRedactsURLSecrets configures a JWKS URL with a password and a
// query that carry secrets, makes every kind of fetch error happen, and
// checks that the secrets appear in no log line and no error (the user
// name may).
func TestJWKSRedactsURLSecrets(t *testing.T) {
	const user, pass, apiKey = "jwksuser", "hunter2-pass", "k3y-s3cret"
	ed := authtest.NewKeyID(t, "EdDSA", "ed")
	srv := authtest.NewServer(t, authtest.JWKS(t, ed))
	var step atomic.Int64
	srv.Set(func(w http.ResponseWriter, r *http.Request) {
		switch step.Add(1) {
		case 1:
			w.WriteHeader(http.StatusForbidden)
		case 2:
			w.Write([]byte(strings.Repeat("x", 2<<20)))
		case 3:
			w.Write([]byte(`{"keys":[]}`))
		case 4:
			http.Redirect(w, r, "ftp://"+user+":"+pass+"@127.0.0.1/?api_key="+apiKey, http.StatusFound)
		default:
			w.Write(authtest.JWKS(t, ed))
		}
	})
	u := strings.Replace(srv.URL, "http://", "http://"+user+":"+pass+"@", 1) + "/jwks?api_key=" + apiKey
	logs := &logtest.Buffer{}
	log, _, err := observability.NewLogger(logs, "debug", "json")
	if err != nil {
		t.Fatal(err)
	}
	j, err := keys.NewJWKS(t.Context(), keys.JWKSOptions{URL: u, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	var readyErrs []string
	for j.Ready() != nil {
		readyErrs = append(readyErrs, j.Ready().Error())
		<-logs.Written()
	}
	logs.WaitLine(t, "for the keys", func(l map[string]any) bool { return l["msg"] == "jwks keys updated" })
	all := logs.String() + strings.Join(readyErrs, "\n")
	if n := strings.Count(logs.String(), `"msg":"jwks fetch failed"`); n < 4 {
		t.Fatalf("%d failed fetches logged, want 4:\n%s", n, logs)
	}
	for _, secret := range []string{pass, apiKey} {
		if strings.Contains(all, secret) {
			t.Errorf("%q appears in the logs or errors:\n%s", secret, all)
		}
	}
	if !strings.Contains(logs.String(), user+":xxxxx@127.0.0.1") || !strings.Contains(logs.String(), "/jwks?xxxxx") {
		t.Errorf("logs do not show the redacted URL:\n%s", logs)
	}
}

// TestJWKSHungProviderRecovers: keys past their max_stale while the
// provider hangs are served again within about a second of its answering,
// not once the hung request times out (10 s here): while the keys are
// refused, a fetch sends another request every second.
func TestJWKSHungProviderRecovers(t *testing.T) {
	k := authtest.NewKeyID(t, "ES256", "k1")
	good := authtest.JWKS(t, k)
	srv := authtest.NewServer(t, good)
	j, _ := authtest.NewJWKS(t, keys.JWKSOptions{
		URL: srv.URL, Refresh: time.Hour, Timeout: 10 * time.Second,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
	})
	authtest.WaitFor(t, "first key set", func() bool { return j.Ready() == nil })
	_, freshness := keys.HoldFresh(j, 300*time.Millisecond, time.Now)
	hung := make(chan struct{})
	var hanging atomic.Bool
	hanging.Store(true)
	srv.Set(func(w http.ResponseWriter, r *http.Request) {
		if hanging.Load() {
			select {
			case <-hung:
			case <-r.Context().Done():
				return
			}
		}
		w.Write(good)
	})
	authtest.WaitFor(t, "the keys past max_stale", func() bool { return !freshness.Fresh(time.Now()) })
	// A fetch started while stale is hanging now; the provider comes back.
	time.Sleep(200 * time.Millisecond)
	hanging.Store(false)
	back := time.Now()
	deadline := back.Add(8 * time.Second)
	for !freshness.Fresh(time.Now()) {
		if time.Now().After(deadline) {
			t.Fatalf("keys still stale %v after the provider answered again; want about a second", time.Since(back))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := time.Since(back); d > 3*time.Second {
		t.Errorf("keys fresh again %v after the provider answered; want within about a second", d)
	}
	close(hung)
}
