package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/plants"
)

// bannerLine is one user of the -dev banner: "# NAME (reads as P, ...)"
// and the curl line under it.
var bannerLine = regexp.MustCompile(`(?m)^# (\S+) \(reads as ([^)]*)\)\ncurl -sS -w '\\n' -H 'Authorization: Bearer ([A-Za-z0-9_.-]+)' (http://\S+)$`)

// TestDevBanner pastes each curl line that -dev prints, under the default
// configuration and under one where every setting the tokens must meet is
// changed, and checks that it returns exactly the plants its "reads as"
// principals read, by a filter written apart from the service's access
// rule, and that the banner names the catalog it serves.
func TestDevBanner(t *testing.T) {
	custom := filepath.Join(t.TempDir(), "custom.json")
	if err := os.WriteFile(custom, []byte(`[
		{"name": "Open", "readers": ["*"]},
		{"name": "Alice's", "tag": "a", "readers": ["user:alice"]},
		{"name": "Gardeners'", "readers": ["group:gardeners"]},
		{"name": "Botanists'", "readers": ["group:botanists"]},
		{"name": "Bob's and botanists'", "readers": ["user:bob", "group:botanists"]},
		{"name": "Nobody's", "readers": ["user:nobody"]}
	]`), 0o644); err != nil {
		t.Fatal(err)
	}
	customCatalog, err := plants.LoadCatalogFile(custom)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		args        []string
		catalog     *plants.Catalog
		wantCatalog string
	}{
		{"defaults", []string{"-dev"}, plants.SampleCatalog(), "the embedded sample catalog"},
		{"every setting changed", []string{"-dev", "-data", custom,
			"-jwt-groups-claim", "realm_access.roles", "-jwt-issuer", "https://dev.example/realms/x",
			"-jwt-audience", "plants-api,other", "-jwt-required-scope", "plants:read"},
			customCatalog, custom},
		{"tokens meant for this resource", []string{"-dev", "-jwt-token-types", "jwt", "-jwt-clients", "plants-cli,other", "-jwt-max-lifetime", "2h"},
			plants.SampleCatalog(), "the embedded sample catalog, ephemeral Ed25519 key; these tokens are valid for 2h0m0s"},
		{"claim rules", []string{"-dev", "-jwt-claims", `[{"path":"email_verified","equals":true},{"path":"tid","one_of":["t-1",2]},{"path":"act","exists":false},{"path":"realm_access.roles","prefix":"plants-"},{"path":"org.id","equals":{"n":1}}]`},
			plants.SampleCatalog(), "the embedded sample catalog"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := startServe(t, nil, tt.args...)
			waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
			banner := in.stdout.String()
			if first, _, _ := strings.Cut(banner, "\n"); !strings.Contains(first, tt.wantCatalog) {
				t.Errorf("banner starts %q, want it to name %s", first, tt.wantCatalog)
			}
			matches := bannerLine.FindAllStringSubmatch(banner, -1)
			if len(matches) != len(plants.SampleUsers()) {
				t.Fatalf("-dev printed %d curl lines, want %d; stdout:\n%s", len(matches), len(plants.SampleUsers()), banner)
			}
			seen := map[string]bool{}
			for _, m := range matches {
				user, readsAs, token, url := m[1], strings.Split(m[2], ", "), m[3], m[4]
				if url != in.api+"/plants" {
					t.Errorf("curl line URL = %s, want %s/plants", url, in.api)
				}
				status, body, _ := get(t, url, token)
				if status != http.StatusOK {
					t.Fatalf("%s: GET /plants = %d %s, want 200", user, status, body)
				}
				var got []wirePlant
				if err := json.Unmarshal(body, &got); err != nil {
					t.Fatalf("%s: body %s: %v", user, body, err)
				}
				want := []wirePlant{}
				for _, p := range tt.catalog.Plants() {
					if slices.ContainsFunc(p.Readers, func(r string) bool { return slices.Contains(readsAs, r) }) {
						want = append(want, wirePlant{p.Name, p.Tag})
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s (reads as %q): got %v, want %v", user, readsAs, got, want)
				}
				if !slices.Contains(readsAs, "user:"+user) || !slices.Contains(readsAs, "*") {
					t.Errorf("%s reads as %q: want user:%s and *", user, readsAs, user)
				}
				seen[fmt.Sprint(got)] = true
			}
			if len(seen) < 3 {
				t.Errorf("the sample users see %d distinct lists, want at least 3", len(seen))
			}
		})
	}
}
