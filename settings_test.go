package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/plants/postgres"
)

// sampleOf returns a value a flag of the given type accepts and that is
// not def.
func sampleOf(t *testing.T, typ, def string) string {
	t.Helper()
	samples := map[string][]string{
		"string": {"x", "y"}, "host:port": {"127.0.0.1:1", "127.0.0.1:2"}, "duration": {"7s", "8s"},
		"int": {"7", "8"}, "size": {"7KiB", "8KiB"}, "list": {"a,b", "c"}, "number": {"1.5", "2"},
		"mode": {"required", "off"}, "origins": {"https://a.example,http://127.0.0.1:8081", "*"}, "prefixes": {"10.0.0.0/8", "192.0.2.0/24"}, "": {"true", "false"},
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
			if !strings.Contains(help.String(), s.help) {
				t.Errorf("serve -h does not show the help of -%s", s.flag)
			}
		})
	}
}

// valueOf returns what the value of s reads as once sample is set.
func valueOf(t *testing.T, s setting, sample string) string {
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
func parseOne(t *testing.T, rows settings, args, environ []string, name string) (string, parsedFlags) {
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

// TestSettingKeys checks that every name a refusal or the issuers file
// uses for a setting is the key of a row, so that no usage error falls
// back to general words: the settings auth's ConfigError cites, the
// fields of an issuer of the issuers file, the fields of postgres.Options
// that Open refuses, and observability's sentinels.
func TestSettingKeys(t *testing.T) {
	rows := serveSettings()
	byKey := map[string]setting{}
	for _, s := range rows {
		byKey[s.key] = s
	}
	// An issuer's name is the issuers file's own: the one issuer of the
	// flags has none, so no flag can be at fault.
	const fileOnly = "name"
	for _, k := range auth.Settings() {
		if _, ok := byKey[k]; !ok && k != fileOnly {
			t.Errorf("auth.ConfigError may cite %q, which is the key of no row", k)
		}
	}
	var fields []string
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for f := range typ.Fields() {
			tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if opts == "inline" {
				walk(f.Type)
				continue
			}
			fields = append(fields, tag)
		}
	}
	walk(reflect.TypeFor[auth.IssuerConfig]())
	for _, f := range fields {
		if s, ok := byKey[f]; f != fileOnly && (!ok || s.issuer == global) {
			t.Errorf("the issuers file's field %q is the key of no per-issuer row", f)
		}
	}
	for _, s := range rows {
		if s.issuer != global && !slices.Contains(fields, s.key) {
			t.Errorf("-%s is per issuer, but the issuers file has no field %q", s.flag, s.key)
		}
	}
	// Every number of postgres.Options, made negative, is refused citing
	// the field of a row.
	typ := reflect.TypeFor[postgres.Options]()
	for f := range typ.Fields() {
		if k := f.Type.Kind(); k != reflect.Int32 && k != reflect.Int64 {
			continue
		}
		var o postgres.Options
		reflect.ValueOf(&o).Elem().FieldByName(f.Name).SetInt(-1)
		_, err := postgres.Open(t.Context(), "postgres://127.0.0.1:1/x", o, nil)
		var oe *postgres.OptionError
		if !errors.As(err, &oe) {
			t.Errorf("postgres.Open with %s -1 = %v; want an *OptionError", f.Name, err)
			continue
		}
		if _, ok := byKey[snakeCase(oe.Field)]; !ok {
			t.Errorf("postgres.OptionError cites %q (%q), which is the key of no row", oe.Field, snakeCase(oe.Field))
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

// TestNewSettingIsOneRow adds one row, a per-issuer setting, to the table
// and finds all the rest done: the flag and its variable set it, -h lists
// it, its variable is not reported as unknown, a constructor's refusal
// citing its key is the usage error of the flag (or of the variable), and
// an issuers file excludes it.
func TestNewSettingIsOneRow(t *testing.T) {
	var lifetime time.Duration
	rows := append(serveSettings(), setting{
		flag: "jwt-test-lifetime", key: "test_lifetime", issuer: perIssuer, def: "1m",
		help:  "longest lifetime of a token (a row added by a test)",
		value: func(*serveConfig) flag.Value { return durationFlag{d: &lifetime} },
	})
	refusal := &auth.ConfigError{Field: "test_lifetime", Err: errors.New("too long")}
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
	if want := "  -jwt-test-lifetime duration\n    \tlongest lifetime of a token (a row added by a test) (default \"1m0s\"; env PLANTSTORE_JWT_TEST_LIFETIME)\n"; !strings.Contains(help.String(), want) {
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
