package postgres

import (
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/plantstore/plantstore/plants/postgres/pgtest"
)

// TestSanitizeConnectError checks that a failed connection's error names
// the user as xxxxx where pgx and the server write it, and leaves the
// rest of the message readable, even for a one-letter user name.
func TestSanitizeConnectError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	server, err := url.Parse(pgtest.BaseDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, host string
		want       []string
	}{
		{"nothing listens", closed, []string{"`user=xxxxx database=test`", "connection refused"}},
		{"the server knows no such role", server.Host, []string{"`user=xxxxx database=test`", `role "xxxxx" does not exist`}},
	} {
		_, err := pgconn.Connect(t.Context(), "postgres://u:pw-s3cret@"+tt.host+"/test?sslmode=disable")
		if err == nil {
			t.Fatalf("%s: connected", tt.name)
		}
		got := sanitize(err).Error()
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q; want it to hold %q", tt.name, got, w)
			}
		}
		if strings.Contains(got, "pw-s3cret") || strings.Contains(got, `"u"`) || strings.Contains(got, "user=u") {
			t.Errorf("%s: %q names the user or the password", tt.name, got)
		}
	}
}
