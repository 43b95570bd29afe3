package auth_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
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
	src, err := auth.OpenSource(t.Context(), "", auth.Config{}, auth.KeySource{
		JWKSURL: idp.URL, KeyFile: authtest.WriteJWKS(t, fileKey),
	}, auth.SourceOptions{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	v := newVerifier(t, auth.Config{}, src.Keys())
	srcWait(t, "the JWKS keys", func() bool { return v.Ready() == nil })
	hits := idp.Hits.Load()
	if _, err := v.Verify(t.Context(), authtest.Token(t, fileKey, nil, authtest.Claims(nil))); err != nil {
		t.Errorf("token of the key file: %v", err)
	}
	if n := idp.Hits.Load(); n != hits {
		t.Errorf("a kid of the key file cost %d JWKS fetches; want none", n-hits)
	}
	if _, err := v.Verify(t.Context(), authtest.Token(t, remoteKey, nil, authtest.Claims(nil))); err != nil {
		t.Errorf("token of the JWKS: %v", err)
	}
	keys := func() float64 {
		return metricstest.Sum(t, reg, "plantstore_jwks_keys", map[string]string{"issuer": "default"})
	}
	if got := keys(); got != 2 {
		t.Errorf("plantstore_jwks_keys{issuer=default} = %v with both sources; want 2", got)
	}
	src.Close()
	select {
	case <-src.Done():
	default:
		t.Error("Done is open after Close")
	}
	if got := keys(); got != 0 {
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
		ks        auth.KeySource
		wantField string // "" for an error that is no *setting.Error
	}{
		{"JWKS URL not http", "", auth.KeySource{JWKSURL: "ftp://idp.example/jwks"}, "jwks_url"},
		{"issuer to discover not a URL", "plantstore", auth.KeySource{}, "issuer"},
		{"missing key file", "", auth.KeySource{KeyFile: missing}, ""},
		{"nothing", "", auth.KeySource{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			src, err := auth.OpenSource(ctx, "", auth.Config{Issuer: tt.iss}, tt.ks, auth.SourceOptions{})
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
