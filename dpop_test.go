package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// cli runs a plantstore command and returns what it printed, failing t on
// an error.
func cli(t testing.TB, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), args, nil, nil, &out, io.Discard); err != nil {
		t.Fatalf("plantstore %q: %v", args, err)
	}
	return strings.TrimSpace(out.String())
}

// TestDPoPServe walks the DPoP path from the command line: a client key, a
// token bound to it (token -dpop-key), a proof per request (proof), served
// by the service; the same proof twice, the token as Bearer and a proof
// for another URL are refused.
func TestDPoPServe(t *testing.T) {
	dir := t.TempDir()
	cli(t, "keygen", "-alg", "RS256", "-out", filepath.Join(dir, "issuer"))
	cli(t, "keygen", "-alg", "ES256", "-out", filepath.Join(dir, "client"))
	token := cli(t, "token", "-key", filepath.Join(dir, "issuer.key"), "-sub", "alice", "-groups", "gardeners",
		"-iss", "https://idp.example", "-dpop-key", filepath.Join(dir, "client.key"))
	in := startServe(t, nil, "-jwt-key-file", filepath.Join(dir, "issuer.jwks.json"), "-jwt-issuer", "https://idp.example")
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	url := in.api + "/plants"
	do := func(scheme, proof string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", scheme+" "+token)
		if proof != "" {
			req.Header.Set("DPoP", proof)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate") + " " + string(body)
	}
	p := cli(t, "proof", "-key", filepath.Join(dir, "client.key"), "-url", url, "-token", token)
	if status, body := do("DPoP", p); status != http.StatusOK || !strings.Contains(body, "Boston fern") {
		t.Fatalf("GET /plants with a DPoP proof = %d %s, want alice's plants", status, body)
	}
	for _, tt := range []struct {
		name, scheme, proof, want string
	}{
		{"the same proof again", "DPoP", p, `error="invalid_dpop_proof"`},
		{"the bound token as Bearer", "Bearer", "", `error="invalid_token"`},
		{"a proof for another URL", "DPoP", cli(t, "proof", "-key", filepath.Join(dir, "client.key"), "-url", in.api+"/other", "-token", token), `error="invalid_dpop_proof"`},
		{"a proof for another method", "DPoP", cli(t, "proof", "-key", filepath.Join(dir, "client.key"), "-method", "POST", "-url", url, "-token", token), `error="invalid_dpop_proof"`},
	} {
		if status, body := do(tt.scheme, tt.proof); status != http.StatusUnauthorized || !strings.Contains(body, tt.want) || !strings.Contains(body, `resource_metadata="`+in.api+`/.well-known/oauth-protected-resource"`) {
			t.Errorf("%s: %d %s; want 401 with %s and the resource metadata", tt.name, status, body, tt.want)
		}
	}
}

// TestResourceMetadataServe fetches the protected resource metadata from
// the API listener without a credential, and checks that another method
// there is a 405 counted under its route.
func TestResourceMetadataServe(t *testing.T) {
	in := startServe(t, nil, "-jwt-hmac-secret-file", hmacSecretFile(t), "-jwt-issuer", "https://idp.example",
		"-jwt-required-scope", "plants:read", "-public-url", "https://plants.example.com", "-jwt-dpop", "required")
	status, body, h := get(t, in.api+"/.well-known/oauth-protected-resource", "")
	var md map[string]any
	if status != http.StatusOK || h.Get("Content-Type") != "application/json; charset=utf-8" || json.Unmarshal(body, &md) != nil {
		t.Fatalf("GET metadata = %d %v %s", status, h, body)
	}
	want := `{"authorization_servers":["https://idp.example"],"bearer_methods_supported":["header"],"dpop_bound_access_tokens_required":true,"dpop_signing_alg_values_supported":["ES256","ES384","ES512","EdDSA","Ed25519","PS256","PS384","PS512","RS256","RS384","RS512"],"resource":"https://plants.example.com","scopes_supported":["plants:read"]}`
	if got, _ := json.Marshal(md); string(got) != want {
		t.Errorf("metadata = %s\nwant %s", got, want)
	}
	req, _ := http.NewRequest(http.MethodPost, in.api+"/.well-known/oauth-protected-resource", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST metadata = %d, Allow %q; want 405 with GET, HEAD", resp.StatusCode, resp.Header.Get("Allow"))
	}
	status, _, h = get(t, in.api+"/plants", "")
	if status != http.StatusUnauthorized || h.Get("WWW-Authenticate") != `DPoP realm="plantstore", algs="ES256 ES384 ES512 EdDSA Ed25519 PS256 PS384 PS512 RS256 RS384 RS512", resource_metadata="https://plants.example.com/.well-known/oauth-protected-resource"` {
		t.Errorf("GET /plants without a credential where DPoP is required: %d %q", status, h.Get("WWW-Authenticate"))
	}
	_, metrics, _ := get(t, in.admin+"/metrics", "")
	for _, w := range []string{
		`plantstore_http_requests_total{code="200",method="GET",route="/.well-known/oauth-protected-resource"} 1`,
		`plantstore_http_requests_total{code="405",method="POST",route="/.well-known/oauth-protected-resource"} 1`,
	} {
		if !strings.Contains(string(metrics), w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}
}

// TestDPoPAlgorithmsServe: -dpop-algorithms is the set a proof may use,
// and the set the metadata and the DPoP challenge name, exactly.
func TestDPoPAlgorithmsServe(t *testing.T) {
	dir := t.TempDir()
	cli(t, "keygen", "-alg", "ES256", "-out", filepath.Join(dir, "issuer"))
	for _, alg := range []string{"ES256", "RS256"} {
		cli(t, "keygen", "-alg", alg, "-out", filepath.Join(dir, alg))
	}
	in := startServe(t, map[string]string{"PLANTSTORE_DPOP_ALGORITHMS": "Ed25519,ES256"},
		"-jwt-key-file", filepath.Join(dir, "issuer.jwks.json"), "-jwt-issuer", "https://idp.example", "-public-url", "https://plants.example.com")
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	_, body, _ := get(t, in.api+"/.well-known/oauth-protected-resource", "")
	var md struct {
		Algs []string `json:"dpop_signing_alg_values_supported"`
	}
	if err := json.Unmarshal(body, &md); err != nil || strings.Join(md.Algs, " ") != "Ed25519 ES256" {
		t.Errorf("metadata dpop_signing_alg_values_supported = %v (%v); want [Ed25519 ES256]", md.Algs, err)
	}
	for _, tt := range []struct {
		alg  string
		want int
	}{{"ES256", http.StatusOK}, {"RS256", http.StatusUnauthorized}} {
		key := filepath.Join(dir, tt.alg+".key")
		token := cli(t, "token", "-key", filepath.Join(dir, "issuer.key"), "-sub", "alice", "-iss", "https://idp.example", "-dpop-key", key)
		req, _ := http.NewRequest(http.MethodGet, in.api+"/plants", nil)
		req.Header.Set("Authorization", "DPoP "+token)
		req.Header.Set("DPoP", cli(t, "proof", "-key", key, "-url", "https://plants.example.com/plants", "-token", token))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ch := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != tt.want || tt.want != http.StatusOK && !strings.HasPrefix(ch, `DPoP realm="plantstore", algs="Ed25519 ES256", error="invalid_dpop_proof"`) {
			t.Errorf("a %s proof: %d %q; want %d, and a challenge naming Ed25519 ES256 when refused", tt.alg, resp.StatusCode, ch, tt.want)
		}
	}
}

// TestDPoPNonceServe walks server nonces from the command line: a proof
// without a nonce is refused with one (use_dpop_nonce, DPoP-Nonce), the
// proof made again with it (proof -nonce) passes, and every answer to a
// DPoP request carries the nonce, a 400 after authentication too. A new key
// file and SIGHUP rotate the key, the previous key's nonces still
// accepted; a key too short is refused with a log line and the key in use
// stays.
func TestDPoPNonceServe(t *testing.T) {
	dir := t.TempDir()
	cli(t, "keygen", "-alg", "ES256", "-out", filepath.Join(dir, "issuer"))
	cli(t, "keygen", "-alg", "ES256", "-out", filepath.Join(dir, "client"))
	token := cli(t, "token", "-key", filepath.Join(dir, "issuer.key"), "-sub", "alice", "-dpop-key", filepath.Join(dir, "client.key"))
	keyFile := filepath.Join(dir, "nonce.key")
	writeKey := func(key string) {
		if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeKey(strings.Repeat("a", 32))
	in := startServe(t, nil, "-jwt-key-file", filepath.Join(dir, "issuer.jwks.json"), "-dpop-nonce-key-file", keyFile)
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	url := in.api + "/plants"
	do := func(query, nonce string) *http.Response {
		t.Helper()
		args := []string{"proof", "-key", filepath.Join(dir, "client.key"), "-url", url, "-token", token}
		if nonce != "" {
			args = append(args, "-nonce", nonce)
		}
		req, _ := http.NewRequest(http.MethodGet, url+query, nil)
		req.Header.Set("Authorization", "DPoP "+token)
		req.Header.Set("DPoP", cli(t, args...))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	first := do("", "")
	nonce := first.Header.Get("DPoP-Nonce")
	if first.StatusCode != http.StatusUnauthorized || nonce == "" || !strings.Contains(first.Header.Get("WWW-Authenticate"), `error="use_dpop_nonce"`) {
		t.Fatalf("a proof without a nonce: %d, DPoP-Nonce %q, %q; want 401 use_dpop_nonce with a nonce", first.StatusCode, nonce, first.Header.Get("WWW-Authenticate"))
	}
	if resp := do("", nonce); resp.StatusCode != http.StatusOK || resp.Header.Get("DPoP-Nonce") == "" {
		t.Fatalf("the proof with the nonce: %d, DPoP-Nonce %q; want 200 with a nonce", resp.StatusCode, resp.Header.Get("DPoP-Nonce"))
	}
	if resp := do("?limit=many", nonce); resp.StatusCode != http.StatusBadRequest || resp.Header.Get("DPoP-Nonce") == "" {
		t.Errorf("a bad limit: %d, DPoP-Nonce %q; want 400 with a nonce", resp.StatusCode, resp.Header.Get("DPoP-Nonce"))
	}
	_, metrics, _ := get(t, in.admin+"/metrics", "")
	if !strings.Contains(string(metrics), `reason="dpop_nonce"} 1`) {
		t.Error("/metrics does not count the one refusal under dpop_nonce")
	}

	writeKey(strings.Repeat("b", 40))
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	in.stderr.WaitLine(t, "for the rotation", func(l map[string]any) bool { return strings.HasPrefix(fmt.Sprint(l["msg"]), "DPoP nonce key rotated") })
	resp := do("", nonce)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a nonce of the previous key right after the rotation: %d; want 200", resp.StatusCode)
	}
	rotated := resp.Header.Get("DPoP-Nonce")
	if rotated == nonce || rotated == "" {
		t.Errorf("the nonce after the rotation is %q; want a new one", rotated)
	}

	writeKey(strings.Repeat("c", 31))
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	in.stderr.WaitLine(t, "for the refusal", func(l map[string]any) bool {
		return l["msg"] == "DPoP nonce key reload refused; the previous key keeps serving"
	})
	if resp := do("", rotated); resp.StatusCode != http.StatusOK || resp.Header.Get("DPoP-Nonce") != rotated {
		t.Errorf("after a refused key: %d, DPoP-Nonce %q; want 200 and the nonce of the key in use", resp.StatusCode, resp.Header.Get("DPoP-Nonce"))
	}
}
