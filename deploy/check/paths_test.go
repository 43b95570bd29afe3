package check_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoPath matches a path into the repository named in prose or comments.
var repoPath = regexp.MustCompile(`(?:^|[\s("'\x60]|\./)((?:deploy|docs|\.ci)/[A-Za-z0-9_.*/-]*[A-Za-z0-9_*/])`)

// mdLink matches a relative Markdown link's target, without its anchor.
var mdLink = regexp.MustCompile(`\]\(([^)#:\s]+)(?:#[^)]*)?\)`)

// missingPaths returns the repository paths text names that do not exist
// (globs must match something), relative to the repository root.
func missingPaths(t testing.TB, text string) []string {
	t.Helper()
	var missing []string
	for _, m := range repoPath.FindAllStringSubmatch(text, -1) {
		p := strings.TrimSuffix(m[1], ".")
		matches, err := filepath.Glob(filepath.Join("..", "..", p))
		if err != nil || len(matches) == 0 {
			if !slices.Contains(missing, p) {
				missing = append(missing, p)
			}
		}
	}
	return missing
}

// TestReferencedPathsExist reads the deploy files, the docs and the CI
// script, and requires every repository path they name, and every relative
// Markdown link, to exist: a comment pointing to a script that is not there
// sends an operator nowhere.
func TestReferencedPathsExist(t *testing.T) {
	var files []string
	for _, root := range []string{"..", filepath.Join("..", "..", "docs")} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if strings.HasSuffix(path, "_test.go") {
				return nil
			}
			switch filepath.Ext(path) {
			case ".md", ".yaml", ".yml", ".in", ".sh", ".go", ".mjs", ".json":
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	files = append(files, filepath.Join("..", "..", "Dockerfile"), filepath.Join("..", "..", ".ci", "deploy.sh"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := missingPaths(t, string(b)); len(got) > 0 {
			t.Errorf("%s names paths that do not exist: %v", f, got)
		}
		if filepath.Ext(f) == ".md" {
			for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
				if _, err := os.Stat(filepath.Join(filepath.Dir(f), m[1])); err != nil {
					t.Errorf("%s links to %s, which does not exist", f, m[1])
				}
			}
		}
	}

	// The gateway example before issue 17 named a script that never existed.
	b, err := os.ReadFile(filepath.Join("testdata", "before", "nginx.conf.in"))
	if err != nil {
		t.Fatal(err)
	}
	if got := missingPaths(t, string(b)); !slices.Equal(got, []string{"deploy/gateway/e2e.sh"}) {
		t.Errorf("testdata/before/nginx.conf.in: missing paths %v, want [deploy/gateway/e2e.sh]", got)
	}
}
