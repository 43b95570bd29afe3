package keys_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/keys"
)

func TestLoadHMACSecret(t *testing.T) {
	s32 := strings.Repeat("s", 32)
	tests := []struct {
		name    string
		content string
		want    string // the secret
		wantErr string
	}{
		{name: "no newline", content: s32, want: s32},
		{name: "one trailing newline dropped", content: s32 + "\n", want: s32},
		{name: "only one newline dropped", content: s32 + "\n\n", want: s32 + "\n"},
		{name: "carriage return kept", content: s32 + "\r\n", want: s32 + "\r"},
		{name: "inner newlines kept", content: "line one of the secret\nline two of it\n", want: "line one of the secret\nline two of it"},
		{name: "empty", content: "", wantErr: "empty"},
		{name: "only a newline", content: "\n", wantErr: "empty"},
		{name: "under 32 bytes", content: strings.Repeat("s", 31) + "\n", wantErr: "31 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeSrcFile(t, []byte(tt.content))
			ks, err := keys.LoadHMACSecret(path, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("LoadHMACSecret(%q) error = %v, want one naming the file and %q", tt.content, err, tt.wantErr)
				}
				if tt.content != "" && tt.content != "\n" && strings.Contains(err.Error(), strings.TrimSpace(tt.content)) {
					t.Errorf("LoadHMACSecret(%q) error %q contains the secret", tt.content, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadHMACSecret(%q) error = %v, want nil", tt.content, err)
			}
			k, err := ks.Key(t.Context(), "", "HS256")
			if err != nil {
				t.Fatalf("Key(\"\", HS256) error = %v", err)
			}
			if got, _ := k.Public.([]byte); string(got) != tt.want || k.ID != "" {
				t.Errorf("LoadHMACSecret(%q) = key %q with kid %q, want %q with no kid", tt.content, got, k.ID, tt.want)
			}
		})
	}
}

func TestHMACSecretAlgorithms(t *testing.T) {
	secret := strings.Repeat("k", 64)
	ks, err := keys.LoadHMACSecret(writeSrcFile(t, []byte(secret+"\n")), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		alg  string
		want error
	}{
		{"HS256", nil}, {"HS384", nil}, {"HS512", nil},
		{"RS256", keys.ErrUnknownKey}, {"ES256", keys.ErrUnknownKey}, {"EdDSA", keys.ErrUnknownKey}, {"none", keys.ErrUnknownKey},
	} {
		if _, err := ks.Key(t.Context(), "", tt.alg); !errors.Is(err, tt.want) {
			t.Errorf("Key(\"\", %s) error = %v, want %v", tt.alg, err, tt.want)
		}
	}

	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "a", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	if err := srcVerify(t, ks, tok); err != nil {
		t.Errorf("verify HS256 token signed with the file's secret: %v", err)
	}
}

func TestLoadHMACSecretMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent")
	if _, err := keys.LoadHMACSecret(path, nil); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("LoadHMACSecret(%s) error = %v, want one naming the file", path, err)
	}
}

// TestHMACSecretDirectory: a directory of secrets, as a mounted Secret
// with two keys gives, verifies the tokens of each by kid, the file's
// name; a token without kid is refused, as no one key fits (SPEC §2).
func TestHMACSecretDirectory(t *testing.T) {
	older, newer := authtest.NewKeyID(t, "HS256", "2026-10"), authtest.NewKeyID(t, "HS256", "2026-11")
	vol := authtest.NewVolume(t, map[string][]byte{
		"2026-10": append(older.Private.([]byte), '\n'),
		"2026-11": newer.Private.([]byte),
	})
	if err := os.Mkdir(vol.Path("subdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	ks, err := keys.LoadHMACSecret(vol.Dir, nil)
	if err != nil {
		t.Fatalf("LoadHMACSecret(directory): %v", err)
	}
	for _, k := range []authtest.Key{older, newer} {
		if err := srcVerify(t, ks, authtest.Token(t, k, nil, authtest.Claims(nil))); err != nil {
			t.Errorf("verify the token of secret %s: %v", k.Verify.ID, err)
		}
	}
	if err := srcVerify(t, ks, authtest.Token(t, newer, map[string]any{"kid": "2026-10"}, authtest.Claims(nil))); err == nil {
		t.Error("a token naming the other secret's kid verified; want refused")
	}
	if _, err := ks.Key(t.Context(), "", "HS256"); !errors.Is(err, keys.ErrAmbiguousKey) {
		t.Errorf("Key(no kid, HS256) with two secrets: error = %v, want %v", err, keys.ErrAmbiguousKey)
	}

	for _, tt := range []struct {
		name    string
		files   map[string][]byte
		wantErr string
	}{
		{"a short secret", map[string][]byte{"ok": newer.Private.([]byte), "short": []byte("tiny")}, "short: secret of 4 bytes"},
		{"no secret", map[string][]byte{".hidden": newer.Private.([]byte)}, "no secret"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, b := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := keys.LoadHMACSecret(dir, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("LoadHMACSecret(%s) error = %v, want one naming the directory and %q", tt.name, err, tt.wantErr)
			}
			if strings.Contains(err.Error(), string(newer.Private.([]byte))) {
				t.Errorf("error %q holds a secret", err)
			}
		})
	}
	if _, err := keys.ReadHMACSecret(vol.Dir); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("ReadHMACSecret(directory) error = %v, want one asking for the file", err)
	}
	if got, err := keys.ReadHMACSecret(vol.Path("2026-10")); err != nil || string(got) != string(older.Private.([]byte)) {
		t.Errorf("ReadHMACSecret(one file of the directory) = %q, %v; want its secret", got, err)
	}
}
