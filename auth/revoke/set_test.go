package revoke_test

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/revoke"
	"github.com/plantstore/plantstore/observability/metricstest"
)

var t0 = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

// token is a Revocable of the issuer staff issued at iat.
func token(sub, client, jti string, iat time.Time) auth.Revocable {
	r := auth.Revocable{Issuer: "staff", Subject: sub, Client: client, ID: jti, IssuedAt: auth.NoIssuedAt}
	if !iat.IsZero() {
		r.IssuedAt = iat.UnixNano()
	}
	return r
}

func TestSetRevoked(t *testing.T) {
	cut := t0.Add(500 * time.Millisecond) // inside the second of t0
	entries := []revoke.Entry{
		{Issuer: "staff", Sub: "alice", Before: cut},
		{Issuer: "staff", Client: "old-app", Before: cut},
		{Issuer: "staff", JTI: "j-1", Until: t0.Add(time.Hour)},
		{Issuer: "partners", All: true, Before: cut},
		{Sub: "dave", Before: cut}, // the unnamed issuer
	}
	never := func(string) time.Duration { return 24 * time.Hour }
	s := revoke.NewSet(entries, never, 0, t0.Add(time.Minute))
	now := t0.Add(time.Minute)
	tests := []struct {
		name string
		tok  auth.Revocable
		want bool
	}{
		{"subject, issued a second before", token("alice", "", "", t0.Add(-time.Second)), true},
		{"subject, issued in the cutoff's second, before it", token("alice", "", "", t0), true},
		{"subject, issued in the cutoff's second, after it (iat truncated)", token("alice", "", "", t0.Add(900*time.Millisecond)), true},
		{"subject, issued the next second", token("alice", "", "", t0.Add(time.Second)), false},
		{"subject, no iat", token("alice", "", "", time.Time{}), true},
		{"another subject", token("bob", "", "", t0.Add(-time.Hour)), false},
		{"same subject, another issuer", auth.Revocable{Issuer: "partners-x", Subject: "alice", IssuedAt: t0.Add(-time.Hour).UnixNano()}, false},
		{"same subject, the unnamed issuer", auth.Revocable{Subject: "alice", IssuedAt: t0.Add(-time.Hour).UnixNano()}, false},
		{"unnamed issuer's subject", auth.Revocable{Subject: "dave", IssuedAt: t0.Add(-time.Hour).UnixNano()}, true},
		{"client, before", token("bob", "old-app", "", t0.Add(-time.Minute)), true},
		{"client, after", token("bob", "old-app", "", t0.Add(2*time.Second)), false},
		{"another client", token("bob", "new-app", "", t0.Add(-time.Minute)), false},
		{"jti", token("bob", "", "j-1", t0.Add(time.Second)), true},
		{"jti of another issuer", auth.Revocable{Issuer: "partners-x", Subject: "bob", ID: "j-1", IssuedAt: t0.UnixNano()}, false},
		{"another jti", token("bob", "", "j-2", t0), false},
		{"whole issuer, before", auth.Revocable{Issuer: "partners", Subject: "x", IssuedAt: t0.Add(-time.Hour).UnixNano()}, true},
		{"whole issuer, no iat", auth.Revocable{Issuer: "partners", Subject: "x", IssuedAt: auth.NoIssuedAt}, true},
		{"whole issuer, after", auth.Revocable{Issuer: "partners", Subject: "x", IssuedAt: t0.Add(time.Second).UnixNano()}, false},
	}
	for _, tt := range tests {
		if got := s.Revoked(tt.tok, now); got != tt.want {
			t.Errorf("%s: Revoked = %v, want %v", tt.name, got, tt.want)
		}
	}
	if got, want := s.Len(), [4]int{2, 1, 1, 1}; got != want {
		t.Errorf("Len = %v, want %v", got, want)
	}
}

func TestSetExpires(t *testing.T) {
	entries := []revoke.Entry{
		{Issuer: "staff", Sub: "alice", Before: t0},
		{Issuer: "short", Sub: "alice", Before: t0},
		{Issuer: "staff", JTI: "j-1", Until: t0.Add(time.Hour)},
	}
	retention := func(iss string) time.Duration {
		if iss == "short" {
			return time.Hour // the issuer's max_lifetime
		}
		return 24 * time.Hour
	}
	old := token("alice", "", "j-1", t0.Add(-time.Minute))
	short := old
	short.Issuer = "short"
	s := revoke.NewSet(entries, retention, time.Minute, t0)
	for _, c := range []struct {
		at         time.Duration
		staff, shr bool
	}{
		{time.Minute, true, true},
		{time.Hour + 30*time.Second, true, true}, // the leeway on top
		{time.Hour + 2*time.Minute, true, false},
		{25 * time.Hour, false, false},
	} {
		if got := s.Revoked(short, t0.Add(c.at)); got != c.shr {
			t.Errorf("at +%s: the short issuer's cutoff: Revoked = %v, want %v", c.at, got, c.shr)
		}
		old.ID = ""
		if got := s.Revoked(old, t0.Add(c.at)); got != c.staff {
			t.Errorf("at +%s: staff's cutoff: Revoked = %v, want %v", c.at, got, c.staff)
		}
	}
	// Built after they expired, the entries are gone.
	if got := revoke.NewSet(entries, retention, time.Minute, t0.Add(25*time.Hour)).Len(); got != [4]int{} {
		t.Errorf("Len after expiry = %v, want none", got)
	}
	if got := revoke.NewSet(entries, retention, time.Minute, t0.Add(2*time.Hour)).Len(); got != [4]int{1, 0, 0, 0} {
		t.Errorf("Len two hours on = %v, want staff's cutoff only", got)
	}
}

func TestSetLatestCutoffHolds(t *testing.T) {
	s := revoke.NewSet([]revoke.Entry{
		{Sub: "alice", Before: t0.Add(time.Hour)},
		{Sub: "alice", Before: t0},
	}, func(string) time.Duration { return 24 * time.Hour }, 0, t0)
	tok := auth.Revocable{Subject: "alice", IssuedAt: t0.Add(30 * time.Minute).UnixNano()}
	if !s.Revoked(tok, t0.Add(time.Minute)) {
		t.Error("an earlier cutoff overrode a later one for the same subject")
	}
}

func TestParse(t *testing.T) {
	good := `revocations:                     # issuer: a configured name; omitted = the unnamed issuer
  - {issuer: staff, sub: alice, before: 2026-11-28T10:00:00Z}
  - {client: old-app, before: 2026-11-28T10:00:00Z}
  - {issuer: staff, all: true, before: 2026-11-28T09:30:00Z}
  - {issuer: staff, jti: 4f1c2a, until: 2026-11-28T22:00:00Z}   # until: the token's exp
`
	entries, err := revoke.Parse("r.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	kinds := []revoke.Kind{revoke.KindSubject, revoke.KindClient, revoke.KindIssuer, revoke.KindToken}
	if len(entries) != len(kinds) {
		t.Fatalf("%d entries, want %d", len(entries), len(kinds))
	}
	for i, e := range entries {
		if e.Kind() != kinds[i] {
			t.Errorf("entry %d: kind %q, want %q", i, e.Kind(), kinds[i])
		}
	}
	if entries[1].Issuer != "" || !entries[0].Before.Equal(t0) {
		t.Errorf("entries = %+v", entries)
	}
	for _, bad := range []struct{ doc, want string }{
		{"revocations:\n  - {sub: a}\n", "r.yaml:2: revocation 1: a cutoff needs before"},
		{"revocations:\n  - {sub: a, before: 2026-11-28T10:00:00Z}\n  - {sub: a, client: b, before: 2026-11-28T10:00:00Z}\n", "r.yaml:3: revocation 2: want exactly one"},
		{"revocations:\n  - {jti: a}\n", "needs until"},
		{"revocations:\n  - {jti: a, until: 2026-11-28T10:00:00Z, before: 2026-11-28T10:00:00Z}\n", "before is for sub"},
		{"revocations:\n  - {subject: a, before: 2026-11-28T10:00:00Z}\n", "field subject not found"},
		{"revocations:\n  - {sub: a, before: yesterday}\n", "r.yaml"},
		{"revocations: [\n", "r.yaml"},
	} {
		_, err := revoke.Parse("r.yaml", []byte(bad.doc))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", bad.doc, err, bad.want)
		}
	}
}

func TestWriteFileReadsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "revocations.yaml")
	if got, err := revoke.ReadFile(path); err != nil || got != nil {
		t.Fatalf("ReadFile of no file = %v, %v; want none", got, err)
	}
	want := []revoke.Entry{{Issuer: "staff", Sub: "alice", Before: t0}, {JTI: "j", Until: t0.Add(time.Hour)}}
	if err := revoke.WriteFile(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := revoke.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Sub != "alice" || !got[0].Before.Equal(t0) || got[1].JTI != "j" || !got[1].Until.Equal(t0.Add(time.Hour)) {
		t.Errorf("read back %+v, want %+v", got, want)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("the directory holds %d files, want the one file (no temporary left)", len(entries))
	}
}

func TestRevocationsFileKeepsLastGoodSet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "revocations.yaml")
	reg := prometheus.NewRegistry()
	r := revoke.New(revoke.Options{Registerer: reg})
	if err := revoke.WriteFile(path, []revoke.Entry{{Sub: "alice", Before: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if changed, err := r.LoadFile(path, time.Now()); err != nil || !changed {
		t.Fatalf("LoadFile = %v, %v", changed, err)
	}
	alice := auth.Revocable{Subject: "alice", IssuedAt: time.Now().Add(-time.Minute).UnixNano()}
	if !r.Revoked(alice, time.Now()) {
		t.Fatal("alice not revoked")
	}
	if got := metricstest.ByLabel(t, reg, "plantstore_revocations", "kind"); got["subject"] != 1 || got["token"] != 0 {
		t.Errorf("plantstore_revocations = %v", got)
	}
	if changed, err := r.LoadFile(path, time.Now()); err != nil || changed {
		t.Errorf("LoadFile of the same file = %v, %v; want unchanged", changed, err)
	}
	if err := os.WriteFile(path, []byte("revocations: [{sub: bob}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.LoadFile(path, time.Now()); err == nil {
		t.Fatal("a bad file loaded")
	}
	if !r.Revoked(alice, time.Now()) {
		t.Error("a bad file dropped the last good set")
	}
}

func TestAge(t *testing.T) {
	r := revoke.New(revoke.Options{})
	if a := r.Age(); !math.IsInf(a, 1) {
		t.Errorf("Age before any read = %v, want +Inf", a)
	}
	r.Replace(nil, time.Now().Add(-time.Minute))
	if a := r.Age(); a < 59 || a > 120 {
		t.Errorf("Age a minute after a read = %v", a)
	}
	r.Confirm(time.Now())
	if a := r.Age(); a > 5 {
		t.Errorf("Age just after a confirmation = %v", a)
	}
	r.Confirm(time.Now().Add(-time.Hour)) // an older confirmation changes nothing
	if a := r.Age(); a > 5 {
		t.Errorf("Age after an older confirmation = %v", a)
	}
}
