// Package redistest runs a real redis-server for tests: its own process
// on a free loopback port, without persistence, stopped when the test
// ends.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is a redis-server a test started.
type Server struct {
	t    testing.TB
	bin  string
	port int
	// password, when set, is required of every client (requirepass).
	password string
	cmd      *exec.Cmd
}

// Binary returns the path of redis-server. Without it the test is
// skipped, or fails under TEST_REQUIRE_TOOLS=1.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("TEST_REQUIRE_TOOLS") == "1" {
			t.Fatalf("redis-server is required (TEST_REQUIRE_TOOLS=1): %v", err)
		}
		t.Skipf("redis-server not found: %v", err)
	}
	return bin
}

// Start starts a redis-server on a free port of 127.0.0.1 and stops it
// when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartAuth(t, "")
}

// StartAuth is Start with a server that requires password of its clients
// ("" for none).
func StartAuth(t testing.TB, password string) *Server {
	t.Helper()
	s := &Server{t: t, bin: Binary(t), port: freePort(t), password: password}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's redis:// URL, with its password.
func (s *Server) URL() string {
	if s.password != "" {
		return "redis://:" + s.password + "@" + s.Addr()
	}
	return "redis://" + s.Addr()
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Start starts the server again on its port after Stop, and waits until
// it answers.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		s.t.Fatal("redistest: server already running")
	}
	dir := s.t.TempDir()
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--protected-mode", "no"}
	if s.password != "" {
		args = append(args, "--requirepass", s.password)
	}
	s.cmd = exec.Command(s.bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = nil, nil
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("redistest: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := s.ping(); err == nil {
			return
		} else if time.Now().After(deadline) {
			s.Stop()
			s.t.Fatalf("redistest: redis-server on %s does not answer: %v", s.Addr(), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ping sends PING (after AUTH, with a password) on a new connection and
// reads PONG.
func (s *Server) ping() error {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	cmds := "PING\r\n"
	if s.password != "" {
		cmds = "AUTH " + s.password + "\r\n" + cmds
	}
	if _, err := c.Write([]byte(cmds)); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err == nil && s.password != "" {
		line, err = r.ReadString('\n')
	}
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("answer %q", line)
	}
	return nil
}

// Stop kills the server (resuming it first if paused) and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Pause stops the process with SIGSTOP: connections stay open and calls
// hang until Resume.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	if s.cmd == nil {
		s.t.Fatal("redistest: server not running")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: %v", err)
	}
}

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
