package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/plantstore/plantstore/plants/postgres/pgtest"
)

// writeCatalog writes a catalog of the given plant names, each readable by
// everyone, and returns its path.
func writeCatalog(t testing.TB, names ...string) string {
	t.Helper()
	var entries []string
	for _, n := range names {
		entries = append(entries, fmt.Sprintf(`{"id":%q,"name":%q,"readers":["*"]}`, n, n))
	}
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, []byte("["+strings.Join(entries, ",")+"]"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// importFile runs "plantstore import -replace" of path into dsn, or,
// with flags, "plantstore import" with those.
func importFile(t testing.TB, dsn, path string, flags ...string) {
	t.Helper()
	if flags == nil {
		flags = []string{"-replace"}
	}
	args := append(append([]string{"import"}, flags...), "-database-url", dsn, path)
	if err := run(context.Background(), args, nil, nil, io.Discard, io.Discard); err != nil {
		t.Fatalf("import %s: %v", path, err)
	}
}

// listNames returns the names GET /plants answers with token, or the
// status when it is not 200.
func listNames(t testing.TB, client *http.Client, api, token string) ([]string, int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, api+"/plants", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return nil, 0
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode
	}
	var ps []wirePlant
	if err := json.Unmarshal(body, &ps); err != nil {
		t.Fatalf("GET /plants: %s: %v", body, err)
	}
	names := []string{}
	for _, p := range ps {
		names = append(names, p.Name)
	}
	return names, http.StatusOK
}

// metricValue returns the value of the series of /metrics whose name and
// labels are series exactly, e.g. `plantstore_catalog_plants`.
func metricValue(t testing.TB, admin, series string) (float64, bool) {
	t.Helper()
	_, body, _ := get(t, admin+"/metrics", "")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	return v, err == nil
}

// TestReplicasSeeImport runs three replicas on one database, two serving
// snapshots and one reading it per request, and imports catalogs with the
// import command, replacing, upserting and adding: each must serve each
// catalog within a second of the import's start.
func TestReplicasSeeImport(t *testing.T) {
	dsn := migratedDatabase(t)
	importFile(t, dsn, writeCatalog(t, "Aloe"))
	secret := hmacSecretFile(t)
	token := hmacToken(t, secret, "reader")
	common := []string{"-jwt-hmac-secret-file", secret, "-database-url", dsn}
	replicas := map[string]*instance{
		"snapshot 1":  startServe(t, nil, append(common, "-database-poll", "1h")...),
		"snapshot 2":  startServe(t, nil, append(common, "-database-poll", "1h")...),
		"per request": startServe(t, nil, append(common, "-database-snapshot=false", "-database-poll", "100ms")...),
	}
	for _, in := range replicas {
		waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	}
	for i, st := range []struct {
		flag       string
		file, want []string
	}{
		{"-replace", []string{"Basil", "Cress"}, []string{"Basil", "Cress"}},
		{"-upsert", []string{"Cress", "Dill"}, []string{"Basil", "Cress", "Dill"}},
		{"-dry-run", []string{"Endive"}, []string{"Basil", "Cress", "Dill"}},
		{"-max-catalog-bytes=1MiB", []string{"Endive"}, []string{"Basil", "Cress", "Dill", "Endive"}},
		{"-replace", nil, []string{}},
	} {
		path := writeCatalog(t, st.file...)
		start := time.Now()
		importFile(t, dsn, path, st.flag)
		for name, in := range replicas {
			for {
				got, status := listNames(t, http.DefaultClient, in.api, token)
				if status == http.StatusOK && slices.Equal(got, st.want) {
					break
				}
				if time.Since(start) > time.Second {
					t.Fatalf("import %d (%s): %s serves %q (status %d) a second after the import started; want %q", i+1, st.flag, name, got, status, st.want)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		t.Logf("import %d (%s) of %d plants served by every replica within %v of its start", i+1, st.flag, len(st.file), time.Since(start).Round(time.Millisecond))
	}
	// The plant count on every store; the per-request one reads it at its
	// poll.
	for name, in := range replicas {
		waitFor(t, patience, name+": plantstore_catalog_plants 0", func() bool { v, ok := metricValue(t, in.admin, "plantstore_catalog_plants"); return ok && v == 0 })
	}
	for _, series := range []string{`plantstore_catalog_reloads_total{result="success"}`, `plantstore_catalog_snapshot_age_seconds`, `plantstore_db_pool_max_connections`} {
		if _, ok := metricValue(t, replicas["snapshot 1"].admin, series); !ok {
			t.Errorf("the snapshot replica's /metrics has no %s", series)
		}
	}
	if _, ok := metricValue(t, replicas["per request"].admin, `plantstore_catalog_snapshot_age_seconds`); ok {
		t.Errorf("the per-request replica reports a snapshot age")
	}
}

// TestSnapshotServeDatabaseDown serves a snapshot through a proxy that
// then cuts the database off, under the load of eight clients: no request
// fails and /readyz stays 200 while it is cut, and the catalog imported
// meanwhile is served once it is back.
func TestSnapshotServeDatabaseDown(t *testing.T) {
	dsn := migratedDatabase(t)
	importFile(t, dsn, writeCatalog(t, "Aloe"))
	px := pgtest.NewProxy(t, pgtest.ServerAddr(t, dsn))
	secret := hmacSecretFile(t)
	token := hmacToken(t, secret, "reader")
	in := startServe(t, nil, "-jwt-hmac-secret-file", secret, "-database-url", pgtest.WithHost(t, dsn, px.Addr()),
		"-database-poll", "200ms", "-db-connect-timeout", "1s")
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))

	client := loadClient(t, 8)
	var requests, failures atomic.Int64
	var fresh atomic.Bool
	stop := hammer(t, 8, func(_, _ int) {
		requests.Add(1)
		got, status := listNames(t, client, in.api, token)
		switch {
		case status != http.StatusOK:
			failures.Add(1)
		case slices.Equal(got, []string{"Basil"}):
			fresh.Store(true)
		case !slices.Equal(got, []string{"Aloe"}):
			failures.Add(1)
		}
	})
	waitFor(t, patience, "the first requests", func() bool { return requests.Load() > 0 })
	px.Cut()
	cut := requests.Load()
	waitFor(t, patience, "the log of the cut", func() bool { return strings.Contains(in.stderr.String(), "the last snapshot keeps serving") })
	if status, body, _ := get(t, in.admin+"/readyz", ""); status != http.StatusOK {
		t.Errorf("/readyz with the database cut = %d %s; want 200", status, body)
	}
	if age, ok := metricValue(t, in.admin, "plantstore_catalog_snapshot_age_seconds"); !ok || age <= 0 {
		t.Errorf("snapshot age with the database cut = %v; want above 0", age)
	}
	importFile(t, dsn, writeCatalog(t, "Basil"))
	during := requests.Load() - cut
	px.Restore()
	waitFor(t, patience, "the catalog imported while the database was cut", fresh.Load)
	stop()
	t.Logf("%d requests, %d while the database was cut; %d failed", requests.Load(), during, failures.Load())
	if failures.Load() != 0 || during < 10 {
		t.Errorf("%d of %d requests failed (%d while cut); want none, and some while cut", failures.Load(), requests.Load(), during)
	}
}

// TestSnapshotServeBeforeFirstLoad starts the service while the database
// is cut off: /plants and /readyz answer 503 until it comes back, then
// 200, without a restart.
func TestSnapshotServeBeforeFirstLoad(t *testing.T) {
	dsn := migratedDatabase(t)
	importFile(t, dsn, writeCatalog(t, "Aloe"))
	px := pgtest.NewProxy(t, pgtest.ServerAddr(t, dsn))
	px.Cut()
	secret := hmacSecretFile(t)
	token := hmacToken(t, secret, "reader")
	in := startServe(t, nil, "-jwt-hmac-secret-file", secret, "-database-url", pgtest.WithHost(t, dsn, px.Addr()),
		"-database-poll", "200ms", "-db-connect-timeout", "1s")
	waitFor(t, patience, "/readyz 503", answers(in.admin+"/readyz", http.StatusServiceUnavailable))
	status, body, h := get(t, in.api+"/plants", token)
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Errorf("GET /plants before the first snapshot = %d %s; want 503 with Retry-After", status, body)
	}
	if _, body, _ := get(t, in.admin+"/readyz", ""); !strings.Contains(string(body), "no catalog loaded yet") {
		t.Errorf("/readyz before the first snapshot says %q; want the reason", body)
	}
	px.Restore()
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	if got, status := listNames(t, http.DefaultClient, in.api, token); status != http.StatusOK || !slices.Equal(got, []string{"Aloe"}) {
		t.Errorf("GET /plants once the database is back = %d %q; want 200 [Aloe]", status, got)
	}
}

// TestServeDatabaseLeavesNoGoroutines stops a service of each database
// mode: none of their background loops outlives run.
func TestServeDatabaseLeavesNoGoroutines(t *testing.T) {
	dsn := migratedDatabase(t)
	importFile(t, dsn, writeCatalog(t, "Aloe"))
	secret := hmacSecretFile(t)
	for _, mode := range []string{"-database-snapshot=true", "-database-snapshot=false"} {
		t.Run(mode, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			in := startServe(t, nil, "-jwt-hmac-secret-file", secret, "-database-url", dsn, mode, "-database-poll", "50ms")
			waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
			if got, status := listNames(t, http.DefaultClient, in.api, hmacToken(t, secret, "reader")); status != http.StatusOK || len(got) != 1 {
				t.Fatalf("GET /plants = %d %q", status, got)
			}
			in.stop()
			if err := <-in.done; err != nil {
				t.Fatalf("run = %v", err)
			}
			in.done <- nil
			http.DefaultClient.CloseIdleConnections()
		})
	}
}

// TestReaderWarningOnSnapshotLoad imports, for a service of the -jwt-*
// flags' issuer, a catalog whose plants name a named issuer's callers:
// each snapshot load warns once for the whole catalog, never per plant,
// and a load whose readers all match is quiet.
func TestReaderWarningOnSnapshotLoad(t *testing.T) {
	dsn := migratedDatabase(t)
	var entries []string
	for i := range 40 {
		entries = append(entries, fmt.Sprintf(`{"id": "p%02d", "name": "Plant %02d", "readers": ["group@staff:gardeners"]}`, i, i))
	}
	entries = append(entries, `{"id": "open", "name": "Open", "readers": ["*", "user@staff:bob"]}`)
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, []byte("["+strings.Join(entries, ",")+"]"), 0o644); err != nil {
		t.Fatal(err)
	}
	importFile(t, dsn, path)
	in := startServe(t, nil, "-jwt-hmac-secret-file", hmacSecretFile(t), "-database-url", dsn)
	const unmatched = "the catalog names readers that no configured issuer can match; the plants they name are hidden from the callers they mean"
	l := in.stderr.WaitLine(t, "warning of the unmatched readers", func(l map[string]any) bool { return l["msg"] == unmatched })
	wantWarning(t, l, 2, []string{"user@staff:bob", "group@staff:gardeners"}, 41, 40, []string{"default"}, "configure it, or correct the name")

	// Each load checks its catalog: a second load of the same readers
	// warns again, one that matches does not.
	importFile(t, dsn, writeCatalog(t, "Ivy"), "-upsert")
	in.stderr.WaitCount(t, unmatched, 2)
	importFile(t, dsn, writeCatalog(t, "Ivy"), "-replace")
	in.stderr.WaitCount(t, "catalog snapshot loaded", 3)
	in.stop()
	<-in.done
	in.done <- nil
	if n := strings.Count(in.stderr.String(), `"msg":"`+unmatched+`"`); n != 2 {
		t.Errorf("%d warnings for three loads of 41, 42 and 1 plants; want 2", n)
	}
}
