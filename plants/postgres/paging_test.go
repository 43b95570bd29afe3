package postgres_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
	"github.com/plantstore/plantstore/plants/storetest"
)

// planNode is a node of EXPLAIN (FORMAT JSON).
type planNode struct {
	Type      string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	IndexName string     `json:"Index Name"`
	IndexCond string     `json:"Index Cond"`
	Filter    string     `json:"Filter"`
	Rows      float64    `json:"Actual Rows"`
	Loops     float64    `json:"Actual Loops"`
	Plans     []planNode `json:"Plans"`
}

// explainPlan returns the executed plan of sql with args as a prepared
// statement runs it, in the plan_cache_mode of conn: EXPLAIN of sql with
// bound parameters would plan them as constants, a custom plan, whatever
// the mode; EXPLAIN EXECUTE of a prepared statement takes the mode's plan.
func explainPlan(t *testing.T, conn *pgx.Conn, sql string, args ...any) planNode {
	t.Helper()
	if _, err := conn.Exec(t.Context(), "PREPARE explained AS "+sql); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(t.Context(), "DEALLOCATE explained")
	literals := make([]string, len(args))
	for i, a := range args {
		switch a := a.(type) {
		case string:
			literals[i] = quoteLiteral(a)
		case []string:
			quoted := make([]string, len(a))
			for j, s := range a {
				quoted[j] = quoteLiteral(s)
			}
			literals[i] = "ARRAY[" + strings.Join(quoted, ", ") + "]::text[]"
		default:
			literals[i] = fmt.Sprint(a)
		}
	}
	var out []byte
	if err := conn.QueryRow(t.Context(), "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE explained("+strings.Join(literals, ", ")+")").Scan(&out); err != nil {
		t.Fatal(err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN output %s: %v", out, err)
	}
	return plans[0].Plan
}

// quoteLiteral returns s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// walkPlan calls f on every node of n.
func walkPlan(n planNode, f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		walkPlan(c, f)
	}
}

// TestPagingPlan: a page deep in the catalog starts each principal's
// index range at the cursor (the key is an Index Cond of the primary key
// of plant_readers, not a filter over the rows before it), reads no more
// rows than the page needs per principal, and sorts nothing but those: the
// plan of the per-request store never sorts the catalog.
func TestPagingPlan(t *testing.T) {
	t.Parallel()
	const n = 20_000
	dsn := migrated(t)
	c := storetest.LargeCatalog(t, n, "plant")
	if err := postgres.Import(t.Context(), dsn, c, false); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	deep := plants.KeyOf(c.Plants()[n*9/10])
	caller := plants.Caller{Subject: "u1", Groups: []string{"half", "g7"}}
	ps := caller.Principals()
	const limit = 10
	check := func(what string, plan planNode, maxRowsPerLoop float64, sortAllowed bool) {
		t.Helper()
		scans := 0
		walkPlan(plan, func(n planNode) {
			switch {
			case n.Relation == "plant_readers" || n.Relation == "plants": // catalog_version is one row
				scans++
				if n.Type != "Index Only Scan" && n.Type != "Index Scan" || n.IndexName != "plant_readers_pkey" {
					t.Errorf("%s: %s on %s (%s); want an index scan of plant_readers_pkey", what, n.Type, n.Relation, n.IndexName)
				}
				if !strings.Contains(n.IndexCond, "ROW(name, plant_id) >") || n.Filter != "" {
					t.Errorf("%s: index cond %q, filter %q; want the cursor in the index cond", what, n.IndexCond, n.Filter)
				}
				if maxRowsPerLoop > 0 && n.Rows > maxRowsPerLoop {
					t.Errorf("%s: the index scan read %v rows per loop; want at most %v", what, n.Rows, maxRowsPerLoop)
				}
			case n.Type == "Sort":
				if !sortAllowed {
					t.Errorf("%s: a Sort node", what)
				}
				if n.Rows > float64(len(ps)*(limit+1)) {
					t.Errorf("%s: a Sort of %v rows; want at most %d", what, n.Rows, len(ps)*(limit+1))
				}
			}
		})
		if scans == 0 {
			t.Errorf("%s: no scan of plant_readers in the plan", what)
		}
	}
	args := []any{int64(0), false, deep.Name, deep.ID}
	for _, p := range ps {
		args = append(args, p)
	}
	// The plan of the first five runs of a prepared statement, and the
	// generic one PostgreSQL may settle on after them.
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(t.Context(), "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		check(mode+", limited", explainPlan(t, conn, postgres.ListLimitedSQL, ps, int64(0), false, int64(limit), deep.Name, deep.ID), limit, true)
		check(mode+", no limit", explainPlan(t, conn, postgres.ListSQL(len(ps)), args...), 0, false)
	}

	// And the store's answer is the page after the key.
	s := openStore(t, dsn, postgres.Options{})
	got, err := collect(t, s, plants.Query{Caller: caller, Limit: limit, After: deep})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range c.Plants() {
		if len(want) < limit && plants.KeyOf(p).Compare(deep) > 0 && plants.Readable(p.Readers, caller) {
			want = append(want, p.Name)
		}
	}
	if fmt.Sprint(storetest.Names(got)) != fmt.Sprint(want) {
		t.Errorf("page after %q: %q; want %q", deep.Name, storetest.Names(got), want)
	}
}
