package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/edge"
)

// TestTokenCert: token -cert binds the token to the first certificate of
// the PEM file (cnf.x5t#S256 of its DER), beside -dpop-key when both are
// given; a file with no certificate is a usage error.
func TestTokenCert(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "issuer")
	if err := run(t.Context(), []string{"keygen", "-alg", "ES256", "-out", prefix}, nil, nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	ca := authtest.NewCA(t)
	client := ca.Issue(t, "client")
	chain := filepath.Join(dir, "client.pem")
	// The client's certificate, then its CA: a chain as a client keeps it.
	if err := os.WriteFile(chain, append(append([]byte{}, client.PEM...), ca.PEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "client.key")
	if err := os.WriteFile(keyFile, client.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	x5t := edge.CertificateThumbprint(client.DER)
	for _, tt := range []struct {
		name string
		args []string
		want map[string]any // cnf
	}{
		{"certificate", []string{"-cert", chain}, map[string]any{"x5t#S256": x5t}},
		{"certificate and DPoP key", []string{"-cert", chain, "-dpop-key", prefix + ".key"}, map[string]any{"x5t#S256": x5t, "jkt": jwkThumbprint(t, prefix+".jwks.json")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			args := append([]string{"token", "-key", prefix + ".key", "-sub", "svc"}, tt.args...)
			if err := run(t.Context(), args, nil, nil, &out, io.Discard); err != nil {
				t.Fatalf("%q: %v", args, err)
			}
			parts := strings.Split(strings.TrimSpace(out.String()), ".")
			payload, err := base64.RawURLEncoding.DecodeString(parts[1])
			if err != nil {
				t.Fatal(err)
			}
			var claims struct{ Cnf map[string]any }
			if err := json.Unmarshal(payload, &claims); err != nil {
				t.Fatal(err)
			}
			if len(claims.Cnf) != len(tt.want) {
				t.Fatalf("cnf %v; want %v", claims.Cnf, tt.want)
			}
			for k, v := range tt.want {
				if claims.Cnf[k] != v {
					t.Errorf("cnf.%s = %v; want %v", k, claims.Cnf[k], v)
				}
			}
		})
	}
	for _, file := range []string{keyFile, prefix + ".jwks.json"} {
		err := run(t.Context(), []string{"token", "-key", prefix + ".key", "-sub", "svc", "-cert", file}, nil, nil, io.Discard, io.Discard)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "no PEM CERTIFICATE block") {
			t.Errorf("token -cert %s = %v; want a usage error", file, err)
		}
	}
}

// jwkThumbprint returns the kid of the one key of a JWKS file keygen
// wrote: its RFC 7638 thumbprint.
func jwkThumbprint(t *testing.T, path string) string {
	t.Helper()
	var set struct{ Keys []struct{ Kid string } }
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("%s: %v", path, err)
	}
	return set.Keys[0].Kid
}
