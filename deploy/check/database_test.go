package check_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// adminDSN returns the PostgreSQL the database tests create their roles and
// databases in ($TEST_DATABASE_URL, as the service's own tests
// use), with psql; without either the test skips, or fails under
// TEST_REQUIRE_DB=1.
func adminDSN(t testing.TB) (dsn, psql string) {
	t.Helper()
	dsn = os.Getenv("TEST_DATABASE_URL")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	psql, err := exec.LookPath("psql")
	if err == nil {
		err = exec.CommandContext(t.Context(), psql, dsn, "-Atc", "SELECT 1").Run()
	}
	if err != nil {
		if os.Getenv("TEST_REQUIRE_DB") == "1" {
			t.Fatalf("psql and a PostgreSQL at %s are required (TEST_REQUIRE_DB=1): %v", dsn, err)
		}
		t.Skipf("no psql or PostgreSQL at %s: %v", dsn, err)
	}
	return dsn, psql
}

// dbRoles are the names deploy/postgres/roles.sql creates, made unique per
// test because roles are cluster-wide.
type dbRoles struct {
	admin, psql                         string
	db, owner, reader, loginA, loginB   string
	ownerPassword, aPassword, bPassword string
}

func newDBRoles(t *testing.T) *dbRoles {
	t.Helper()
	admin, psql := adminDSN(t)
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	s := hex.EncodeToString(b)
	r := &dbRoles{
		admin: admin, psql: psql,
		db: "plantstore_ci_" + s, owner: "ps_owner_" + s, reader: "ps_reader_" + s,
		loginA: "ps_a_" + s, loginB: "ps_b_" + s,
		ownerPassword: "owner-" + s, aPassword: "a-" + s, bPassword: "b-" + s,
	}
	t.Cleanup(func() {
		r.exec(t, fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE)`, r.db))
		for _, role := range []string{r.loginA, r.loginB, r.owner, r.reader} {
			r.exec(t, fmt.Sprintf(`DROP ROLE IF EXISTS %q`, role))
		}
	})
	out, err := exec.CommandContext(t.Context(), psql, admin, "-q", "-v", "ON_ERROR_STOP=1",
		"-v", "db="+r.db, "-v", "owner="+r.owner, "-v", "reader="+r.reader,
		"-v", "login_a="+r.loginA, "-v", "login_b="+r.loginB, "-v", "budget=50",
		"-v", "owner_password="+r.ownerPassword, "-v", "a_password="+r.aPassword,
		"-f", filepath.Join("..", "postgres", "roles.sql")).CombinedOutput()
	if err != nil {
		t.Fatalf("psql -f deploy/postgres/roles.sql: %v\n%s", err, out)
	}
	return r
}

// exec runs SQL as the administrator.
func (r *dbRoles) exec(t testing.TB, sql string) {
	t.Helper()
	if out, err := exec.Command(r.psql, r.admin, "-q", "-v", "ON_ERROR_STOP=1", "-c", sql).CombinedOutput(); err != nil {
		t.Errorf("psql -c %q: %v\n%s", sql, err, out)
	}
}

// dsn returns the DSN of a login role of the test database on the
// administrator's server.
func (r *dbRoles) dsn(t testing.TB, role, password string) string {
	t.Helper()
	u, err := url.Parse(r.admin)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, password)
	u.Path = "/" + r.db
	return u.String()
}

// startDatabaseService runs plantstore on the PostgreSQL store at dsn with a
// static key and returns its API and admin addresses once /readyz answers
// 200.
func startDatabaseService(t testing.TB, bin, dir, label, dsn, jwks string) (p *process, api, admin string) {
	t.Helper()
	p = start(t, dir, label, bin, "serve", "-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0",
		"-jwt-key-file", jwks, "-database-url", dsn, "-shutdown-delay", "0s")
	api, admin = waitServing(t, p, label)
	return p, api, admin
}

// newSchema creates a schema of its own in the administrator's database,
// dropped when the test ends, and returns a DSN whose search_path is it.
func newSchema(t testing.TB) string {
	t.Helper()
	admin, psql := adminDSN(t)
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	schema := "ci_" + hex.EncodeToString(b)
	run := func(sql string) {
		if out, err := exec.Command(psql, admin, "-q", "-v", "ON_ERROR_STOP=1", "-c", sql).CombinedOutput(); err != nil {
			t.Fatalf("psql -c %q: %v\n%s", sql, err, out)
		}
	}
	run("CREATE SCHEMA " + schema)
	t.Cleanup(func() { run("DROP SCHEMA " + schema + " CASCADE") })
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestDatabaseRoles runs deploy/postgres/roles.sql and the procedures of
// docs/deploy.md and docs/operations.md against a real PostgreSQL with the
// built binary: the owner migrates and imports, a serving login reads and
// cannot change the schema, and the serving password rotates by switching
// to the other login of the reader group and disabling the first. Whether
// a password is checked depends on the server's pg_hba.conf (CI's trusts
// 127.0.0.1); a login disabled with NOLOGIN is refused whatever it says.
func TestDatabaseRoles(t *testing.T) {
	r := newDBRoles(t)
	bin := plantstoreBin(t)
	dir := t.TempDir()
	run := func(args ...string) (string, error) {
		out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput()
		return string(out), err
	}
	owner := r.dsn(t, r.owner, r.ownerPassword)
	loginA := r.dsn(t, r.loginA, r.aPassword)
	loginB := r.dsn(t, r.loginB, r.bPassword)

	if out, err := run("migrate", "-database-url", loginA); err == nil {
		t.Errorf("plantstore migrate as the serving login %s succeeded, want a permission error:\n%s", r.loginA, out)
	}
	if out, err := run("migrate", "-database-url", owner); err != nil {
		t.Fatalf("plantstore migrate as the owner: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "catalog.json")
	if err := os.WriteFile(data, []byte(catalog), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run("import", "-database-url", loginA, data); err == nil {
		t.Errorf("plantstore import as the serving login succeeded, want a permission error:\n%s", out)
	}
	if out, err := run("import", "-database-url", owner, data); err != nil {
		t.Fatalf("plantstore import as the owner: %v\n%s", err, out)
	}

	keys := filepath.Join(dir, "keys")
	if out, err := run("keygen", "-alg", "ES256", "-out", keys); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	token, err := run("token", "-key", keys+".key", "-sub", "plantstore-ci", "-ttl", "10m")
	if err != nil {
		t.Fatalf("token: %v\n%s", err, token)
	}
	token = strings.TrimSpace(token)
	serves := func(label, api string) {
		t.Helper()
		if got := get(t, api, token, "db-"+label); got.status != 200 || got.body != wantCIPlants {
			t.Errorf("GET /plants as %s: %d %s, want 200 %s", label, got.status, got.body, wantCIPlants)
		}
	}
	a, apiA, _ := startDatabaseService(t, bin, dir, "plantstore-a", loginA, keys+".jwks.json")
	serves("login a", apiA)

	// Rotation (docs/operations.md): enable login b with a new password,
	// point the Secret at it and roll the pods, then disable login a.
	r.exec(t, fmt.Sprintf(`ALTER ROLE %q LOGIN PASSWORD '%s'`, r.loginB, r.bPassword))
	_, apiB, _ := startDatabaseService(t, bin, dir, "plantstore-b", loginB, keys+".jwks.json")
	serves("login b", apiB)
	a.stop(t)
	r.exec(t, fmt.Sprintf(`ALTER ROLE %q NOLOGIN`, r.loginA))
	out, err := exec.CommandContext(t.Context(), r.psql, loginA, "-Atc", "SELECT 1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not permitted to log in") {
		t.Errorf("psql as the disabled login %s: %v %s, want \"not permitted to log in\"", r.loginA, err, out)
	}
	serves("login b after login a is disabled", apiB)
}

// TestImportCatalogGuard runs "plantstore import" over a catalog larger
// than -max-catalog-bytes (the test catalog holds 116 bytes of ids, names,
// tags and readers): refused, exit status 1, the flag named, nothing
// imported; at the limit, and with the default, it loads.
func TestImportCatalogGuard(t *testing.T) {
	bin := plantstoreBin(t)
	dsn := newSchema(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "catalog.json")
	if err := os.WriteFile(data, []byte(catalog), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput()
		return string(out), err
	}
	if out, err := run("migrate", "-database-url", dsn); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	admin, psql := adminDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	plants := func() string {
		// psql takes no search_path in a URI: name the schema.
		out, err := exec.CommandContext(t.Context(), psql, admin, "-Atc", "SELECT count(*) FROM "+u.Query().Get("search_path")+".plants").CombinedOutput()
		if err != nil {
			t.Fatalf("psql: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	out, err := run("import", "-database-url", dsn, "-max-catalog-bytes", "115", data)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, "116 bytes of text, over the limit of 115") || !strings.Contains(out, "-max-catalog-bytes") {
		t.Errorf("import over -max-catalog-bytes: %v\n%s\nwant exit status 1 naming 116 bytes, the limit and the flag", err, out)
	}
	if n := plants(); n != "0" {
		t.Errorf("after the refused import the catalog holds %s plants, want 0", n)
	}
	for _, args := range [][]string{{"-max-catalog-bytes", "116"}, {"-replace"}} {
		if out, err := run(append(append([]string{"import", "-database-url", dsn}, args...), "-replace", data)...); err != nil || !strings.Contains(out, "imported 3 plants") {
			t.Errorf("import %v: %v\n%s", args, err, out)
		}
	}
	if n := plants(); n != "3" {
		t.Errorf("the catalog holds %s plants, want 3", n)
	}
}
