package auth

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestSettingsComplete holds Settings to the code: every setting constant
// is listed once, and every *ConfigError the package makes cites a setting
// constant, never a string of its own, so that Settings is every Field a
// caller can meet (and the caller's table of flags can be checked
// against it).
func TestSettingsComplete(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	declared := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				return n.Name.Name != "configErr" // its body passes its field on
			case *ast.ValueSpec:
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "setting" {
					for _, v := range n.Values {
						lit, ok := v.(*ast.BasicLit)
						if !ok {
							t.Errorf("%s: a setting constant that is not a string literal", fset.Position(v.Pos()))
							continue
						}
						s, _ := strconv.Unquote(lit.Value)
						declared[s] = true
					}
				}
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "configErr" && len(n.Args) > 1 {
					if _, lit := n.Args[1].(*ast.BasicLit); lit {
						t.Errorf("%s: configErr cites a string literal, not a setting constant", fset.Position(n.Pos()))
					}
				}
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Field" {
					conv, ok := n.Value.(*ast.CallExpr)
					if ok && len(conv.Args) == 1 {
						if id, isIdent := conv.Args[0].(*ast.Ident); isIdent && strings.HasPrefix(id.Name, "setting") {
							return true
						}
					}
					t.Errorf("%s: a ConfigError whose Field is not string(settingX)", fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	listed := Settings()
	seen := map[string]bool{}
	for _, s := range listed {
		if !declared[s] {
			t.Errorf("Settings() lists %q, which no setting constant is", s)
		}
		if seen[s] {
			t.Errorf("Settings() lists %q twice", s)
		}
		seen[s] = true
	}
	for s := range declared {
		if !slices.Contains(listed, s) {
			t.Errorf("setting %q is not in Settings()", s)
		}
	}
	for _, k := range KeySources() {
		if !slices.Contains(listed, k) {
			t.Errorf("KeySources() has %q, which is not in Settings()", k)
		}
	}
}
