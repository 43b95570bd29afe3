package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
	"github.com/plantstore/plantstore/plants/postgres/pgtest"
	"github.com/plantstore/plantstore/plants/storetest"
)

const firstCatalog = `[
	{"id": "rose", "name": "Rose", "tag": "red", "readers": ["*"]},
	{"id": "fern", "name": "Fern", "readers": ["group:green"]}
]`

// everyone sees every plant of the test catalogs.
var everyone = plants.Query{Caller: plants.Caller{Subject: "x", Groups: []string{"green"}}, Limit: plants.NoLimit}

func TestImport(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		second  string
		replace bool
		wantErr error
		want    []string
	}{
		{
			name:   "add",
			second: `[{"id": "ivy", "name": "Ivy", "readers": ["*"]}]`,
			want:   []string{"Fern", "Ivy", "Rose"},
		},
		{
			name:    "add with an id already stored changes nothing",
			second:  `[{"id": "ivy", "name": "Ivy", "readers": ["*"]}, {"id": "rose", "name": "Rose 2", "readers": ["*"]}]`,
			wantErr: postgres.ErrDuplicateID,
			want:    []string{"Fern", "Rose"},
		},
		{
			name:    "replace swaps the catalog",
			second:  `[{"id": "rose", "name": "Rose 2", "readers": ["*"]}]`,
			replace: true,
			want:    []string{"Rose 2"},
		},
		{
			name:    "replace with an empty catalog",
			second:  `[]`,
			replace: true,
			want:    nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dsn := seeded(t)
			err := postgres.Import(t.Context(), dsn, storetest.Catalog(t, tt.second), tt.replace)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Import(%s, replace=%v) = %v, want %v", tt.second, tt.replace, err, tt.wantErr)
			}
			got, err := collect(t, openStore(t, dsn, postgres.Options{}), everyone)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if !slices.Equal(storetest.Names(got), tt.want) {
				t.Errorf("after Import(%s, replace=%v): List = %q, want %q", tt.second, tt.replace, storetest.Names(got), tt.want)
			}
		})
	}
}

func TestImportDuplicateIDMessage(t *testing.T) {
	t.Parallel()
	dsn := migrated(t)
	c := storetest.Catalog(t, firstCatalog)
	if err := postgres.Import(t.Context(), dsn, c, false); err != nil {
		t.Fatal(err)
	}
	err := postgres.Import(t.Context(), dsn, c, false)
	if !errors.Is(err, postgres.ErrDuplicateID) || !strings.Contains(err.Error(), "fern") {
		t.Errorf("Import twice = %v, want ErrDuplicateID naming the id", err)
	}
}

func TestImportUnmigrated(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewSchema(t)
	err := postgres.Import(t.Context(), dsn, storetest.Catalog(t, firstCatalog), false)
	if err == nil || !strings.Contains(err.Error(), "migrate") {
		t.Errorf("Import into an unmigrated schema: got %v, want an error that says to migrate", err)
	}
}

// TestImportCancelled cancels the context while the rows are on their way
// to the server; the stored catalog must stay as it was.
func TestImportCancelled(t *testing.T) {
	t.Parallel()
	for _, replace := range []bool{false, true} {
		t.Run(fmt.Sprintf("replace=%v", replace), func(t *testing.T) {
			dsn := seeded(t)
			big := generatedCatalog(t, 100_000, func(i int) []string { return []string{"*"} })
			if !replace {
				// Added to a catalog that is not empty: ids of their own.
				ps := big.Plants()
				for i := range ps {
					ps[i].ID = "big-" + ps[i].ID
				}
				var err error
				if big, err = plants.NewCatalog(ps); err != nil {
					t.Fatal(err)
				}
			}
			px := pgtest.NewProxy(t, pgtest.ServerAddr(t, dsn))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			// The catalog is several MB of COPY data; cancel once 1 MB is through.
			px.WatchToServer(func(total int64) {
				if total > 1<<20 {
					cancel()
				}
			})
			err := postgres.Import(ctx, pgtest.WithHost(t, dsn, px.Addr()), big, replace)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Import cancelled mid-COPY: got %v, want context.Canceled", err)
			}
			got, err := collect(t, openStore(t, dsn, postgres.Options{}), everyone)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if want := []string{"Fern", "Rose"}; !slices.Equal(storetest.Names(got), want) {
				t.Errorf("after a cancelled Import: List = %q, want %q", storetest.Names(got), want)
			}
		})
	}
}

// TestImportReadersNotBlocked holds a replacing import in the middle of its
// COPY and lists meanwhile: readers get the old catalog at once, and the
// new one after the commit.
func TestImportReadersNotBlocked(t *testing.T) {
	t.Parallel()
	dsn := seeded(t)
	const n = 100_000
	big := generatedCatalog(t, n, func(i int) []string { return []string{"*"} })
	px := pgtest.NewProxy(t, pgtest.ServerAddr(t, dsn))
	reached, listed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	px.WatchToServer(func(total int64) {
		if total > 1<<20 {
			once.Do(func() {
				close(reached)
				<-listed // hold the COPY until the test has listed
			})
		}
	})
	done := make(chan error, 1)
	go func() { done <- postgres.Import(t.Context(), pgtest.WithHost(t, dsn, px.Addr()), big, true) }()

	s := openStore(t, dsn, postgres.Options{QueryTimeout: 2 * time.Second})
	select {
	case <-reached:
	case err := <-done:
		t.Fatalf("Import ended before the test could list: %v", err)
	}
	got, err := collect(t, s, everyone)
	close(listed)
	if want := []string{"Fern", "Rose"}; err != nil || !slices.Equal(storetest.Names(got), want) {
		t.Errorf("List during the import = %q, %v; want %q, nil", storetest.Names(got), err, want)
	}
	if err := <-done; err != nil {
		t.Fatalf("Import: %v", err)
	}
	if got, err := collect(t, s, everyone); err != nil || len(got) != n {
		t.Errorf("List after the import: %d plants, %v; want %d, nil", len(got), err, n)
	}
}

// generatedCatalog returns a catalog of n plants named "plant-<i>" with
// generated ids and the readers given by readers(i).
func generatedCatalog(t testing.TB, n int, readers func(i int) []string) *plants.Catalog {
	t.Helper()
	ps := make([]plants.Plant, n)
	for i := range ps {
		ps[i] = plants.Plant{Name: fmt.Sprintf("plant-%08d", i), Tag: "tag", Readers: readers(i)}
	}
	c, err := plants.NewCatalog(ps)
	if err != nil {
		t.Fatalf("NewCatalog: %v", err)
	}
	return c
}

// TestImportNotifies listens as a replica does: a successful import (an
// upsert too) raises the catalog version and notifies it with the schema
// once it has committed; a failed one or a dry run does neither.
func TestImportNotifies(t *testing.T) {
	t.Parallel()
	dsn := migrated(t)
	listener, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(context.Background())
	var schema string
	if err := listener.QueryRow(t.Context(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if _, err := listener.Exec(t.Context(), "LISTEN "+postgres.NotifyChannel); err != nil {
		t.Fatal(err)
	}
	// next returns the next notification about this test's schema: other
	// tests, running at the same time, import into theirs.
	next := func(wait time.Duration) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		defer cancel()
		for {
			n, err := listener.WaitForNotification(ctx)
			if err != nil {
				return "", err
			}
			if strings.HasSuffix(n.Payload, " "+schema) {
				return n.Payload, nil
			}
		}
	}
	version := func() (v, n int64) {
		if err := listener.QueryRow(t.Context(), "SELECT version, plants FROM catalog_version").Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
		return v, n
	}
	if v, n := version(); v != 1 || n != 0 {
		t.Fatalf("catalog_version of a new schema = %d, %d plants; want 1, 0", v, n)
	}
	steps := []struct {
		name        string
		catalog     string
		o           postgres.ImportOptions
		wantErr     bool
		wantVersion int64
		wantPlants  int64
	}{
		{"first import", firstCatalog, postgres.ImportOptions{}, false, 2, 2},
		{"refused import", firstCatalog, postgres.ImportOptions{}, true, 2, 2}, // the same ids again
		{"second import", `[{"id": "ivy", "name": "Ivy", "readers": ["*"]}]`, postgres.ImportOptions{}, false, 3, 3},
		{"upsert", `[{"id": "ivy", "name": "Ivy 2", "readers": ["*"]}, {"id": "oak", "name": "Oak", "readers": ["*"]}]`, postgres.ImportOptions{Mode: postgres.Upsert}, false, 4, 4},
		{"dry run", `[{"id": "moss", "name": "Moss", "readers": ["*"]}]`, postgres.ImportOptions{Mode: postgres.Replace, DryRun: true}, false, 4, 4},
	}
	for _, st := range steps {
		_, err := postgres.ImportWith(t.Context(), dsn, storetest.Catalog(t, st.catalog), st.o)
		if (err != nil) != st.wantErr {
			t.Fatalf("%s: Import = %v; want error %v", st.name, err, st.wantErr)
		}
		if v, n := version(); v != st.wantVersion || n != st.wantPlants {
			t.Errorf("%s: catalog_version = %d, %d plants; want %d, %d", st.name, v, n, st.wantVersion, st.wantPlants)
		}
		if st.wantErr || st.o.DryRun {
			if p, err := next(200 * time.Millisecond); err == nil {
				t.Errorf("%s: notification %q; want none", st.name, p)
			}
			continue
		}
		if p, err := next(5 * time.Second); err != nil || p != fmt.Sprintf("%d %s", st.wantVersion, schema) {
			t.Errorf("%s: notification %q, %v; want %q", st.name, p, err, fmt.Sprintf("%d %s", st.wantVersion, schema))
		}
	}
}

// TestImportModes imports a second file into firstCatalog (rose: Rose,
// red, "*"; fern: Fern, "group:green") in each mode, for real and as a dry
// run: the counts are what changed, or would have, and a dry run or a
// refusal changes nothing, not even the version.
func TestImportModes(t *testing.T) {
	t.Parallel()
	const second = `[
		{"id": "rose", "name": "Rose", "tag": "red", "readers": ["group:red"]},
		{"id": "fern", "name": "Fern", "readers": ["group:green"]},
		{"id": "ivy", "name": "Ivy", "readers": ["*"]}
	]`
	// loner reads through "*" and user:loner only.
	loner := plants.Query{Caller: plants.Caller{Subject: "loner"}, Limit: plants.NoLimit}
	tests := []struct {
		name      string
		file      string
		mode      postgres.ImportMode
		want      postgres.ImportResult
		wantErr   error
		wantAll   []string // names everyone reads after the import
		wantLoner []string // names loner reads
	}{
		{
			name: "add", file: `[{"id": "ivy", "name": "Ivy", "readers": ["*"]}]`, mode: postgres.Add,
			want:    postgres.ImportResult{Added: 1},
			wantAll: []string{"Fern", "Ivy", "Rose"}, wantLoner: []string{"Ivy", "Rose"},
		},
		{
			name: "add refuses a stored id", file: second, mode: postgres.Add,
			wantErr: &postgres.DuplicateIDError{ID: "fern"},
			wantAll: []string{"Fern", "Rose"}, wantLoner: []string{"Rose"},
		},
		{
			name: "add refuses plants without ids to a catalog that is not empty", file: `[{"name": "Ivy", "readers": ["*"]}]`, mode: postgres.Add,
			wantErr: postgres.ErrGeneratedIDs,
			wantAll: []string{"Fern", "Rose"}, wantLoner: []string{"Rose"},
		},
		{
			name: "upsert adds, updates and keeps", file: second, mode: postgres.Upsert,
			want:    postgres.ImportResult{Added: 1, Updated: 1, Unchanged: 1},
			wantAll: []string{"Fern", "Ivy"}, wantLoner: []string{"Ivy"},
		},
		{
			name: "upsert keeps the plants the file does not name", file: `[{"id": "rose", "name": "Rose 2", "readers": ["*"]}]`, mode: postgres.Upsert,
			want:    postgres.ImportResult{Updated: 1},
			wantAll: []string{"Fern", "Rose 2"}, wantLoner: []string{"Rose 2"},
		},
		{
			name: "upsert refuses plants without ids", file: `[{"id": "ivy", "name": "Ivy", "readers": ["*"]}, {"name": "Moss", "readers": ["*"]}]`, mode: postgres.Upsert,
			wantErr: postgres.ErrGeneratedIDs,
			wantAll: []string{"Fern", "Rose"}, wantLoner: []string{"Rose"},
		},
		{
			name: "replace", file: second, mode: postgres.Replace,
			want:    postgres.ImportResult{Added: 1, Updated: 1, Unchanged: 1},
			wantAll: []string{"Fern", "Ivy"}, wantLoner: []string{"Ivy"},
		},
		{
			name: "replace removes", file: `[{"id": "moss", "name": "Moss", "readers": ["*"]}]`, mode: postgres.Replace,
			want:    postgres.ImportResult{Added: 1, Removed: 2},
			wantAll: []string{"Moss"}, wantLoner: []string{"Moss"},
		},
		{
			name: "replace takes plants without ids", file: `[{"name": "Moss", "readers": ["*"]}, {"name": "Rose", "readers": ["*"]}]`, mode: postgres.Replace,
			want:    postgres.ImportResult{Added: 2, Removed: 2},
			wantAll: []string{"Moss", "Rose"}, wantLoner: []string{"Moss", "Rose"},
		},
	}
	for _, tt := range tests {
		for _, dry := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/dry-run=%v", tt.name, dry), func(t *testing.T) {
				t.Parallel()
				dsn := seeded(t)
				before := catalogVersion(t, dsn)
				got, err := postgres.ImportWith(t.Context(), dsn, storetest.Catalog(t, tt.file), postgres.ImportOptions{Mode: tt.mode, DryRun: dry})
				var de *postgres.DuplicateIDError
				switch want, ok := tt.wantErr.(*postgres.DuplicateIDError); {
				case ok:
					if !errors.As(err, &de) || *de != *want || !errors.Is(err, postgres.ErrDuplicateID) {
						t.Fatalf("ImportWith(%s, %v) = %v; want %v", tt.file, tt.mode, err, want)
					}
				case !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil):
					t.Fatalf("ImportWith(%s, %v) = %v; want %v", tt.file, tt.mode, err, tt.wantErr)
				}
				if err == nil && got != tt.want {
					t.Errorf("ImportWith(%s, %v, dry run %v) = %+v; want %+v", tt.file, tt.mode, dry, got, tt.want)
				}
				wantAll, wantLoner, wantVersion := tt.wantAll, tt.wantLoner, before+1
				if dry || err != nil {
					wantAll, wantLoner, wantVersion = []string{"Fern", "Rose"}, []string{"Rose"}, before
				}
				s := openStore(t, dsn, postgres.Options{})
				for _, c := range []struct {
					q    plants.Query
					want []string
				}{{everyone, wantAll}, {loner, wantLoner}} {
					ps, err := collect(t, s, c.q)
					if err != nil || !slices.Equal(storetest.Names(ps), c.want) {
						t.Errorf("after ImportWith(%v, dry run %v): %s lists %q, %v; want %q", tt.mode, dry, c.q.Caller.Subject, storetest.Names(ps), err, c.want)
					}
				}
				if v := catalogVersion(t, dsn); v != wantVersion {
					t.Errorf("after ImportWith(%v, dry run %v): catalog version %d; want %d", tt.mode, dry, v, wantVersion)
				}
			})
		}
	}
}

// TestImportWithoutIDsIntoEmptyCatalog: a file without ids is added to
// an empty catalog; a second such file is then refused.
func TestImportWithoutIDsIntoEmptyCatalog(t *testing.T) {
	t.Parallel()
	dsn := migrated(t)
	file := storetest.Catalog(t, `[{"name": "Moss", "readers": ["*"]}, {"name": "Ivy", "readers": ["*"]}]`)
	if got, err := postgres.ImportWith(t.Context(), dsn, file, postgres.ImportOptions{}); err != nil || got != (postgres.ImportResult{Added: 2}) {
		t.Fatalf("first import = %+v, %v; want 2 added", got, err)
	}
	_, err := postgres.ImportWith(t.Context(), dsn, file, postgres.ImportOptions{})
	if !errors.Is(err, postgres.ErrGeneratedIDs) || !strings.Contains(err.Error(), "2 plants of the file have none, and the catalog is not empty (2 plants)") {
		t.Errorf("second import = %v; want ErrGeneratedIDs saying the catalog holds 2 plants", err)
	}
}

// catalogVersion reads the catalog version of dsn's schema.
func catalogVersion(t testing.TB, dsn string) int64 {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var v int64
	if err := conn.QueryRow(t.Context(), "SELECT version FROM catalog_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
