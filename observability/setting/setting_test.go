package setting_test

import (
	"errors"
	"testing"

	"github.com/plantstore/plantstore/observability/setting"
)

func TestError(t *testing.T) {
	cause := errors.New("negative duration -1s")
	tests := []struct {
		name string
		err  *setting.Error
		want string
	}{
		{"key", &setting.Error{Key: "leeway", Err: cause}, "leeway: negative duration -1s"},
		{"issuer", &setting.Error{Key: "max_stale", Issuer: "staff", Err: cause}, "issuer staff: max_stale: negative duration -1s"},
		{"file line", &setting.Error{Key: "max_stale", Issuer: "staff", File: "issuers.yaml", Line: 7, Err: cause}, "issuers.yaml:7: issuer staff: max_stale: negative duration -1s"},
		{"whole file", &setting.Error{Key: "issuers", File: "issuers.yaml", Err: errors.New("no issuer")}, "issuers.yaml: issuers: no issuer"},
		{"no key", &setting.Error{File: "issuers.yaml", Line: 3, Err: errors.New(`unknown key "bogus"`)}, `issuers.yaml:3: unknown key "bogus"`},
		{"Errorf", setting.Errorf("rate", "want %s", "a positive number"), "rate: want a positive number"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%s: Error() = %q, want %q", tt.name, got, tt.want)
		}
	}
	if err := (&setting.Error{Key: "leeway", Err: cause}); !errors.Is(err, cause) {
		t.Errorf("errors.Is(%v, its cause) = false, want true", err)
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://idp.example.com/jwks", "https://idp.example.com/jwks"},
		{"https://u:p@idp.example.com/jwks", "https://u:xxxxx@idp.example.com/jwks"},
		{"https://u@idp.example.com/jwks", "https://u@idp.example.com/jwks"},
		{"https://u:@idp.example.com/jwks", "https://u:xxxxx@idp.example.com/jwks"},
		{"https://idp.example.com/jwks?api_key=s", "https://idp.example.com/jwks?xxxxx"},
		{"https://idp.example.com/jwks?", "https://idp.example.com/jwks?xxxxx"},
		{"https://u:p@idp.example.com:8443/a/b?k=v&x=y#frag", "https://u:xxxxx@idp.example.com:8443/a/b?xxxxx"},
		{"postgres://plantstore:s3cret@db:5432/plants?sslmode=verify-full&password=x", "postgres://plantstore:xxxxx@db:5432/plants?xxxxx"},
		{"http://[::1]:%zz/", "xxxxx"},
	}
	for _, tt := range tests {
		if got := setting.RedactURL(tt.in); got != tt.want {
			t.Errorf("setting.RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
