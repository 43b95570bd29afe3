package main

import (
	"bytes"
	"errors"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/observability/setting"
	"github.com/plantstore/plantstore/plants/postgres"
)

// sampleOf returns a value a flag of the given type accepts and that is
// not def.
func sampleOf(t *testing.T, typ, def string) string {
	t.Helper()
	samples := map[string][]string{
		"string": {"x", "y"}, "host:port": {"127.0.0.1:1", "127.0.0.1:2"}, "duration": {"7s", "8s"},
		"int": {"7", "8"}, "size": {"7KiB", "8KiB"}, "list": {"a,b", "c"}, "number": {"1.5", "2"},
		"mode": {"required", "off"}, "tokens": {"opaque", "always"}, "origins": {"https://a.example,http://127.0.0.1:8081", "*"}, "prefixes": {"10.0.0.0/8", "192.0.2.0/24"}, "json": {`[{"path":"tid","equals":"t-1"}]`, `[{"path":"act","exists":false}]`}, "": {"true", "false"},
	}
	s, ok := samples[typ]
	if !ok {
		t.Fatalf("no sample value for flags of type %q: add one", typ)
	}
	if s[0] == def {
		return s[1]
	}
	return s[0]
}

// TestSettingsReachable takes every row of the table through its flag,
// its variable and -h: a row is all a setting needs to be given both ways
// and listed.
func TestSettingsReachable(t *testing.T) {
	rows := serveSettings()
	var help bytes.Buffer
	if err := run(t.Context(), []string{"serve", "-h"}, nil, nil, io.Discard, &help); err != nil {
		t.Fatalf("serve -h: %v", err)
	}
	flags, keys := map[string]bool{}, map[string]bool{}
	for _, s := range rows {
		t.Run(s.flag, func(t *testing.T) {
			if flags[s.flag] || keys[s.key] {
				t.Fatalf("-%s or its key %q is in the table twice", s.flag, s.key)
			}
			flags[s.flag], keys[s.key] = true, true
			if s.key == "" || s.help == "" || strings.ToLower(s.key) != s.key {
				t.Errorf("-%s: key %q and help %q; want a snake_case key and a help", s.flag, s.key, s.help)
			}
			var c serveConfig
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			rows.define(fs, &c)
			typ := ""
			if v, ok := fs.Lookup(s.flag).Value.(typed); ok {
				typ = v.Type()
			}
			sample := sampleOf(t, typ, fs.Lookup(s.flag).DefValue)
			want := valueOf(t, s, sample)

			got, how := parseOne(t, rows, []string{"-" + s.flag + "=" + sample}, nil, s.flag)
			if got != want || !how.fromArgs[s.flag] {
				t.Errorf("-%s=%s: value %q (from args %v), want %q", s.flag, sample, got, how.fromArgs[s.flag], want)
			}
			got, how = parseOne(t, rows, nil, []string{envName(s.flag) + "=" + sample}, s.flag)
			switch {
			case s.noEnv && how.fromEnv[s.flag]:
				t.Errorf("%s set -%s, which reads no variable", envName(s.flag), s.flag)
			case !s.noEnv && (got != want || !how.fromEnv[s.flag]):
				t.Errorf("%s=%s: value %q (from env %v), want %q", envName(s.flag), sample, got, how.fromEnv[s.flag], want)
			}

			line := "\n  -" + strings.TrimSpace(s.flag+" "+typ) + "\n"
			if !strings.Contains(help.String(), line) {
				t.Errorf("serve -h has no line %q", line)
			}
			if env := "env " + envName(s.flag); !s.noEnv && !strings.Contains(help.String(), env) {
				t.Errorf("serve -h does not name %s", env)
			}
			if !strings.Contains(unspaced(serveHelp(t)[s.flag].help), unspaced(s.help)) {
				t.Errorf("serve -h does not show the help of -%s", s.flag)
			}
		})
	}
}

// valueOf returns what the value of s reads as once sample is set.
func valueOf(t *testing.T, s settingRow, sample string) string {
	t.Helper()
	var c serveConfig
	v := s.value(&c)
	if err := v.Set(sample); err != nil {
		t.Fatalf("-%s refuses the sample %q: %v", s.flag, sample, err)
	}
	return v.String()
}

// parseOne parses args and environ with the flags of rows and returns the
// value of the flag name and how the flags were set.
func parseOne(t *testing.T, rows settingRows, args, environ []string, name string) (string, parsedFlags) {
	t.Helper()
	var c serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	rows.define(fs, &c)
	how, _, err := parseFlags(fs, args, newEnv(environ), rows, io.Discard)
	if err != nil {
		t.Fatalf("parse %q %q: %v", args, environ, err)
	}
	return fs.Lookup(name).Value.String(), how
}

// TestSettingKeys checks that every key a refusal or the issuers file
// uses for a setting is the key of a row, so that no usage error falls
// back to general words: the keys of every *setting.Error the module's
// packages make (each written where the setting is refused, as a string
// literal), the fields of an issuer of the issuers file, the durations of
// postgres.Options that Open refuses, and the log level and format.
func TestSettingKeys(t *testing.T) {
	rows := serveSettings()
	byKey := map[string]settingRow{}
	for _, s := range rows {
		byKey[s.key] = s
	}
	// An issuer's name is the issuers file's own: the one issuer of the
	// flags has none, so no flag can be at fault.
	const fileOnly = "name"
	for _, k := range refusedKeys(t) {
		if _, ok := byKey[k.key]; !ok && k.key != fileOnly {
			t.Errorf("%s: a *setting.Error cites %q, which is the key of no row", k.at, k.key)
		}
	}
	// The keys of an issuer of the issuers file: its name, its Config's
	// and its KeySource's.
	fields := append([]string{fileOnly}, append(yamlKeys(t, reflect.TypeFor[auth.Config]()), yamlKeys(t, reflect.TypeFor[keys.KeySource]())...)...)
	// The settings of the introspection block, each cited as
	// introspection_<key>; its tokens is the block's own row.
	for _, k := range yamlKeys(t, reflect.TypeFor[auth.Introspection]()) {
		if k != "tokens" {
			fields = append(fields, "introspection_"+k)
		}
	}
	for _, f := range fields {
		if s, ok := byKey[f]; f != fileOnly && (!ok || s.issuer == everyIssuer) {
			t.Errorf("the issuers file's field %q is the key of no per-issuer row", f)
		}
	}
	for _, s := range rows {
		if s.issuer != everyIssuer && !slices.Contains(fields, s.key) {
			t.Errorf("-%s is per issuer, but the issuers file has no field %q", s.flag, s.key)
		}
	}
	// Every duration of postgres.Options, made negative, is refused
	// citing the key of a row.
	typ := reflect.TypeFor[postgres.Options]()
	for f := range typ.Fields() {
		if f.Type != reflect.TypeFor[time.Duration]() {
			continue
		}
		var o postgres.Options
		reflect.ValueOf(&o).Elem().FieldByName(f.Name).SetInt(-1)
		_, err := postgres.Open(t.Context(), "postgres://127.0.0.1:1/x", o, nil)
		var se *setting.Error
		if !errors.As(err, &se) {
			t.Errorf("postgres.Open with %s -1ns = %v; want a *setting.Error", f.Name, err)
			continue
		}
		if _, ok := byKey[se.Key]; !ok {
			t.Errorf("postgres.Open with %s -1ns cites %q, which is the key of no row", f.Name, se.Key)
		}
	}
	cfg, err := parseServeFlags([]string{"-dev"}, newEnv(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ level, format, flag string }{{"loud", "json", "-log-level"}, {"info", "xml", "-log-format"}} {
		_, _, err := observability.NewLogger(io.Discard, tt.level, tt.format)
		if err := cfg.refused(err); !isUsage(err) || !strings.Contains(err.Error(), "for flag "+tt.flag+":") {
			t.Errorf("NewLogger(%q, %q) refused as %v; want the usage error of %s", tt.level, tt.format, err, tt.flag)
		}
	}
}

// yamlKeys returns the yaml keys of the fields of typ, a struct whose
// every field has one.
func yamlKeys(t *testing.T, typ reflect.Type) []string {
	t.Helper()
	var out []string
	for f := range typ.Fields() {
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "" || key == "-" {
			t.Errorf("%s.%s has no yaml key: the issuers file cannot set it", typ, f.Name)
			continue
		}
		out = append(out, key)
	}
	return out
}

// TestIssuerRulesDeclaredOnce holds each setting of an issuer, a field of
// auth.Config, to the places that must know it, none of which has a list
// of its own to keep: its yaml key is a key of the issuers file (which
// decodes each issuer's Config inline) and the key of a row of the table
// of settings that sets it for the -jwt-* issuer, the default of the
// file's issuers, and deploy/check's copy of the flags names that row's
// flag. Reload sameness compares whole Configs (auth's own test).
func TestIssuerRulesDeclaredOnce(t *testing.T) {
	byKey := map[string]settingRow{}
	for _, s := range serveSettings() {
		byKey[s.key] = s
	}
	deployed, err := os.ReadFile("deploy/check/settings.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range yamlKeys(t, reflect.TypeFor[auth.Config]()) {
		s, ok := byKey[key]
		switch {
		case !ok:
			t.Errorf("auth.Config's %q is the key of no row of the table of settings", key)
			continue
		case s.issuer == everyIssuer:
			t.Errorf("auth.Config's %q is the key of -%s, a row of every issuer; want one issuer's", key, s.flag)
		}
		if !strings.Contains(string(deployed), `"`+s.flag+`"`) {
			t.Errorf("deploy/check/settings.go does not list -%s, auth.Config's %q", s.flag, key)
		}
		// The row sets the flags' Config, which the file's issuers
		// inherit: a value given to it lands in the field of that key.
		var c serveConfig
		v := s.value(&c)
		sample := sampleOf(t, typeOf(v), "")
		if err := v.Set(sample); err != nil {
			t.Fatalf("-%s refuses %q: %v", s.flag, sample, err)
		}
		if reflect.ValueOf(c.JWT).FieldByIndex(fieldOf(t, key).Index).IsZero() {
			t.Errorf("-%s=%s leaves auth.Config's %q unset; want the row to set it", s.flag, sample, key)
		}
	}
}

// typeOf is the type a flag value names in -h.
func typeOf(v flag.Value) string {
	if t, ok := v.(typed); ok {
		return t.Type()
	}
	return ""
}

// fieldOf returns the field of auth.Config whose yaml key is key.
func fieldOf(t *testing.T, key string) reflect.StructField {
	t.Helper()
	for f := range reflect.TypeFor[auth.Config]().Fields() {
		if k, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); k == key {
			return f
		}
	}
	t.Fatalf("auth.Config has no field of key %q", key)
	return reflect.StructField{}
}

// refusedKey is the key a *setting.Error cites, and where.
type refusedKey struct{ key, at string }

// refusedKeys returns the key of every *setting.Error the module's
// packages make: the first argument of setting.Errorf and the Key of a
// setting.Error literal, each a string literal or a parameter of a
// function that passes it on (issuerError), whose callers then give the
// literal, or the key of a Config field as the issuers file writes it. A
// key that is none of these fails t: the test could not check it.
func refusedKeys(t *testing.T) []refusedKey {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "deploy" || d.Name() == "testdata"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		files = append(files, f)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []refusedKey
	forwarders := map[string]int{} // function name -> index of the key parameter
	// Functions that cite a key as the issuers file writes it, which is
	// the yaml key of a field of auth.Config, each held to a row by
	// TestIssuerRulesDeclaredOnce.
	fromFile := map[string]bool{"checkText": true}
	// key records the key expression e of a refusal made in fn.
	key := func(fn *ast.FuncDecl, e ast.Expr) {
		at := fset.Position(e.Pos()).String()
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			k, _ := strconv.Unquote(lit.Value)
			out = append(out, refusedKey{k, at})
			return
		}
		if id, ok := e.(*ast.Ident); ok && fn != nil {
			i := 0
			for _, field := range fn.Type.Params.List {
				for _, name := range field.Names {
					if name.Name == id.Name {
						forwarders[fn.Name.Name] = i
						return
					}
					i++
				}
			}
		}
		if fn != nil && fromFile[fn.Name.Name] {
			return
		}
		t.Errorf("%s: a *setting.Error whose key is neither a string literal nor a parameter passed on", at)
	}
	// inspect calls visit(fn, n) for each node n of the files, in the
	// function declaration fn (nil outside one).
	inspect := func(visit func(fn *ast.FuncDecl, n ast.Node)) {
		for _, f := range files {
			for _, d := range f.Decls {
				fn, _ := d.(*ast.FuncDecl)
				ast.Inspect(d, func(n ast.Node) bool { visit(fn, n); return true })
			}
		}
	}
	inspect(func(fn *ast.FuncDecl, n ast.Node) {
		switch n := n.(type) {
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Errorf" && isIdent(sel.X, "setting") && len(n.Args) > 0 {
				key(fn, n.Args[0])
			}
		case *ast.CompositeLit:
			if sel, ok := n.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Error" && isIdent(sel.X, "setting") {
				for _, e := range n.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok && isIdent(kv.Key, "Key") {
						key(fn, kv.Value)
					}
				}
			}
		}
	})
	inspect(func(fn *ast.FuncDecl, n ast.Node) {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return
		}
		name := ""
		switch f := call.Fun.(type) {
		case *ast.Ident:
			name = f.Name
		case *ast.SelectorExpr:
			name = f.Sel.Name
		}
		if i, ok := forwarders[name]; ok && i < len(call.Args) {
			key(fn, call.Args[i])
		}
	})
	if len(out) < 20 {
		t.Fatalf("found %d keys of *setting.Error; the walk missed the packages that make them", len(out))
	}
	return out
}

// isIdent reports whether e is the identifier name.
func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// TestNewSettingIsOneRow adds one row, a per-issuer setting, to the table
// and finds all the rest done: the flag and its variable set it, -h lists
// it, its variable is not reported as unknown, a constructor's refusal
// citing its key is the usage error of the flag (or of the variable), and
// an issuers file excludes it.
func TestNewSettingIsOneRow(t *testing.T) {
	var lifetime time.Duration
	rows := append(serveSettings(), settingRow{
		group: groupRules, flag: "jwt-test-lifetime", key: "test_lifetime", issuer: flagIssuer, def: "1m",
		help:  "longest lifetime of a token (a row added by a test)",
		value: func(*serveConfig) flag.Value { return durationFlag{d: &lifetime} },
	})
	refusal := &setting.Error{Key: "test_lifetime", Err: errors.New("too long")}
	for _, tt := range []struct {
		name    string
		args    []string
		environ []string
		want    time.Duration
		usage   string
	}{
		{"default", []string{"-dev"}, nil, time.Minute, `invalid value "1m0s" for flag -jwt-test-lifetime: too long`},
		{"flag", []string{"-dev", "-jwt-test-lifetime", "5m"}, nil, 5 * time.Minute, `invalid value "5m0s" for flag -jwt-test-lifetime: too long`},
		{"variable", []string{"-dev"}, []string{"PLANTSTORE_JWT_TEST_LIFETIME=2m"}, 2 * time.Minute, `invalid value "2m0s" for PLANTSTORE_JWT_TEST_LIFETIME: too long`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := rows.parse(tt.args, newEnv(tt.environ), io.Discard)
			if err != nil || lifetime != tt.want {
				t.Fatalf("parse(%q, %q) = %v, lifetime %v; want %v", tt.args, tt.environ, err, lifetime, tt.want)
			}
			if err := cfg.refused(refusal); !isUsage(err) || !strings.Contains(err.Error(), tt.usage) {
				t.Errorf("refused(%v) = %v; want a usage error containing %q", refusal, err, tt.usage)
			}
			if names := rows.unknownVars(newEnv(tt.environ)); len(names) > 0 {
				t.Errorf("unknown variables %q; want none", names)
			}
		})
	}
	var help bytes.Buffer
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	rows.define(fs, &serveConfig{})
	printFlags(&help, fs, rows)
	if want := "  -jwt-test-lifetime duration\n        longest lifetime of a token (a row added by a test) (default \"1m0s\";\n        env PLANTSTORE_JWT_TEST_LIFETIME)\n"; !strings.Contains(help.String(), want) {
		t.Errorf("-h lacks %q:\n%s", want, help.String())
	}
	_, err := rows.parse([]string{"-jwt-issuers-file", "issuers.yaml", "-jwt-test-lifetime", "1h"}, newEnv(nil), io.Discard)
	if !isUsage(err) || !strings.Contains(err.Error(), "-jwt-test-lifetime (PLANTSTORE_JWT_TEST_LIFETIME) belongs to one issuer") {
		t.Errorf("-jwt-issuers-file with the new per-issuer flag = %v; want its usage error", err)
	}
	if _, err := serveSettings().parse([]string{"-dev", "-jwt-test-lifetime", "1h"}, newEnv(nil), io.Discard); !isUsage(err) {
		t.Errorf("the table without the row took -jwt-test-lifetime: %v", err)
	}
}

// TestNearVars: an unknown variable close to a setting's is named with
// it, one far from all is not, and -dev, which reads none, is never
// offered.
func TestNearVars(t *testing.T) {
	got := serveSettings().nearVars([]string{"PLANTSTORE_JWT_ISUER", "PLANTSTORE_RATELIMIT", "PLANTSTORE_COLOUR", "PLANTSTORE_DEVV"})
	want := []string{"PLANTSTORE_JWT_ISUER: PLANTSTORE_JWT_ISSUER", "PLANTSTORE_RATELIMIT: PLANTSTORE_RATE_LIMIT"}
	if !slices.Equal(got, want) {
		t.Errorf("nearVars = %q; want %q", got, want)
	}
}

// TestServeHelpGroups checks serve -h: every row names a group, the
// groups come in their order with the one a first run needs first, each
// flag is listed once under its row's group, and no line is wider than a
// terminal's 80 columns.
func TestServeHelpGroups(t *testing.T) {
	rows := serveSettings()
	for _, r := range rows {
		if !slices.Contains(settingGroups, r.group) {
			t.Errorf("-%s names no group of settingGroups", r.flag)
		}
	}
	var help bytes.Buffer
	if err := run(t.Context(), []string{"serve", "-h"}, nil, nil, io.Discard, &help); err != nil {
		t.Fatalf("serve -h: %v", err)
	}
	var titles []string
	seen := map[string]int{}
	for i, line := range strings.Split(help.String(), "\n") {
		if len(line) > helpWidth {
			t.Errorf("serve -h line %d is %d columns wide (at most %d): %q", i+1, len(line), helpWidth, line)
		}
		if title, ok := strings.CutSuffix(line, ":"); ok && line != "" && !strings.HasPrefix(line, " ") {
			titles = append(titles, title)
		}
		if f, ok := strings.CutPrefix(line, "  -"); ok {
			name, _, _ := strings.Cut(f, " ")
			seen[name]++
			r := rows.row(name)
			if r == nil {
				t.Errorf("serve -h lists -%s, which no row defines", name)
				continue
			}
			if len(titles) == 0 || titles[len(titles)-1] != r.group.String() {
				t.Errorf("serve -h lists -%s under %q; its row says %q", name, titles, r.group)
			}
		}
	}
	var want []string
	for _, g := range settingGroups {
		want = append(want, g.String())
	}
	if !slices.Equal(titles, want) {
		t.Errorf("serve -h groups = %q; want %q", titles, want)
	}
	if r := rows.row("dev"); r.group != settingGroups[0] {
		t.Errorf("-dev is in %q; want the first group, %q", r.group, settingGroups[0])
	}
	for _, r := range rows {
		if seen[r.flag] != 1 {
			t.Errorf("serve -h lists -%s %d times; want once", r.flag, seen[r.flag])
		}
	}
}

// TestWrap: words fill lines up to the width; a word wider than it
// stands alone.
func TestWrap(t *testing.T) {
	tests := []struct {
		words []string
		width int
		want  []string
	}{
		{[]string{"a", "bb", "ccc"}, 4, []string{"a bb", "ccc"}},
		{[]string{"a", "bb", "ccc"}, 8, []string{"a bb ccc"}},
		{[]string{"abcdefgh", "x"}, 4, []string{"abcdefgh", "x"}},
		{[]string{"(a,bb,cc)"}, 6, []string{"(a,bb,", "cc)"}},
		{[]string{"x", "a,b"}, 5, []string{"x a,b"}},
		{[]string{"x", "a,b"}, 4, []string{"x", "a,b"}},
		{nil, 4, nil},
	}
	for _, tt := range tests {
		if got := wrap(tt.words, tt.width); !slices.Equal(got, tt.want) {
			t.Errorf("wrap(%q, %d) = %q; want %q", tt.words, tt.width, got, tt.want)
		}
	}
}
