package revoke_test

import (
	"path/filepath"
	"testing"

	"github.com/plantstore/plantstore/auth/revoke"
)

// FuzzParse: whatever a revocations file holds, Parse either refuses it
// or returns entries that each revoke exactly one thing, and what
// plantstore revoke writes of them reads back as the same entries (a
// file is never half understood, and the command never writes a file
// the service would refuse).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"",
		"revocations: []\n",
		"revocations:\n  - {issuer: staff, sub: alice, before: 2026-11-28T10:00:00Z}\n",
		"revocations:\n  - {client: old-app, before: 2026-11-28T10:00:00Z}\n",
		"revocations:\n  - {issuer: staff, all: true, before: 2026-11-28T09:30:00+02:00}\n",
		"revocations:\n  - {issuer: staff, jti: 4f1c2a, until: 2026-11-28T22:00:00Z}\n",
		"revocations:\n  - {sub: a, client: b, before: 2026-11-28T10:00:00Z}\n",
		"revocations:\n  - {sub: \"\", before: 2026-11-28T10:00:00Z}\n",
		"revocations:\n  - {jti: x}\n",
		"revocations: {sub: a}\n",
		"revocations:\n  - {sub: a, before: 2026-11-28, extra: 1}\n",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := revoke.Parse("revocations.yaml", data)
		if err != nil {
			if entries != nil {
				t.Fatalf("refused with %v, yet returned %d entries", err, len(entries))
			}
			return
		}
		for i, e := range entries {
			if err := e.Check(); err != nil {
				t.Fatalf("entry %d accepted but not a revocation: %v", i+1, err)
			}
			if e.Kind() == "" {
				t.Fatalf("entry %d accepted but revokes no one thing: %+v", i+1, e)
			}
		}
		path := filepath.Join(dir, "written.yaml")
		if err := revoke.WriteFile(path, entries); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
		back, err := revoke.ReadFile(path)
		if err != nil {
			t.Fatalf("the file WriteFile wrote of %d accepted entries is refused: %v", len(entries), err)
		}
		if len(back) != len(entries) {
			t.Fatalf("wrote %d entries, read back %d", len(entries), len(back))
		}
		for i := range back {
			a, b := entries[i], back[i]
			if a.Issuer != b.Issuer || a.Sub != b.Sub || a.Client != b.Client || a.All != b.All || a.JTI != b.JTI || !a.Before.Equal(b.Before) || !a.Until.Equal(b.Until) {
				t.Fatalf("entry %d read back as %+v, want %+v", i+1, b, a)
			}
		}
	})
}
