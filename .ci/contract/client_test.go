package contract_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// clientDir is .ci/client: the pinned npm tools and the TypeScript client.
func clientDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "client"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// npmTool returns .ci/client/node_modules/.bin/<name>; when it is missing
// the test is skipped, or fails under TEST_REQUIRE_TOOLS.
func npmTool(t testing.TB, name string) string {
	t.Helper()
	tool(t, "node")
	p := filepath.Join(clientDir(t), "node_modules", ".bin", name)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	msg := p + " is missing (run: npm ci --prefix .ci/client)"
	if os.Getenv("TEST_REQUIRE_TOOLS") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// runIn runs a command in dir with extra environment and returns its
// combined output and error.
func runIn(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var noTelemetry = []string{"REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1"}

// writeDocument writes the served document to a temporary file.
func writeDocument(t testing.TB, served []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(path, served, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRedoclyLintsServedDocument(t *testing.T) {
	redocly := npmTool(t, "redocly")
	s := startService(t, "-dev")
	served := servedDocument(t, s)

	// A broken copy must fail, so that a pass means something.
	var broken map[string]any
	if err := json.Unmarshal(served, &broken); err != nil {
		t.Fatal(err)
	}
	d := jsonDoc{root: broken}
	d.at(d.root, "paths", "/plants", "get", "responses", "200", "content", "application/json", "schema")["items"] =
		map[string]any{"$ref": "#/components/schemas/Missing"}
	brokenJSON, err := json.Marshal(broken)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		doc    []byte
		wantOK bool
	}{
		{name: "served /openapi.json", doc: served, wantOK: true},
		{name: "unresolved $ref", doc: brokenJSON},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// recommended-strict: every finding of the recommended
			// ruleset, warnings included, is an error.
			out, err := runIn(clientDir(t), noTelemetry, redocly, "lint", "--extends=recommended-strict", "--format=stylish", writeDocument(t, tc.doc))
			if ok := err == nil; ok != tc.wantOK {
				t.Errorf("redocly lint %s: %v, want success %v\n%s", tc.name, err, tc.wantOK, out)
			}
		})
	}
}

func TestGeneratedClientCallsService(t *testing.T) {
	gen := npmTool(t, "openapi-typescript")
	tsc := npmTool(t, "tsc")
	node := tool(t, "node")
	dir := clientDir(t)

	s := startService(t, "-dev")
	docPath := writeDocument(t, servedDocument(t, s))
	if out, err := runIn(dir, nil, gen, docPath, "-o", filepath.Join("src", "plantstore.d.ts")); err != nil {
		t.Fatalf("openapi-typescript %s: %v\n%s", docPath, err, out)
	}
	// tsc also checks, at compile time, that the generated types keep the
	// seed's Plant, Error and limit (src/main.ts).
	if out, err := runIn(dir, nil, tsc, "-p", "tsconfig.json"); err != nil {
		t.Fatalf("tsc on the client generated from /openapi.json: %v\n%s", err, out)
	}
	program := filepath.Join(dir, "build", "main.js")

	type run struct {
		name, user, expected string
		wantOK               bool
	}
	var runs []run
	for _, u := range s.Users {
		// What a plain HTTP client receives is what the typed client must
		// return.
		body := strings.TrimSpace(string(get(t, s.API+"/plants", bearer(s.Tokens[u]))))
		runs = append(runs, run{name: u, user: u, expected: body, wantOK: true})
	}
	first := runs[0]
	runs = append(runs, run{
		name:     "wrong expectation",
		user:     first.user,
		expected: strings.TrimSuffix(first.expected, "]") + addComma(first.expected) + `{"name":"not in the catalog"}]`,
	})
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			out, err := runIn(dir, []string{
				"PLANTSTORE_API=" + s.API,
				"PLANTSTORE_TOKEN=" + s.Tokens[r.user],
				"PLANTSTORE_EXPECTED=" + r.expected,
			}, node, program)
			var ee *exec.ExitError
			switch {
			case r.wantOK && err != nil:
				t.Errorf("generated client as %s: %v\n%s", r.user, err, out)
			case !r.wantOK && !(errors.As(err, &ee) && ee.ExitCode() == 1):
				t.Errorf("generated client as %s with a wrong expectation: %v, want exit status 1\n%s", r.user, err, out)
			default:
				t.Logf("%s: %s", r.user, strings.TrimSpace(out))
			}
		})
	}
}

// addComma is "," when the JSON array text list is not empty.
func addComma(list string) string {
	if strings.TrimSpace(list) == "[]" {
		return ""
	}
	return ","
}
