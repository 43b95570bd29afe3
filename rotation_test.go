package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/plantstore/plantstore/auth/authtest"
)

// The rotations of docs/operations.md, run against the service on a
// directory laid out and updated as the kubelet updates a mounted Secret,
// with no signal and no restart.

// wantStatus checks what GET /plants answers token.
func wantStatus(t *testing.T, in *instance, step, token string, want int) {
	t.Helper()
	if status, body, _ := get(t, in.api+"/plants", token); status != want {
		t.Errorf("%s: GET /plants = %d %s, want %d", step, status, body, want)
	}
}

// TestKeyFileRotation: publish the new key beside the old, sign with the
// new one, withdraw the old; a broken update keeps the keys serving.
func TestKeyFileRotation(t *testing.T) {
	oldToken, oldJWKS := mintTestToken(t, "ES256", "-sub", "rotator")
	newToken, newJWKS := mintTestToken(t, "EdDSA", "-sub", "rotator")
	jwks := func(paths ...string) map[string][]byte {
		var set struct {
			Keys []json.RawMessage `json:"keys"`
		}
		for _, p := range paths {
			var one struct {
				Keys []json.RawMessage `json:"keys"`
			}
			b, err := os.ReadFile(p)
			if err == nil {
				err = json.Unmarshal(b, &one)
			}
			if err != nil {
				t.Fatal(err)
			}
			set.Keys = append(set.Keys, one.Keys...)
		}
		b, err := json.Marshal(set)
		if err != nil {
			t.Fatal(err)
		}
		return map[string][]byte{"jwks.json": b}
	}
	vol := authtest.NewVolume(t, jwks(oldJWKS))
	in := startServe(t, nil, "-jwt-key-file", vol.Path("jwks.json"))
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	wantStatus(t, in, "before", oldToken, http.StatusOK)
	wantStatus(t, in, "before", newToken, http.StatusUnauthorized)

	vol.Update(t, jwks(newJWKS, oldJWKS))
	in.stderr.WaitCount(t, "keys reloaded", 1)
	wantStatus(t, in, "both published", oldToken, http.StatusOK)
	wantStatus(t, in, "both published", newToken, http.StatusOK)

	vol.Update(t, jwks(newJWKS))
	in.stderr.WaitCount(t, "keys reloaded", 2)
	wantStatus(t, in, "old withdrawn", newToken, http.StatusOK)
	wantStatus(t, in, "old withdrawn", oldToken, http.StatusUnauthorized)

	vol.Update(t, map[string][]byte{"jwks.json": []byte("{not json")})
	in.stderr.WaitCount(t, "key reload refused; the previous keys keep serving", 1)
	wantStatus(t, in, "broken update", newToken, http.StatusOK)
}

// TestHMACSecretRotation: -jwt-hmac-secret-file names the directory of a
// Secret with one key per secret; a new secret is added beside the old,
// tokens name theirs by kid, the old one is removed.
func TestHMACSecretRotation(t *testing.T) {
	secret := func() []byte { return []byte(authtest.NewKey(t, "HS256").Private.([]byte)) }
	older, newer := secret(), secret()
	vol := authtest.NewVolume(t, map[string][]byte{"2026-10": older})
	in := startServe(t, nil, "-jwt-hmac-secret-file", vol.Dir)
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	// The token command signs with one file of the directory.
	keep := filepath.Join(t.TempDir(), "2026-11")
	if err := os.WriteFile(keep, newer, 0o600); err != nil {
		t.Fatal(err)
	}
	oldToken := hmacToken(t, vol.Path("2026-10"), "rotator", "-kid", "2026-10")
	newToken := hmacToken(t, keep, "rotator", "-kid", "2026-11")
	wantStatus(t, in, "before", oldToken, http.StatusOK)
	wantStatus(t, in, "before", newToken, http.StatusUnauthorized)

	vol.Update(t, map[string][]byte{"2026-10": older, "2026-11": newer})
	in.stderr.WaitCount(t, "keys reloaded", 1)
	wantStatus(t, in, "overlap", oldToken, http.StatusOK)
	wantStatus(t, in, "overlap", newToken, http.StatusOK)

	vol.Update(t, map[string][]byte{"2026-11": newer})
	in.stderr.WaitCount(t, "keys reloaded", 2)
	wantStatus(t, in, "old removed", newToken, http.StatusOK)
	wantStatus(t, in, "old removed", oldToken, http.StatusUnauthorized)
}
