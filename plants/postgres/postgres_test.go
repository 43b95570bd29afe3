package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
)

const defaultTestDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// baseDSN returns the test server's DSN. It skips the test when the server
// cannot be reached, unless PLANTSTORE_REQUIRE_DB=1, which makes that a
// failure.
func baseDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("PLANTSTORE_TEST_DATABASE_URL")
	if dsn == "" {
		dsn = defaultTestDSN
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		if os.Getenv("PLANTSTORE_REQUIRE_DB") == "1" {
			t.Fatalf("test database unreachable (PLANTSTORE_REQUIRE_DB=1): %v", err)
		}
		t.Skipf("test database unreachable (set PLANTSTORE_TEST_DATABASE_URL): %v", err)
	}
	conn.Close(context.Background())
	return dsn
}

// newSchema creates an empty schema for this test only, dropped when the test
// ends, and returns a DSN whose search_path selects it.
func newSchema(t testing.TB) string {
	t.Helper()
	dsn := baseDSN(t)
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
	return withParam(t, dsn, "search_path", schema)
}

// withParam returns dsn with a connection parameter set, in URL or
// key=value form.
func withParam(t testing.TB, dsn, key, value string) string {
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

// withHost returns dsn pointed at addr (host:port) instead of its server.
func withHost(t testing.TB, dsn, addr string) string {
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

// serverAddr returns the host:port of dsn's server.
func serverAddr(t testing.TB, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parse test DSN: %v", err)
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}

// migrated returns a DSN for a fresh, migrated schema.
func migrated(t testing.TB) string {
	t.Helper()
	dsn := newSchema(t)
	if err := postgres.Migrate(t.Context(), dsn); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return dsn
}

// mustCatalog parses a catalog from JSON.
func mustCatalog(t testing.TB, js string) *plants.Catalog {
	t.Helper()
	c, err := plants.ParseCatalog(strings.NewReader(js), "test.json")
	if err != nil {
		t.Fatalf("ParseCatalog: %v", err)
	}
	return c
}

// openStore opens a Store on dsn, closed when the test ends.
func openStore(t testing.TB, dsn string, o postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), dsn, o, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// collect drains a List sequence.
func collect(t testing.TB, s plants.Store, q plants.Query) ([]plants.Plant, error) {
	t.Helper()
	var got []plants.Plant
	for p, err := range s.List(t.Context(), q) {
		if err != nil {
			return got, err
		}
		got = append(got, p)
	}
	return got, nil
}

// names returns the plant names of ps.
func names(ps []plants.Plant) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// proxy is a TCP proxy to a server that a test can cut and restore, to
// simulate the database going down and coming back without touching the
// shared server.
type proxy struct {
	ln       net.Listener
	upstream string

	// fromServer and toServer count the bytes each way.
	fromServer, toServer atomic.Int64

	mu         sync.Mutex
	onToServer func(total int64) // called as bytes go to the server
	down       bool
	conns      map[net.Conn]struct{}
	wg         sync.WaitGroup
}

func newProxy(t testing.TB, upstream string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, upstream: upstream, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
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
		go p.pipe(c, u, &p.fromServer, nil)
		go p.pipe(u, c, &p.toServer, p.onToServer)
	}
}

func (p *proxy) pipe(dst, src net.Conn, count *atomic.Int64, onData func(int64)) {
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

// cut closes every proxied connection and refuses new ones until restore.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

// watchToServer sets a function called with the running total of bytes sent
// to the server, for connections accepted from now on.
func (p *proxy) watchToServer(f func(total int64)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onToServer = f
}

// restore lets new connections through again.
func (p *proxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// wantUnavailable fails the test unless err wraps plants.ErrUnavailable.
func wantUnavailable(t testing.TB, what string, err error) {
	t.Helper()
	if !errors.Is(err, plants.ErrUnavailable) {
		t.Errorf("%s: got error %v, want one wrapping plants.ErrUnavailable", what, err)
	}
}
