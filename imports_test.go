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

// TestImportRules checks the dependency direction of the house style:
// observability ← auth ← plants/api ← main, plants (the domain, stdlib
// only) ← plants/api and plants/postgres, and the third-party libraries
// only in the files that own them. Test helper packages sit beside the
// package they serve and import what it imports.
func TestImportRules(t *testing.T) {
	const mod = "github.com/plantstore/plantstore"
	allowed := map[string][]string{
		"observability":             nil,
		"observability/logtest":     nil,
		"observability/metricstest": nil,
		"observability/spantest":    nil,
		"auth":                      {"observability"},
		"auth/authtest":             {"auth"},
		"auth/redisstate":           {"auth"},
		"auth/redisstate/redistest": nil,
		"plants":                    nil,
		"plants/storetest":          {"plants"},
		"plants/api":                {"auth", "observability", "plants"},
		"plants/api/reference":      nil,
		"plants/postgres":           {"plants"},
		"plants/postgres/pgtest":    {"observability/testenv"},
		"observability/testenv":     nil,
	}
	// Each library, and the only files (by directory/file) that may import it.
	owners := map[string]func(dir, file string) bool{
		"github.com/gin-gonic/gin": func(dir, file string) bool {
			return dir == "." && (file == "main.go" || file == "serve.go") || dir == "auth" && file == "middleware.go" ||
				dir == "plants/api" || dir == "observability" && (file == "middleware.go" || file == "entry.go")
		},
		"github.com/jackc/pgx/v5":      func(dir, _ string) bool { return strings.HasPrefix(dir, "plants/postgres") },
		"github.com/pressly/goose/v3":  func(dir, _ string) bool { return dir == "plants/postgres" },
		"github.com/golang-jwt/jwt/v5": func(dir, _ string) bool { return dir == "auth" || dir == "auth/authtest" },
		"github.com/MicahParks/jwkset": func(dir, _ string) bool { return dir == "auth" || dir == "auth/authtest" },
		// The OpenTelemetry SDK and its exporters are set up in one place;
		// the packages that make spans use the API only.
		"go.opentelemetry.io/otel/sdk": func(dir, _ string) bool { return dir == "observability" || dir == "observability/spantest" },
		"go.opentelemetry.io/contrib":  func(dir, _ string) bool { return dir == "observability" },
		"github.com/exaring/otelpgx":   func(dir, _ string) bool { return dir == "plants/postgres" },
		"github.com/redis/go-redis/v9": func(dir, _ string) bool { return dir == "auth/redisstate" },
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
// "import" need) link neither gin nor the JWT libraries nor auth.
func TestDomainLinksNoEdge(t *testing.T) {
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
