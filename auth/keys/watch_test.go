package keys_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/observability/logtest"
)

// watching loads a key source with load and watches it until the test
// ends; it returns the source, its metrics and its log.
func watching(t *testing.T, load func(keys.Recorder) (*keys.KeyFile, error)) (*keys.KeyFile, *prometheus.Registry, *logtest.Buffer) {
	t.Helper()
	logs := &logtest.Buffer{}
	log, _, err := observability.NewLogger(logs, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	f, err := load(auth.NewMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := f.Watch(ctx, log)
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return f, reg, logs
}

// TestKeyFileWatch: a key file in a volume the kubelet updates (a link
// swap, no SIGHUP) serves its new keys without a restart; a bad update is
// logged and counted, and the keys serving stay.
func TestKeyFileWatch(t *testing.T) {
	a, b := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "EdDSA")
	vol := authtest.NewVolume(t, map[string][]byte{"jwks.json": authtest.JWKS(t, a)})
	f, reg, logs := watching(t, func(m keys.Recorder) (*keys.KeyFile, error) {
		return keys.LoadKeyFile(vol.Path("jwks.json"), m)
	})
	tokA, tokB := authtest.Token(t, a, nil, authtest.Claims(nil)), authtest.Token(t, b, nil, authtest.Claims(nil))
	if err := srcVerify(t, f, tokB); err == nil {
		t.Fatal("token of a key not yet in the file verified")
	}

	vol.Update(t, map[string][]byte{"jwks.json": authtest.JWKS(t, a, b)})
	logs.WaitCount(t, "keys reloaded", 1)
	for _, tok := range []string{tokA, tokB} {
		if err := srcVerify(t, f, tok); err != nil {
			t.Errorf("after the volume update: %v", err)
		}
	}

	vol.Update(t, map[string][]byte{"jwks.json": []byte(`{"keys": [`)})
	logs.WaitCount(t, "key reload refused; the previous keys keep serving", 1)
	if err := srcVerify(t, f, tokB); err != nil {
		t.Errorf("after a bad update: %v; want the keys serving kept", err)
	}

	vol.Update(t, map[string][]byte{"jwks.json": authtest.JWKS(t, b)})
	logs.WaitCount(t, "keys reloaded", 2)
	if err := srcVerify(t, f, tokA); err == nil {
		t.Error("token of the key removed by the last update still verifies")
	}
	if got := srcMetric(t, reg, "plantstore_key_file_reloads_total", "success"); got != 2 {
		t.Errorf("plantstore_key_file_reloads_total{result=success} = %v, want 2", got)
	}
	if got := srcMetric(t, reg, "plantstore_key_file_reloads_total", "failure"); got < 1 {
		t.Errorf("plantstore_key_file_reloads_total{result=failure} = %v, want at least 1", got)
	}
	if got := srcMetric(t, reg, "plantstore_jwks_keys", ""); got != 1 {
		t.Errorf("plantstore_jwks_keys = %v, want 1", got)
	}
}

// TestKeyFileWatchInPlace: a plain file rewritten in place is read again.
func TestKeyFileWatchInPlace(t *testing.T) {
	a, b := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	path := authtest.WriteJWKS(t, a)
	f, _, logs := watching(t, func(m keys.Recorder) (*keys.KeyFile, error) { return keys.LoadKeyFile(path, m) })
	if err := os.WriteFile(path, authtest.JWKS(t, b), 0o644); err != nil {
		t.Fatal(err)
	}
	logs.WaitCount(t, "keys reloaded", 1)
	if err := srcVerify(t, f, authtest.Token(t, b, nil, authtest.Claims(nil))); err != nil {
		t.Errorf("after the file was rewritten: %v", err)
	}
}

// TestHMACSecretRotation is the rotation of docs/operations.md: a new
// secret is added beside the old one, tokens move to it by kid, the old
// one is removed; both verify during the overlap, with no restart.
func TestHMACSecretRotation(t *testing.T) {
	older, newer := authtest.NewKeyID(t, "HS256", "2026-10"), authtest.NewKeyID(t, "HS256", "2026-11")
	vol := authtest.NewVolume(t, map[string][]byte{"2026-10": older.Private.([]byte)})
	f, _, logs := watching(t, func(m keys.Recorder) (*keys.KeyFile, error) { return keys.LoadHMACSecret(vol.Dir, m) })
	tokOld, tokNew := authtest.Token(t, older, nil, authtest.Claims(nil)), authtest.Token(t, newer, nil, authtest.Claims(nil))
	if err := srcVerify(t, f, tokNew); err == nil {
		t.Fatal("token of the secret not yet added verified")
	}

	vol.Update(t, map[string][]byte{"2026-10": older.Private.([]byte), "2026-11": newer.Private.([]byte)})
	logs.WaitCount(t, "keys reloaded", 1)
	for _, tok := range []string{tokOld, tokNew} {
		if err := srcVerify(t, f, tok); err != nil {
			t.Errorf("during the overlap: %v", err)
		}
	}

	vol.Update(t, map[string][]byte{"2026-11": newer.Private.([]byte)})
	logs.WaitCount(t, "keys reloaded", 2)
	if err := srcVerify(t, f, tokOld); err == nil {
		t.Error("token of the removed secret still verifies")
	}
	if err := srcVerify(t, f, tokNew); err != nil {
		t.Errorf("after the old secret went: %v", err)
	}
	// The secret is random bytes: a log would hold it escaped, or encoded.
	secret := newer.Private.([]byte)
	for _, enc := range []string{string(secret), base64.StdEncoding.EncodeToString(secret),
		base64.RawURLEncoding.EncodeToString(secret), hex.EncodeToString(secret)} {
		if strings.Contains(logs.String(), enc) {
			t.Errorf("the log holds the secret as %q", enc)
		}
	}
}

// TestKeyFileWatchStops: Watch ends with its context.
func TestKeyFileWatchStops(t *testing.T) {
	f, err := keys.LoadKeyFile(authtest.WriteJWKS(t, authtest.NewKey(t, "ES256")), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := f.Watch(ctx, nil)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not stop within 10s of its context's end")
	}
}
