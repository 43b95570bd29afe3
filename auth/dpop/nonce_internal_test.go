package dpop

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkNonceCheck is the nonce check of a proof alone: one
// HMAC-SHA256 over a step, compared in constant time.
//
//	go test ./auth/dpop -run '^$' -bench NonceCheck
func BenchmarkNonceCheck(b *testing.B) {
	path := filepath.Join(b.TempDir(), "nonce.key")
	if err := os.WriteFile(path, []byte(strings.Repeat("k", 32)), 0o600); err != nil {
		b.Fatal(err)
	}
	n, err := LoadNonces(path, 0)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	nonce := []byte(n.Issue(now))
	b.ReportAllocs()
	for b.Loop() {
		if !n.valid(nonce, now) {
			b.Fatal("the current nonce is refused")
		}
	}
}
