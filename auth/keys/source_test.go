package keys_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/observability/metricstest"
	"github.com/plantstore/plantstore/observability/setting"
)

// TestOpenSource opens the flags' combination of a key file and a JWKS:
// a kid of the file verifies without a fetch (files come first), a kid of
// the JWKS from the JWKS, and Close ends the loops and takes the source's
// keys out of the gauge.
func TestOpenSource(t *testing.T) {
	fileKey, remoteKey := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "EdDSA")
	idp := authtest.NewServer(t, authtest.JWKS(t, remoteKey))
	reg := prometheus.NewRegistry()
	m := auth.NewMetrics(reg)
	src, err := keys.OpenSource(t.Context(), keys.KeySource{
		JWKSURL: idp.URL, KeyFile: authtest.WriteJWKS(t, fileKey),
	}, keys.SourceOptions{Metrics: m.ForIssuer("")})
	if err != nil {
		t.Fatal(err)
	}
	authtest.WaitFor(t, "the JWKS keys", func() bool { return keys.Ready(src.Keys()) == nil })
	hits := idp.Hits.Load()
	if err := srcVerify(t, src.Keys(), authtest.Token(t, fileKey, nil, authtest.Claims(nil))); err != nil {
		t.Errorf("token of the key file: %v", err)
	}
	if n := idp.Hits.Load(); n != hits {
		t.Errorf("a kid of the key file cost %d JWKS fetches; want none", n-hits)
	}
	if err := srcVerify(t, src.Keys(), authtest.Token(t, remoteKey, nil, authtest.Claims(nil))); err != nil {
		t.Errorf("token of the JWKS: %v", err)
	}
	count := func() float64 {
		return metricstest.Sum(t, reg, "plantstore_jwks_keys", map[string]string{"issuer": "default"})
	}
	if got := count(); got != 2 {
		t.Errorf("plantstore_jwks_keys{issuer=default} = %v with both sources; want 2", got)
	}
	src.Close()
	select {
	case <-src.Done():
	default:
		t.Error("Done is open after Close")
	}
	if got := count(); got != 0 {
		t.Errorf("plantstore_jwks_keys{issuer=default} = %v after Close; want 0", got)
	}
}

// TestOpenSourceErrors: a setting the JWKS refuses is the *setting.Error
// of that setting (the discovery issuer, when no key source is set); a
// key file that cannot be read is not a setting's refusal; no source at
// all is an error.
func TestOpenSourceErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.json")
	tests := []struct {
		name      string
		iss       string
		ks        keys.KeySource
		wantField string // "" for an error that is no *setting.Error
	}{
		{"JWKS URL not http", "", keys.KeySource{JWKSURL: "ftp://idp.example/jwks"}, "jwks_url"},
		{"issuer to discover not a URL", "plantstore", keys.KeySource{}, "issuer"},
		{"missing key file", "", keys.KeySource{KeyFile: missing}, ""},
		{"nothing", "", keys.KeySource{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			src, err := keys.OpenSource(ctx, tt.ks, keys.SourceOptions{Issuer: tt.iss})
			var ce *setting.Error
			switch {
			case err == nil:
				src.Close()
				t.Fatalf("OpenSource(%q, %+v) = nil error", tt.iss, tt.ks)
			case tt.wantField != "" && (!errors.As(err, &ce) || ce.Key != tt.wantField):
				t.Errorf("OpenSource(%q, %+v) = %v; want a *setting.Error of %s", tt.iss, tt.ks, err, tt.wantField)
			case tt.wantField == "" && errors.As(err, &ce):
				t.Errorf("OpenSource(%q, %+v) = %v; want an error that is no *setting.Error", tt.iss, tt.ks, err)
			}
		})
	}
}
