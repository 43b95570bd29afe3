package pgtest_test

import (
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/plantstore/plantstore/plants/postgres/pgtest"
)

// TestSummary points the tests at a port where no server listens: a test
// that asks for the database is skipped, and the summary, empty before,
// then counts it and says why and how to give the tests a server.
func TestSummary(t *testing.T) {
	closed := closedAddr(t)
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
	for _, want := range []string{"1 test was skipped: ", "no PostgreSQL answered at " + closed, "docs/postgres.md", "set TEST_DATABASE_URL"} {
		if !strings.Contains(s, want) {
			t.Errorf("Summary() = %q; want it to hold %q", s, want)
		}
	}
}

// TestCheck gives Check each way a connection fails, and wants each told
// apart, with its fix: no server, a server without the database, a role
// it does not know, a password it refuses. The first three are the real
// server of TEST_DATABASE_URL; that server trusts every local connection
// (no password is ever asked), so the refused password comes from a
// stand-in that speaks the protocol's start: it asks pgx for a cleartext
// password and answers as PostgreSQL does, FATAL 28P01.
func TestCheck(t *testing.T) {
	base := pgtest.BaseDSN(t)
	closed := closedAddr(t)
	refuser := passwordRefuser(t)
	tests := []struct {
		name string
		dsn  string
		want []string // parts of the error; none for nil
	}{
		{"the server and its database", base, nil},
		{"no server", "postgres://postgres@" + closed + "/test?sslmode=disable&connect_timeout=2",
			[]string{"no PostgreSQL answered at " + closed, "connection refused", "start one (docs/postgres.md runs one in a container), or set TEST_DATABASE_URL"}},
		{"no such database", with(t, base, "", "plantstore_no_such_database"),
			[]string{`has no database "plantstore_no_such_database" (SQLSTATE 3D000)`, "create it (createdb -h ", " plantstore_no_such_database)", "or set TEST_DATABASE_URL to a database that exists"}},
		{"no such role", with(t, base, "plantstore_no_such_role", ""),
			[]string{`refused role "plantstore_no_such_role": role "plantstore_no_such_role" does not exist (SQLSTATE 28000)`, "set the user of TEST_DATABASE_URL to a role that may log in"}},
		{"wrong password", "postgres://postgres:s3cret@" + refuser + "/test?sslmode=disable",
			[]string{`the PostgreSQL at ` + refuser + ` refused the password of role "postgres" (SQLSTATE 28P01)`, "put the role's password in TEST_DATABASE_URL (postgres://postgres:PASSWORD@" + refuser + "/test) or in ~/.pgpass"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pgtest.Check(t.Context(), tt.dsn)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Check(%s) = %v; want nil", redact(tt.dsn), err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check(%s) = nil; want an error holding %q", redact(tt.dsn), tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check(%s) = %q; want it to hold %q", redact(tt.dsn), err, w)
				}
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Check(%s) = %q; it repeats the password", redact(tt.dsn), err)
			}
		})
	}
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// with returns dsn with another user and database, each when not "".
func with(t *testing.T, dsn, user, database string) string {
	t.Helper()
	if !strings.Contains(dsn, "://") {
		if user != "" {
			dsn += " user=" + user
		}
		if database != "" {
			dsn += " dbname=" + database
		}
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse test DSN: %v", err)
	}
	if user != "" {
		u.User = url.User(user)
	}
	if database != "" {
		u.Path = "/" + database
	}
	return u.String()
}

// redact returns dsn without its password, for a failure message.
func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		u.User = url.User(u.User.Username())
		return u.String()
	}
	return dsn
}

// passwordRefuser listens on loopback as a PostgreSQL server that asks
// every client for a cleartext password and refuses it as a server with
// password authentication does, and returns its address.
func passwordRefuser(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				// A client that gave up early fails the test by what it
				// reports, which the test checks.
				_ = refusePassword(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// refusePassword plays the server's side of one connection's start.
func refusePassword(c net.Conn) error {
	b := pgproto3.NewBackend(c, c)
	msg, err := b.ReceiveStartupMessage()
	if err != nil {
		return err
	}
	start, ok := msg.(*pgproto3.StartupMessage)
	if !ok {
		return errors.New("the client did not start with a StartupMessage")
	}
	b.Send(&pgproto3.AuthenticationCleartextPassword{})
	if err := b.Flush(); err != nil {
		return err
	}
	if err := b.SetAuthType(pgproto3.AuthTypeCleartextPassword); err != nil {
		return err
	}
	if _, err := b.Receive(); err != nil {
		return err
	}
	b.Send(&pgproto3.ErrorResponse{
		Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "28P01",
		Message: `password authentication failed for user "` + start.Parameters["user"] + `"`,
	})
	return b.Flush()
}
