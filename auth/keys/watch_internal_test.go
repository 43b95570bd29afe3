package keys

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fsnotify/fsnotify"
)

// TestWatchCounts: which events in a watched directory make the file be
// read again. A log appended beside the file must not: each of its writes
// would wake the reload.
func TestWatchCounts(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "..2026_11_28", "jwks.json")
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "jwks.json")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	resolved := resolve(link)
	if resolved == link {
		t.Fatalf("resolve(%s) = itself; want %s", link, real)
	}
	for _, tt := range []struct {
		name string
		ev   fsnotify.Event
		want bool
	}{
		{"write to the file", fsnotify.Event{Name: link, Op: fsnotify.Write}, true},
		{"write to where its link leads", fsnotify.Event{Name: resolved, Op: fsnotify.Write}, true},
		{"write to a log beside it", fsnotify.Event{Name: filepath.Join(dir, "plantstore.log"), Op: fsnotify.Write}, false},
		{"mode of the file", fsnotify.Event{Name: link, Op: fsnotify.Chmod}, false},
		{"link swap", fsnotify.Event{Name: filepath.Join(dir, "..data"), Op: fsnotify.Create}, true},
		{"save by rename", fsnotify.Event{Name: link, Op: fsnotify.Rename}, true},
		{"another file removed", fsnotify.Event{Name: filepath.Join(dir, "old"), Op: fsnotify.Remove}, true},
	} {
		if got := counts(tt.ev, link, resolved); got != tt.want {
			t.Errorf("%s (%v): counts %v; want %v", tt.name, tt.ev, got, tt.want)
		}
	}
}
