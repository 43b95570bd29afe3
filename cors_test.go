package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	listedOrigin   = "https://app.example.com"
	unlistedOrigin = "https://unlisted-origin.example"
	exposedHeaders = "Link, WWW-Authenticate, DPoP-Nonce, X-Request-ID, Retry-After"
	allowedHeaders = "Authorization, DPoP, traceparent, tracestate, X-Request-ID"
)

// send sends method url with the headers (name, value, name, value...)
// and returns the status, body and header of the answer.
func send(t testing.TB, method, url string, headers ...string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return resp.StatusCode, body, resp.Header
}

// varies reports whether h's Vary names name, over all its lines.
func varies(h http.Header, name string) bool {
	for _, v := range h.Values("Vary") {
		for item := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(item), name) {
				return true
			}
		}
	}
	return false
}

// corsHeaders returns the Access-Control-* headers of h.
func corsHeaders(h http.Header) []string {
	var out []string
	for k := range h {
		if strings.HasPrefix(k, "Access-Control-") {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// checkNoCredentials fails when h allows credentials mode.
func checkNoCredentials(t testing.TB, what string, h http.Header) {
	t.Helper()
	if v, ok := h["Access-Control-Allow-Credentials"]; ok {
		t.Errorf("%s: Access-Control-Allow-Credentials %q; it is never sent", what, v)
	}
}

// authFailures returns the sum of plantstore_auth_failures_total on admin.
func authFailures(t testing.TB, admin string) float64 {
	t.Helper()
	_, body, _ := get(t, admin+"/metrics", "")
	sum := 0.0
	for _, m := range regexp.MustCompile(`(?m)^plantstore_auth_failures_total\{[^}]*\} (\S+)$`).FindAllSubmatch(body, -1) {
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	return sum
}

// TestCORSPreflight sends preflights through the service's handler chain:
// from a listed origin 204 with the CORS headers, with and without
// Access-Control-Request-Headers; from another 403 in the Error shape
// without them; and none of them counts as an authentication failure,
// needs a token or logs the origin.
func TestCORSPreflight(t *testing.T) {
	in := startServe(t, nil, "-dev", "-cors-origins", "http://127.0.0.1:8081,"+listedOrigin)
	tests := []struct {
		name        string
		origin      string
		headers     []string // Access-Control-Request-Headers lines
		want        int
		wantHeaders string // Access-Control-Allow-Headers; "-" for none
	}{
		{name: "listed, no headers asked", origin: listedOrigin, want: 204, wantHeaders: allowedHeaders},
		{name: "listed, authorization asked", origin: listedOrigin, headers: []string{"authorization"}, want: 204, wantHeaders: "Authorization"},
		{name: "listed, several asked", origin: "http://127.0.0.1:8081", headers: []string{"x-request-id,authorization,traceparent"}, want: 204, wantHeaders: "Authorization, traceparent, X-Request-ID"},
		{name: "listed, one asked not allowed", origin: listedOrigin, headers: []string{"authorization,x-custom"}, want: 204, wantHeaders: "Authorization"},
		{name: "listed, only others asked", origin: listedOrigin, headers: []string{"x-custom"}, want: 204, wantHeaders: "-"},
		{name: "unlisted", origin: unlistedOrigin, headers: []string{"authorization"}, want: 403},
		{name: "listed origin with a path is another origin", origin: listedOrigin + "/", want: 403},
		{name: "listed origin on another port", origin: "http://127.0.0.1:8082", want: 403},
	}
	before := authFailures(t, in.admin)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdrs := []string{"Origin", tt.origin, "Access-Control-Request-Method", "GET"}
			for _, h := range tt.headers {
				hdrs = append(hdrs, "Access-Control-Request-Headers", h)
			}
			status, body, h := send(t, http.MethodOptions, in.api+"/plants?limit=1", hdrs...)
			checkNoCredentials(t, tt.name, h)
			if status != tt.want {
				t.Fatalf("preflight from %s asking %q = %d %s; want %d", tt.origin, tt.headers, status, body, tt.want)
			}
			if tt.want == http.StatusForbidden {
				var e struct {
					Error   int    `json:"error"`
					Message string `json:"message"`
				}
				if err := json.Unmarshal(body, &e); err != nil || e.Error != 403 || e.Message == "" || h.Get("Content-Type") != "application/json" {
					t.Errorf("403 body %q (%s): want the Error shape", body, h.Get("Content-Type"))
				}
				if got := corsHeaders(h); len(got) > 0 || varies(h, "Origin") {
					t.Errorf("403 preflight carries %v, Vary %q; want no CORS header", got, h.Values("Vary"))
				}
				return
			}
			want := map[string]string{
				"Access-Control-Allow-Origin":  tt.origin,
				"Access-Control-Allow-Methods": "GET, HEAD",
				"Access-Control-Max-Age":       "600",
			}
			for k, v := range want {
				if got := h.Values(k); len(got) != 1 || got[0] != v {
					t.Errorf("%s %q; want %q", k, got, v)
				}
			}
			got := h.Values("Access-Control-Allow-Headers")
			if tt.wantHeaders == "-" && len(got) != 0 || tt.wantHeaders != "-" && (len(got) != 1 || got[0] != tt.wantHeaders) {
				t.Errorf("Access-Control-Allow-Headers %q; want %q", got, tt.wantHeaders)
			}
			if !varies(h, "Origin") {
				t.Errorf("Vary %q; want Origin", h.Values("Vary"))
			}
			if len(body) != 0 || h.Get("Access-Control-Expose-Headers") != "" {
				t.Errorf("204 body %q, Expose-Headers %q; want neither", body, h.Get("Access-Control-Expose-Headers"))
			}
		})
	}
	// A preflight that comes with a (bogus) credential is still only a
	// preflight: not checked, not counted.
	if status, body, _ := send(t, http.MethodOptions, in.api+"/plants", "Origin", listedOrigin, "Access-Control-Request-Method", "GET", "Authorization", "Bearer not-a-token"); status != http.StatusNoContent {
		t.Errorf("preflight with an Authorization header = %d %s; want 204", status, body)
	}
	if after := authFailures(t, in.admin); after != before {
		t.Errorf("plantstore_auth_failures_total went from %v to %v over preflights alone", before, after)
	}
	// The request counter is written once the answer is sent.
	waitFor(t, patience, "the preflights on /metrics", func() bool {
		_, metrics, _ := get(t, in.admin+"/metrics", "")
		return strings.Contains(string(metrics), `plantstore_http_requests_total{code="204",method="OPTIONS",route="/plants"} 6`) &&
			strings.Contains(string(metrics), `plantstore_http_requests_total{code="403",method="OPTIONS",route="/plants"} 3`)
	})
	waitFor(t, patience, "the access lines of the preflights", func() bool { return strings.Count(in.stderr.String(), `"method":"OPTIONS"`) >= 9 })
	for _, line := range logLines(t, in.stderr.String()) {
		if line["msg"] == "request" && line["method"] == "OPTIONS" {
			if _, ok := line["auth_failure"]; ok {
				t.Errorf("a preflight's access line has auth_failure: %v", line)
			}
		}
	}
	if strings.Contains(in.stderr.String(), "unlisted-origin") || strings.Contains(in.stderr.String(), "not-a-token") {
		t.Errorf("the log names the unlisted origin or the token:\n%s", in.stderr)
	}
}

// TestCORSOrderOfChecks: with CORS on, an unknown path is still 404 and an
// OPTIONS that is no preflight, or a preflight on the metadata document,
// still 405 with Allow: GET, HEAD.
func TestCORSOrderOfChecks(t *testing.T) {
	in := startServe(t, nil, "-dev", "-cors-origins", listedOrigin)
	preflight := []string{"Origin", listedOrigin, "Access-Control-Request-Method", "GET"}
	tests := []struct {
		name    string
		path    string
		headers []string
		want    int
	}{
		{"preflight on an unknown path", "/nope", preflight, 404},
		{"preflight on /plants/", "/plants/", preflight, 404},
		{"OPTIONS without Origin", "/plants", []string{"Access-Control-Request-Method", "GET"}, 405},
		{"OPTIONS without Access-Control-Request-Method", "/plants", []string{"Origin", listedOrigin}, 405},
		{"preflight on the metadata document", "/.well-known/oauth-protected-resource", preflight, 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, h := send(t, http.MethodOptions, in.api+tt.path, tt.headers...)
			if status != tt.want {
				t.Fatalf("OPTIONS %s %q = %d %s; want %d", tt.path, tt.headers, status, body, tt.want)
			}
			if tt.want == 405 && h.Get("Allow") != "GET, HEAD" {
				t.Errorf("405 Allow %q; want GET, HEAD", h.Get("Allow"))
			}
			if h.Get("Access-Control-Allow-Methods") != "" || h.Get("Access-Control-Max-Age") != "" {
				t.Errorf("a %d carries preflight headers: %v", status, corsHeaders(h))
			}
			checkNoCredentials(t, tt.name, h)
		})
	}
	// The metadata document is a simple GET: readable from a listed
	// origin without a preflight.
	status, _, h := send(t, http.MethodGet, in.api+"/.well-known/oauth-protected-resource", "Origin", listedOrigin)
	if status != http.StatusOK || h.Get("Access-Control-Allow-Origin") != listedOrigin {
		t.Errorf("GET metadata from a listed origin = %d, Access-Control-Allow-Origin %q; want 200 and the origin", status, h.Get("Access-Control-Allow-Origin"))
	}
}

// TestCORSOff: without -cors-origins a preflight is 405 like any OPTIONS,
// and no response carries a CORS header.
func TestCORSOff(t *testing.T) {
	in := startServe(t, nil, "-dev")
	status, body, h := send(t, http.MethodOptions, in.api+"/plants", "Origin", listedOrigin, "Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "authorization")
	if status != http.StatusMethodNotAllowed || h.Get("Allow") != "GET, HEAD" {
		t.Errorf("preflight without -cors-origins = %d %s, Allow %q; want 405, GET, HEAD", status, body, h.Get("Allow"))
	}
	for _, path := range []string{"/plants", "/.well-known/oauth-protected-resource", "/nope"} {
		_, _, h := send(t, http.MethodGet, in.api+path, "Origin", listedOrigin)
		if got := corsHeaders(h); len(got) > 0 || varies(h, "Origin") {
			t.Errorf("GET %s without -cors-origins carries %v, Vary %q", path, got, h.Values("Vary"))
		}
	}
}

// TestCORSActualResponses checks that every answer to a listed origin, 200
// and refusals alike, lets the page read it and the headers it needs, and
// that answers to another origin do not.
func TestCORSActualResponses(t *testing.T) {
	scoped, keyFile := mintTestToken(t, "EdDSA", "-sub", "alice", "-scope", "plants:read")
	unscoped := mintWithKeyFile(t, keyFile, "bob")
	limited := mintWith(t, keyFile, "-sub", "carol", "-scope", "plants:read")
	in := startServe(t, nil, "-jwt-key-file", keyFile, "-jwt-required-scope", "plants:read",
		"-rate-limit", "0.01", "-rate-burst", "40", "-cors-origins", listedOrigin+",http://127.0.0.1:8081")
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	// carol spends her burst: her next request is 429. alice's stays
	// well within hers.
	for i := 0; ; i++ {
		status, body, _ := send(t, http.MethodGet, in.api+"/plants", "Authorization", "Bearer "+limited)
		if status == http.StatusTooManyRequests {
			break
		}
		if status != http.StatusOK || i > 40 {
			t.Fatalf("carol's request %d = %d %s; want 200 until 429 after the burst of 40", i, status, body)
		}
	}
	db := downDatabase(t)

	tests := []struct {
		name   string
		base   string
		method string
		path   string
		token  string
		want   int
	}{
		{"200", in.api, "GET", "/plants?limit=1", scoped, 200},
		{"200 HEAD", in.api, "HEAD", "/plants", scoped, 200},
		{"401 no token", in.api, "GET", "/plants", "", 401},
		{"401 bad token", in.api, "GET", "/plants", scoped + "x", 401},
		{"403 no scope", in.api, "GET", "/plants", unscoped, 403},
		{"429 over the limit", in.api, "GET", "/plants", limited, 429},
		{"400 bad limit", in.api, "GET", "/plants?limit=-1", scoped, 400},
		{"404", in.api, "GET", "/nope", scoped, 404},
		{"405", in.api, "DELETE", "/plants", scoped, 405},
		{"503 database down", db.api, "GET", "/plants", db.token, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, origin := range []string{listedOrigin, "http://127.0.0.1:8081", unlistedOrigin, ""} {
				hdrs := []string{"X-Request-ID", "cors-test-1"}
				if origin != "" {
					hdrs = append(hdrs, "Origin", origin)
				}
				if tt.token != "" {
					hdrs = append(hdrs, "Authorization", "Bearer "+tt.token)
				}
				status, body, h := send(t, tt.method, tt.base+tt.path, hdrs...)
				if status != tt.want {
					t.Fatalf("%s %s from %q = %d %s; want %d", tt.method, tt.path, origin, status, body, tt.want)
				}
				checkNoCredentials(t, tt.name, h)
				if !varies(h, "Origin") {
					t.Errorf("%s from %q: Vary %q; want Origin", tt.name, origin, h.Values("Vary"))
				}
				if status == 200 && !varies(h, "Authorization") {
					t.Errorf("200 from %q: Vary %q; want Authorization kept", origin, h.Values("Vary"))
				}
				if origin == "" || origin == unlistedOrigin {
					if got := corsHeaders(h); len(got) > 0 {
						t.Errorf("%s from %q carries %v; want no CORS header", tt.name, origin, got)
					}
					continue
				}
				if got := h.Values("Access-Control-Allow-Origin"); len(got) != 1 || got[0] != origin {
					t.Errorf("%s from %q: Access-Control-Allow-Origin %q; want the origin", tt.name, origin, got)
				}
				if got := h.Values("Access-Control-Expose-Headers"); len(got) != 1 || got[0] != exposedHeaders {
					t.Errorf("%s from %q: Access-Control-Expose-Headers %q; want %q", tt.name, origin, got, exposedHeaders)
				}
				if h.Get("Access-Control-Allow-Methods") != "" || h.Get("Access-Control-Max-Age") != "" {
					t.Errorf("%s: an actual response carries preflight headers %v", tt.name, corsHeaders(h))
				}
			}
		})
	}
}

// TestCORSAnyOrigin: with -cors-origins '*' (from its variable) every
// origin's preflight is allowed, answered with *, and so are actual
// responses.
func TestCORSAnyOrigin(t *testing.T) {
	in := startServe(t, map[string]string{"PLANTSTORE_CORS_ORIGINS": "*"}, "-dev")
	for _, origin := range []string{listedOrigin, unlistedOrigin, "null"} {
		status, body, h := send(t, http.MethodOptions, in.api+"/plants", "Origin", origin, "Access-Control-Request-Method", "GET")
		if status != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "*" || h.Get("Access-Control-Allow-Headers") != allowedHeaders || !varies(h, "Origin") {
			t.Errorf("preflight from %s with *: %d %s %v; want 204, Access-Control-Allow-Origin *", origin, status, body, h)
		}
		checkNoCredentials(t, "preflight with *", h)
		status, _, h = send(t, http.MethodGet, in.api+"/plants", "Origin", origin)
		if status != http.StatusUnauthorized || h.Get("Access-Control-Allow-Origin") != "*" || h.Get("Access-Control-Expose-Headers") != exposedHeaders {
			t.Errorf("GET from %s with *: %d %v; want 401 with Access-Control-Allow-Origin *", origin, status, h)
		}
		checkNoCredentials(t, "401 with *", h)
	}
}

// mintWith returns a token signed by the private key whose public JWKS is
// jwksPath (as mintTestToken writes it), with the token command's args.
func mintWith(t testing.TB, jwksPath string, args ...string) string {
	t.Helper()
	var out strings.Builder
	key := strings.TrimSuffix(jwksPath, ".jwks.json") + ".key"
	if err := run(t.Context(), append([]string{"token", "-key", key}, args...), envOf(nil), nil, &out, &out); err != nil {
		t.Fatalf("token %q: %v", args, err)
	}
	return strings.TrimSpace(out.String())
}

// downService is a service whose database never answers, with a token it
// accepts.
type downService struct{ api, token string }

// downDatabase starts a service, with CORS for listedOrigin and
// http://127.0.0.1:8081, on a database address nothing listens on: every
// /plants request is 503.
func downDatabase(t testing.TB) downService {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	secret := hmacSecretFile(t)
	in := startServe(t, nil, "-jwt-hmac-secret-file", secret, "-database-url", "postgres://plantstore@"+addr+"/test?sslmode=disable",
		"-db-connect-timeout", "200ms", "-cors-origins", listedOrigin+",http://127.0.0.1:8081")
	return downService{api: in.api, token: hmacToken(t, secret, "alice")}
}
