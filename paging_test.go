package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinkBase: what the Link header puts before /plants is -public-url
// without its trailing "/" (its path kept), or nothing without it.
func TestLinkBase(t *testing.T) {
	for _, tt := range []struct{ publicURL, want string }{
		{"", ""},
		{"https://api.example.com", "https://api.example.com"},
		{"https://api.example.com/", "https://api.example.com"},
		{"https://api.example.com/v1/", "https://api.example.com/v1"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
	} {
		if got := linkBase(tt.publicURL); got != tt.want {
			t.Errorf("linkBase(%q) = %q; want %q", tt.publicURL, got, tt.want)
		}
	}
}

// TestPagingServe walks the sample catalog page by page through the whole
// service (real keys and token, -public-url set): each next link is
// absolute on -public-url, keeps the caller's other parameters, and the
// pages together are the full list; the last page has no Link. A bad
// after is refused only after the credential and its scope: 401, 403,
// then 400.
func TestPagingServe(t *testing.T) {
	dir := t.TempDir()
	cli(t, "keygen", "-alg", "ES256", "-out", filepath.Join(dir, "issuer"))
	token := cli(t, "token", "-key", filepath.Join(dir, "issuer.key"), "-sub", "dave", "-groups", "botanists,gardeners", "-scope", "plants:read")
	noScope := cli(t, "token", "-key", filepath.Join(dir, "issuer.key"), "-sub", "dave", "-groups", "botanists,gardeners")
	const public = "https://plants.example.com/api"
	in := startServe(t, nil, "-jwt-key-file", filepath.Join(dir, "issuer.jwks.json"), "-public-url", public+"/", "-jwt-required-scope", "plants:read")
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	status, full, _ := get(t, in.api+"/plants", token)
	if status != http.StatusOK {
		t.Fatalf("GET /plants: %d %s", status, full)
	}
	var want []json.RawMessage
	if err := json.Unmarshal(full, &want); err != nil || len(want) < 5 {
		t.Fatalf("full list %s: %v", full, err)
	}
	var got []json.RawMessage
	target := "/plants?x=1&limit=4"
	for pages := 1; ; pages++ {
		status, body, h := get(t, in.api+target, token)
		var page []json.RawMessage
		if status != http.StatusOK || json.Unmarshal(body, &page) != nil {
			t.Fatalf("GET %s: %d %s", target, status, body)
		}
		got = append(got, page...)
		link := h.Get("Link")
		if link == "" {
			if pages != (len(want)+3)/4 {
				t.Errorf("%d pages; want %d", pages, (len(want)+3)/4)
			}
			break
		}
		next, ok := strings.CutPrefix(link, "<"+public+"/plants?x=1&limit=4&after=")
		if !ok || !strings.HasSuffix(next, `>; rel="next"`) || pages > len(want) {
			t.Fatalf("page %d: Link %q; want <%s/plants?x=1&limit=4&after=...>; rel=\"next\"", pages, link, public)
		}
		target = "/plants?x=1&limit=4&after=" + strings.TrimSuffix(next, `>; rel="next"`)
	}
	if fmt.Sprintf("%s", got) != fmt.Sprintf("%s", want) {
		t.Errorf("pages listed %s\nwant %s", got, want)
	}
	for _, tt := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {noScope, http.StatusForbidden}, {token, http.StatusBadRequest}} {
		if status, body, _ := get(t, in.api+"/plants?after=!!", tt.token); status != tt.want {
			t.Errorf("GET /plants?after=!! (token %t): %d %s; want %d", tt.token != "", status, body, tt.want)
		}
	}
}
