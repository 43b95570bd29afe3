// Package pgtest gives tests a real PostgreSQL: a fresh schema per test on
// the server at TEST_DATABASE_URL (default the local test database), and a
// TCP proxy that can cut the connection to it.
//
// Tests skip when the server cannot be reached or refuses them, unless
// TEST_REQUIRE_DB=1, which .ci/run sets: then they fail. Either way the
// message tells a server that did not answer from a database that does not
// exist and from a refused login, with the fix for each. [Main] ends the
// test run with the number skipped and why.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/plantstore/plantstore/observability/testenv"
)

// DefaultDSN is the server tests use unless TEST_DATABASE_URL names
// another.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// BaseDSN returns the test server's DSN. It skips the test when the server
// cannot be reached or refuses the connection, with [Check]'s reason and
// fix, unless TEST_REQUIRE_DB=1, which makes that a failure.
func BaseDSN(t testing.TB) string {
	t.Helper()
	dsn := dsnOf()
	if err := Check(t.Context(), dsn); err != nil {
		if os.Getenv("TEST_REQUIRE_DB") == "1" {
			t.Fatalf("%v (TEST_REQUIRE_DB=1 makes this a failure)", err)
		}
		skipped.Add(1)
		why.CompareAndSwap(nil, &err)
		t.Skip(err)
	}
	return dsn
}

var (
	// skipped counts the tests of this test binary that BaseDSN skipped,
	// and why holds the reason of the first.
	skipped atomic.Int64
	why     atomic.Pointer[error]
)

// Check connects to the server of dsn and returns nil, or an error that
// says which of these it met, and what to do about it: no server
// answered; the server has no such database (SQLSTATE 3D000); it refused
// the password (28P01) or the role (28000); or another refusal. The error
// names the server, the role and the database, never the password.
func Check(ctx context.Context, dsn string) error {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("TEST_DATABASE_URL is not a PostgreSQL DSN: %v", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		return conn.Close(context.Background())
	}
	where := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	var (
		pe  *pgconn.PgError
		ope *net.OpError
	)
	switch {
	case errors.As(err, &pe) && pe.Code == "3D000":
		return fmt.Errorf("the PostgreSQL at %s has no database %q (SQLSTATE 3D000): create it (createdb -h %s -p %d -U %s %s), or set TEST_DATABASE_URL to a database that exists",
			where, cfg.Database, cfg.Host, cfg.Port, cfg.User, cfg.Database)
	case errors.As(err, &pe) && pe.Code == "28P01":
		return fmt.Errorf("the PostgreSQL at %s refused the password of role %q (SQLSTATE 28P01): put the role's password in TEST_DATABASE_URL (postgres://%s:PASSWORD@%s/%s) or in ~/.pgpass",
			where, cfg.User, cfg.User, where, cfg.Database)
	case errors.As(err, &pe) && pe.Code == "28000":
		return fmt.Errorf("the PostgreSQL at %s refused role %q: %s (SQLSTATE 28000): set the user of TEST_DATABASE_URL to a role that may log in to %q from here (the server's pg_hba.conf says which)",
			where, cfg.User, pe.Message, cfg.Database)
	case errors.As(err, &pe):
		return fmt.Errorf("the PostgreSQL at %s refused the connection as role %q to database %q: %s (SQLSTATE %s)", where, cfg.User, cfg.Database, pe.Message, pe.Code)
	case errors.As(err, &ope) && ope.Op == "dial":
		return fmt.Errorf("no PostgreSQL answered at %s (%v): start one (docs/postgres.md runs one in a container), or set TEST_DATABASE_URL to a server's DSN (default %s)", where, ope.Err, DefaultDSN)
	}
	return fmt.Errorf("cannot connect to the PostgreSQL at %s: %v", where, err)
}

// Main runs the tests of m, as a TestMain does, and when some were
// skipped for want of a database, ends with one line that says how many,
// why and what to do, where the reader of a passing run sees it
// ([testenv.Print]); a run that skipped none prints nothing. It returns
// the exit status for os.Exit.
func Main(m *testing.M) int {
	code := m.Run()
	testenv.Print(Summary())
	return code
}

// Summary returns the line Main prints, or "" when no test was skipped:
// how many tests were skipped, and the reason [Check] gave for the first.
func Summary() string {
	n := skipped.Load()
	if n == 0 {
		return ""
	}
	tests := "tests were"
	if n == 1 {
		tests = "test was"
	}
	reason := "the test database did not answer"
	if err := why.Load(); err != nil {
		reason = (*err).Error()
	}
	return fmt.Sprintf("%d %s skipped: %s.", n, tests, reason)
}

// dsnOf returns TEST_DATABASE_URL, or DefaultDSN.
func dsnOf() string {
	if dsn := os.Getenv("TEST_DATABASE_URL"); dsn != "" {
		return dsn
	}
	return DefaultDSN
}

// NewSchema creates an empty schema for this test only, dropped when the
// test ends, and returns a DSN whose search_path selects it.
func NewSchema(t testing.TB) string {
	t.Helper()
	dsn := BaseDSN(t)
	b := make([]byte, 6)
	rand.Read(b)
	schema := "plantstore_test_" + hex.EncodeToString(b)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return WithParam(t, dsn, "search_path", schema)
}

// WithParam returns dsn with a connection parameter set, in URL or
// key=value form.
func WithParam(t testing.TB, dsn, key, value string) string {
	t.Helper()
	if !strings.Contains(dsn, "://") {
		return dsn + " " + key + "=" + value
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse test DSN: %v", err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// WithHost returns dsn pointed at addr (host:port) instead of its server.
func WithHost(t testing.TB, dsn, addr string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dsn, "://") {
		return dsn + " host=" + host + " port=" + port
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse test DSN: %v", err)
	}
	u.Host = addr
	return u.String()
}

// ServerAddr returns the host:port of dsn's server.
func ServerAddr(t testing.TB, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parse test DSN: %v", err)
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}

// Proxy is a TCP proxy to a server that a test can cut and restore, to
// simulate the database going down and coming back without touching the
// shared server.
type Proxy struct {
	ln       net.Listener
	upstream string

	// FromServer and ToServer count the bytes each way.
	FromServer, ToServer atomic.Int64

	mu         sync.Mutex
	onToServer func(total int64) // called as bytes go to the server
	down       bool
	conns      map[net.Conn]struct{}
	wg         sync.WaitGroup
}

// NewProxy returns a proxy on 127.0.0.1 to upstream (host:port), stopped
// when the test ends.
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, upstream: upstream, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.conns[u] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(c, u, &p.FromServer, nil)
		go p.pipe(u, c, &p.ToServer, p.onToServer)
	}
}

func (p *Proxy) pipe(dst, src net.Conn, count *atomic.Int64, onData func(int64)) {
	defer p.wg.Done()
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			total := count.Add(int64(n))
			if onData != nil {
				onData(total)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Cut closes every proxied connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

// WatchToServer sets a function called with the running total of bytes sent
// to the server, for connections accepted from now on.
func (p *Proxy) WatchToServer(f func(total int64)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onToServer = f
}

// Restore lets new connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}
