package main

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestImportRules checks the dependency direction drawn in
// docs/architecture.md: the standard-library leaves (observability/setting,
// auth/edge) at the bottom; observability, auth/keys and auth/dpop above
// them; the pipeline, auth, above those, knowing no way of trusting a
// token; the ways (auth/jws) and the builders (auth/issuers, auth/mint)
// above the pipeline; plants (the domain, stdlib only) under plants/api
// and plants/postgres; main over all. The third-party libraries stay in
// the files that own them. Test helper packages sit beside the package
// they serve and import what it imports.
func TestImportRules(t *testing.T) {
	const mod = "github.com/plantstore/plantstore"
	allowed := map[string][]string{
		"observability/setting":     nil,
		"auth/edge":                 nil,
		"observability":             {"auth/edge", "observability/setting"},
		"observability/logtest":     nil,
		"observability/metricstest": nil,
		"observability/spantest":    nil,
		"auth/keys":                 {"observability/setting"},
		"auth/dpop":                 {"observability/setting"},
		"auth":                      {"auth/dpop", "auth/edge", "observability", "observability/setting"},
		"auth/jws":                  {"auth", "auth/keys"},
		"auth/mint":                 {"auth", "auth/dpop", "auth/edge", "auth/keys"},
		"auth/issuers":              {"auth", "auth/introspect", "auth/jws", "auth/keys", "observability/setting"},
		"auth/introspect":           {"auth", "auth/keys", "auth/mint", "observability/setting"},
		"auth/authtest":             {"auth", "auth/keys"},
		"auth/redisstate":           {"auth", "observability/setting"},
		"auth/revoke":               {"auth", "auth/keys", "observability/setting"},
		"auth/ssf":                  {"auth", "auth/jws"},
		"auth/redisstate/redistest": nil,
		"plants":                    nil,
		"plants/storetest":          {"plants"},
		"plants/api":                {"auth", "observability", "plants"},
		"plants/api/reference":      nil,
		"plants/postgres":           {"plants", "observability/setting"},
		"plants/postgres/pgtest":    {"observability/testenv"},
		"observability/testenv":     nil,
	}
	// Each library, and the only files (by directory/file) that may import it.
	owners := map[string]func(dir, file string) bool{
		"github.com/gin-gonic/gin": func(dir, file string) bool {
			return dir == "." && (file == "main.go" || file == "routes.go") || dir == "auth" && file == "middleware.go" ||
				dir == "plants/api" || dir == "observability" && (file == "middleware.go" || file == "entry.go")
		},
		"github.com/jackc/pgx/v5":     func(dir, _ string) bool { return strings.HasPrefix(dir, "plants/postgres") },
		"github.com/pressly/goose/v3": func(dir, _ string) bool { return dir == "plants/postgres" },
		"github.com/golang-jwt/jwt/v5": func(dir, _ string) bool {
			return dir == "auth/jws" || dir == "auth/dpop" || dir == "auth/mint" || dir == "auth/authtest" || dir == "auth/introspect"
		},
		"github.com/MicahParks/jwkset": func(dir, _ string) bool { return dir == "auth/keys" || dir == "auth/mint" || dir == "auth/authtest" },
		// The OpenTelemetry SDK and its exporters are set up in one place;
		// the packages that make spans use the API only.
		"go.opentelemetry.io/otel/sdk": func(dir, _ string) bool { return dir == "observability" || dir == "observability/spantest" },
		"go.opentelemetry.io/contrib":  func(dir, _ string) bool { return dir == "observability" },
		"github.com/exaring/otelpgx":   func(dir, _ string) bool { return dir == "plants/postgres" },
		"github.com/redis/go-redis/v9": func(dir, _ string) bool { return dir == "auth/redisstate" },
		// Files that change under the service (key files, secrets, the
		// nonce key) are followed by one watch, keys.WatchFile.
		"github.com/fsnotify/fsnotify": func(dir, file string) bool { return dir == "auth/keys" && file == "watch.go" },
	}
	// Every package of the module has its rule: a new one must be added.
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if rel, ok := strings.CutPrefix(p, mod+"/"); ok {
			if _, known := allowed[rel]; !known {
				t.Errorf("package %s has no import rule in TestImportRules", rel)
			}
		}
	}
	fset := token.NewFileSet()
	allowed["."] = nil // main: checked for the libraries only
	for dir, deps := range allowed {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if rel, ok := strings.CutPrefix(p, mod+"/"); ok && dir != "." && !slices.Contains(deps, rel) {
					t.Errorf("%s imports %s; %s may import only %v", path, rel, dir, deps)
				}
				for lib, may := range owners {
					if (p == lib || strings.HasPrefix(p, lib+"/")) && !may(dir, filepath.Base(path)) {
						t.Errorf("%s imports %s, which belongs elsewhere", path, p)
					}
				}
			}
		}
	}
}

// TestDomainLinksNoEdge checks, on the compiled dependency graph, that the
// domain and its PostgreSQL adapter (all that "plantstore migrate" and
// "import" need) link neither gin nor the JWT libraries nor auth, and that
// the leaf every package may import, observability/setting, links the
// standard library alone.
func TestDomainLinksNoEdge(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./observability/setting").Output()
	if err != nil {
		t.Fatalf("go list -deps ./observability/setting: %v", err)
	}
	if deps := strings.Fields(string(out)); len(deps) != 1 {
		t.Errorf("observability/setting links %v; want the standard library alone", deps)
	}
	for _, pkg := range []string{"./plants", "./plants/postgres"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, banned := range []string{"github.com/gin-gonic/gin", "github.com/golang-jwt/jwt/v5", "github.com/plantstore/plantstore/auth", "github.com/plantstore/plantstore/plants/api"} {
			if slices.Contains(strings.Fields(string(out)), banned) {
				t.Errorf("%s links %s", pkg, banned)
			}
		}
	}
}

// TestPipelineLinksNoWayOfTrust checks that the auth pipeline links no
// way of trusting a token: neither the signature one (auth/jws) nor the
// key sources and their JWKS library. A way (signatures, introspection)
// is a package that implements auth.Authenticator, added beside the
// others, not edited into auth. (golang-jwt is linked: DPoP proofs are
// JWTs, which auth/dpop verifies with its algorithms.)
func TestPipelineLinksNoWayOfTrust(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./auth").Output()
	if err != nil {
		t.Fatalf("go list -deps ./auth: %v", err)
	}
	for _, banned := range []string{"github.com/MicahParks/jwkset", "github.com/plantstore/plantstore/auth/keys", "github.com/plantstore/plantstore/auth/jws", "github.com/plantstore/plantstore/auth/introspect"} {
		if slices.Contains(strings.Fields(string(out)), banned) {
			t.Errorf("auth links %s", banned)
		}
	}
}
