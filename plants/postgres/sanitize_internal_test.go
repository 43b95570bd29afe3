package postgres

import (
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/plantstore/plantstore/plants/postgres/pgtest"
)

// TestSanitizeConnectError checks that a failed connection's error keeps
// the user name, so that a missing role is named, and drops the password.
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
		{"nothing listens", closed, []string{"`user=u database=test`", "connection refused"}},
		{"the server knows no such role", server.Host, []string{"`user=u database=test`", `role "u" does not exist`}},
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
		if strings.Contains(got, "pw-s3cret") {
			t.Errorf("%s: %q holds the password", tt.name, got)
		}
	}
}
