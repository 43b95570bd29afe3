package check_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// restoreMarker is the marker of the shell blocks of docs/operations.md
// that TestBackupRestore runs.
const restoreMarker = "<!-- run: by deploy/check/restore_test.go:TestBackupRestore -->"

// docBlocks returns the shell blocks of the document at path (relative to
// the repository) that follow the marker line marker, in order.
func docBlocks(t testing.TB, path, marker string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur *strings.Builder
	prev := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && line == "```sh" && strings.TrimSpace(prev) == marker:
			cur = &strings.Builder{}
		case cur != nil && line == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
		prev = line
	}
	return blocks
}

// TestBackupRestore runs the disaster recovery of docs/operations.md
// against a real PostgreSQL with the built binary, as written there: the
// backup of a catalog that the owner migrated and imported, its restore
// into a fresh database of the same roles, and plantstore serving from the
// restore as a serving login, the same plants and the same catalog
// version. A restore that skips the grants of database.sql leaves the
// serving login unable to read, and a dump cut short restores nothing:
// both must show.
func TestBackupRestore(t *testing.T) {
	blocks := docBlocks(t, "docs/operations.md", restoreMarker)
	if len(blocks) != 2 {
		t.Fatalf("docs/operations.md: %d blocks marked %s, want 2 (backup, restore)", len(blocks), restoreMarker)
	}
	backup, restore := blocks[0], blocks[1]
	const grants = "-f deploy/postgres/database.sql"
	if !strings.Contains(restore, grants) || !strings.Contains(restore, "plants.dump") {
		t.Fatalf("docs/operations.md: the restore block does not run %q on plants.dump:\n%s", grants, restore)
	}
	for _, tool := range []string{"pg_dump", "pg_restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(t, tool+" (Debian: apt-get install postgresql-client)")
		}
	}
	r := newDBRoles(t)
	bin := plantstoreBin(t)
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	owner := r.dsn(t, r.owner, r.ownerPassword)
	for _, args := range [][]string{{"migrate", "-database-url", owner}, {"import", "-database-url", owner, writeCatalog(t)}} {
		if out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("plantstore %s: %v\n%s", args[0], err, out)
		}
	}
	version := func(dsn string) string {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), r.psql, dsn, "-Atc", "SELECT version, plants FROM catalog_version").CombinedOutput()
		if err != nil {
			return fmt.Sprintf("error: %v %s", err, bytes.TrimSpace(out))
		}
		return strings.TrimSpace(string(out))
	}
	want := version(owner)

	// sh runs script in dir as the doc's reader would: bash with -e, the
	// built plantstore on PATH, the repository's deploy/ beside it.
	sh := func(dir, script string, env ...string) (string, error) {
		cmd := exec.CommandContext(t.Context(), "bash", "-Eeuo", "pipefail", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), append(env, "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	work := t.TempDir()
	if err := os.Symlink(filepath.Join(repo, "deploy"), filepath.Join(work, "deploy")); err != nil {
		t.Fatal(err)
	}
	out, err := sh(work, backup, "OWNER_DSN="+owner)
	if err != nil {
		t.Fatalf("the backup of docs/operations.md: %v\n%s", err, out)
	}
	for _, table := range []string{"plants", "plant_readers", "catalog_version", "goose_db_version"} {
		if !strings.Contains(out, "TABLE DATA public "+table+" ") {
			t.Errorf("the dump's list holds no data of table %s:\n%s", table, out)
		}
	}
	dump, err := os.ReadFile(filepath.Join(work, "plants.dump"))
	if err != nil {
		t.Fatal(err)
	}

	keys := filepath.Join(work, "keys")
	if out, err := exec.CommandContext(t.Context(), bin, "keygen", "-alg", "ES256", "-out", keys).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	token, err := exec.CommandContext(t.Context(), bin, "token", "-key", keys+".key", "-sub", "plantstore-ci", "-ttl", "10m").Output()
	if err != nil {
		t.Fatalf("token: %v", err)
	}

	tests := []struct {
		name    string
		restore string // the restore block, as run
		dump    []byte // plants.dump, as restored
		fails   string // "": the restore succeeds and serves; else what its output says
		serves  bool
	}{
		{name: "as documented", restore: restore, dump: dump, serves: true},
		{name: "without the grants of database.sql", restore: strings.Replace(restore, grants,
			`-c "CREATE DATABASE \"$NEW_DB\" OWNER \"$OWNER\""`, 1), dump: dump},
		{name: "a dump cut short", restore: restore, dump: dump[:len(dump)/2], fails: "pg_restore"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(work, fmt.Sprint(i))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(repo, "deploy"), filepath.Join(dir, "deploy")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "plants.dump"), tt.dump, 0o600); err != nil {
				t.Fatal(err)
			}
			db := fmt.Sprintf("%s_restored_%d", r.db, i)
			t.Cleanup(func() { r.exec(t, fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE)`, db)) })
			restored := *r
			restored.db = db
			newOwner := restored.dsn(t, r.owner, r.ownerPassword)
			out, err := sh(dir, tt.restore, "ADMIN_DSN="+r.admin, "OWNER="+r.owner, "READER="+r.reader,
				"NEW_DB="+db, "NEW_OWNER_DSN="+newOwner)
			if tt.fails != "" {
				if err == nil || !strings.Contains(out, tt.fails) {
					t.Fatalf("restore: %v, want a failure naming %s\n%s", err, tt.fails, out)
				}
				// One transaction: nothing of the dump is left.
				if got := version(newOwner); !strings.Contains(got, `relation "catalog_version" does not exist`) {
					t.Errorf("after the failed restore the catalog version reads %q, want no table", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("the restore of docs/operations.md: %v\n%s", err, out)
			}
			if got := version(newOwner); got != want || !strings.Contains(out, want) {
				t.Errorf("restored catalog version %q (the block printed %q), want %q", got, out, want)
			}
			p := start(t, dir, "plantstore", bin, "serve", "-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0",
				"-jwt-key-file", keys+".jwks.json", "-database-url", restored.dsn(t, r.loginA, r.aPassword), "-shutdown-delay", "0s")
			if !tt.serves {
				// The first snapshot fails for want of SELECT: logged, and
				// the replica stays unready.
				waitFor(t, "the snapshot refused", func() bool {
					return strings.Contains(readFile(t, p.log), "permission denied for table")
				})
				_, admin := listening(t, p)
				if got := status("http://" + admin + "/readyz"); got != 503 {
					t.Errorf("/readyz of the service on the database without grants: %d, want 503", got)
				}
				return
			}
			api, _ := waitServing(t, p, "plantstore")
			if got := get(t, api, strings.TrimSpace(string(token)), "restored"); got.status != 200 || got.body != wantCIPlants {
				t.Errorf("GET /plants from the restored database: %d %s, want 200 %s", got.status, got.body, wantCIPlants)
			}
		})
	}
}

// writeCatalog writes the test catalog to a file and returns its path.
func writeCatalog(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, []byte(catalog), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// readFile returns the content of path, "" when it cannot be read.
func readFile(t testing.TB, path string) string {
	t.Helper()
	b, _ := os.ReadFile(path)
	return string(b)
}

// listening waits for the listening line of the plantstore p runs and
// returns its API and admin addresses.
func listening(t testing.TB, p *process) (api, admin string) {
	t.Helper()
	waitFor(t, "listening line", func() bool {
		for _, e := range logEntries(t, p.log) {
			if e["msg"] == "listening" {
				api, _ = e["api_addr"].(string)
				admin, _ = e["admin_addr"].(string)
				return true
			}
		}
		return false
	})
	return api, admin
}
