package authtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Volume is a directory laid out as the kubelet lays out a mounted Secret
// or ConfigMap: each file a link NAME -> ..data/NAME, ..data a link to a
// timestamped directory holding the files. [Volume.Update] changes it as
// the kubelet does, by writing a new timestamped directory and swapping
// ..data to it in one rename, so that a reader sees the old files or the
// new ones, never a mix.
type Volume struct {
	// Dir is the mount point.
	Dir string
	n   int
}

// NewVolume returns a volume in a new temporary directory holding files
// (name to content).
func NewVolume(t testing.TB, files map[string][]byte) *Volume {
	t.Helper()
	v := &Volume{Dir: t.TempDir()}
	v.Update(t, files)
	return v
}

// Path returns the path of the file name in v.
func (v *Volume) Path(name string) string { return filepath.Join(v.Dir, name) }

// Update replaces the files of v with files, as the kubelet does.
func (v *Volume) Update(t testing.TB, files map[string][]byte) {
	t.Helper()
	v.n++
	stamp := fmt.Sprintf("..2026_11_23_00_00_%02d.%d", v.n, os.Getpid())
	if err := os.Mkdir(filepath.Join(v.Dir, stamp), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(v.Dir, stamp, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(v.Dir, "..data"))
	tmp := filepath.Join(v.Dir, "..data_tmp")
	if err := os.Symlink(stamp, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.Dir, "..data")); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(v.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if name := e.Name(); name[0] != '.' && files[name] == nil {
			if err := os.Remove(v.Path(name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name := range files {
		if _, err := os.Lstat(v.Path(name)); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), v.Path(name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(v.Dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}
