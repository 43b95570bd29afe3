package revoke_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/revoke"
)

// TestEventFile: an event's cutoff is written to the file beside what it
// held and is in force at once; its jti is applied once while remembered,
// forgotten after the window, and the ids remembered are bounded.
func TestEventFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "revocations.yaml")
	manual := revoke.Entry{Issuer: "staff", Client: "old-app", Before: t0}
	if err := revoke.WriteFile(path, []revoke.Entry{manual}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	clock := func() time.Time { return now }
	r := revoke.New(revoke.Options{})
	f := revoke.NewEventFile(path, r, revoke.EventFileOptions{Window: 5 * time.Minute, Max: 3, Now: clock})
	alice := revoke.Entry{Issuer: "staff", Sub: "alice", Before: now.UTC().Truncate(time.Second)}
	aliceToken := auth.Revocable{Issuer: "staff", Subject: "alice", IssuedAt: now.Add(-time.Minute).UnixNano()}

	if fresh, err := f.Record("staff", "j1", alice); err != nil || !fresh {
		t.Fatalf("Record j1 = %v, %v; want fresh", fresh, err)
	}
	if !r.Revoked(aliceToken, now) {
		t.Error("alice not revoked at once")
	}
	entries, err := revoke.ReadFile(path)
	if err != nil || len(entries) != 2 || entries[0] != manual || !entries[1].Before.Equal(alice.Before) || entries[1].Sub != "alice" {
		t.Fatalf("file holds %v, %v; want the manual entry and alice's", entries, err)
	}
	if fresh, err := f.Record("staff", "j1", alice); err != nil || fresh {
		t.Errorf("Record j1 again = %v, %v; want a replay", fresh, err)
	}
	if fresh, err := f.Record("other", "j1", revoke.Entry{Issuer: "other", Sub: "alice", Before: alice.Before}); err != nil || !fresh {
		t.Errorf("the same jti of another issuer = %v, %v; want fresh", fresh, err)
	}
	// Another event of the same cutoff adds nothing to the file.
	if fresh, err := f.Record("staff", "j2", alice); err != nil || !fresh {
		t.Errorf("Record j2 = %v, %v; want fresh", fresh, err)
	}
	if entries, err := revoke.ReadFile(path); err != nil || len(entries) != 3 {
		t.Errorf("file holds %d entries, %v; want 3 (j2 the same cutoff as j1)", len(entries), err)
	}
	// Full: the fourth id is refused, not recorded.
	if fresh, err := f.Record("staff", "j3", revoke.Entry{Issuer: "staff", Sub: "bob", Before: alice.Before}); !errors.Is(err, revoke.ErrTooManyEvents) || fresh {
		t.Errorf("Record over the bound = %v, %v; want ErrTooManyEvents", fresh, err)
	}
	if entries, _ := revoke.ReadFile(path); len(entries) != 3 {
		t.Errorf("a refused event wrote the file: %v", entries)
	}
	now = now.Add(5*time.Minute - time.Nanosecond)
	if fresh, err := f.Record("staff", "j1", alice); err != nil || fresh || f.Remembered() != 3 {
		t.Errorf("j1 within the window = %v, %v (%d remembered); want a replay", fresh, err, f.Remembered())
	}
	now = now.Add(time.Nanosecond)
	if n := f.Remembered(); n != 0 {
		t.Errorf("%d ids remembered after the window, want 0", n)
	}
	if fresh, err := f.Record("staff", "j1", alice); err != nil || !fresh {
		t.Errorf("j1 after the window = %v, %v; want fresh again", fresh, err)
	}
}

// TestEventFileUnwritable: an event the file cannot take is an error,
// and is not remembered: delivered again, it is recorded.
func TestEventFileUnwritable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "revocations.yaml")
	if err := os.WriteFile(path, []byte("revocations: [{sub: bob}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := revoke.New(revoke.Options{})
	f := revoke.NewEventFile(path, r, revoke.EventFileOptions{Window: time.Minute})
	e := revoke.Entry{Sub: "alice", Before: time.Now().UTC().Truncate(time.Second)}
	if fresh, err := f.Record("", "j1", e); err == nil || fresh {
		t.Fatalf("Record into a bad file = %v, %v; want an error", fresh, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if fresh, err := f.Record("", "j1", e); err != nil || !fresh {
		t.Errorf("Record delivered again = %v, %v; want fresh", fresh, err)
	}
	if entries, err := revoke.ReadFile(path); err != nil || len(entries) != 1 {
		t.Errorf("file holds %v, %v", entries, err)
	}
}
