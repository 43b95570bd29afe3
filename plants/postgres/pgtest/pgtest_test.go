package pgtest_test

import (
	"net"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/plants/postgres/pgtest"
)

// TestSummary points the tests at a port where no server listens: a test
// that asks for the database is skipped, and the summary, empty before,
// then counts it and says how to give the tests a server.
func TestSummary(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	t.Setenv("TEST_DATABASE_URL", "postgres://postgres@"+closed+"/test?sslmode=disable&connect_timeout=2")
	t.Setenv("TEST_REQUIRE_DB", "")
	if s := pgtest.Summary(); s != "" {
		t.Fatalf("Summary() before any skip = %q; want nothing", s)
	}
	skipped := false
	t.Run("needs a database", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		pgtest.BaseDSN(t)
	})
	if !skipped {
		t.Fatal("BaseDSN did not skip the test without a server")
	}
	s := pgtest.Summary()
	for _, want := range []string{"1 test was skipped", "no PostgreSQL answered at " + closed, "Set TEST_DATABASE_URL"} {
		if !strings.Contains(s, want) {
			t.Errorf("Summary() = %q; want it to hold %q", s, want)
		}
	}
}
