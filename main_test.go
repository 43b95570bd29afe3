package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/plantstore/plantstore/observability/logtest"
	"github.com/plantstore/plantstore/observability/testenv"
	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres/pgtest"
)

func TestMain(m *testing.M) {
	if args := os.Getenv(childArgsVar); args != "" {
		os.Exit(childMain(args))
	}
	gin.SetMode(gin.TestMode)
	code := m.Run()
	if code == 0 {
		code = logsChecked.report()
	}
	testenv.Print(testenv.Summary(), pgtest.Summary())
	os.Exit(code)
}

// logsChecked counts the log lines that the services the tests start
// wrote, in process (startLogging) and as a process of their own
// (startChild): each went through a logtest.Checker, which fails the test
// that wrote it unless it is one JSON object with unique keys.
var logsChecked checkedLogs

type checkedLogs struct {
	mu    sync.Mutex
	lines int
	msgs  map[string]int
}

// check makes w check what it is given, and count it, at the end of t.
func (l *checkedLogs) check(t testing.TB, w io.Writer) io.Writer {
	out, _ := l.checker(t, w)
	return out
}

// checker is check, which also returns the Checker.
func (l *checkedLogs) checker(t testing.TB, w io.Writer) (io.Writer, *logtest.Checker) {
	c := &logtest.Checker{Allowed: isExitMessage}
	t.Cleanup(func() {
		c.Check(t)
		n, msgs := c.Lines()
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines += n
		if l.msgs == nil {
			l.msgs = map[string]int{}
		}
		for k, v := range msgs {
			l.msgs[k] += v
		}
	})
	return io.MultiWriter(w, c), c
}

// report says how many lines were checked, and fails a run of the whole
// package (no -run) in which the lines every run writes were not seen: the
// check would then have been cut off from the services.
func (l *checkedLogs) report() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if testing.Verbose() {
		fmt.Printf("log lines checked: %d, of %d messages\n", l.lines, len(l.msgs))
	}
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
		for _, msg := range []string{"listening", "request", "stopped"} {
			if l.msgs[msg] == 0 {
				fmt.Printf("FAIL: no log line %q was checked for unique keys\n", msg)
				return 1
			}
		}
	}
	return 0
}

// isExitMessage reports whether line is what main writes to stderr when
// the command fails ("plantstore: ..."), which is no log line.
func isExitMessage(line string) bool { return strings.HasPrefix(line, "plantstore: ") }

// childArgsVar makes this test binary run the command it holds (JSON
// arguments) instead of the tests: a service in a process of its own, for
// the tests that send it signals or read its memory.
const childArgsVar = "TEST_CHILD_ARGS"

// childMain runs the command in the JSON list args as main does, and
// returns the exit status.
func childMain(args string) int {
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	gin.SetMode(gin.ReleaseMode)
	var environ []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, childArgsVar+"=") {
			environ = append(environ, kv)
		}
	}
	err := run(context.Background(), argv, environ, os.Stdin, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "plantstore:", err)
	}
	return exitStatus(err)
}

// child is a service running in a process of its own (see childMain).
type child struct {
	cmd        *exec.Cmd
	api, admin string
	stderr     *logtest.Buffer
	done       chan error // the process's exit
}

// startChild starts "serve" with args on loopback ports in a new process
// and waits until it has logged its listening addresses. The process is
// killed at the end of the test if it still runs.
func startChild(t testing.TB, env map[string]string, args ...string) *child {
	t.Helper()
	full := append([]string{"serve", "-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0"}, args...)
	argv, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: exec.Command(os.Args[0]), stderr: &logtest.Buffer{}, done: make(chan error, 1)}
	c.cmd.Env = append(envOf(env), childArgsVar+"="+string(argv), "PATH="+os.Getenv("PATH"))
	var checker *logtest.Checker
	c.cmd.Stderr, checker = logsChecked.checker(t, c.stderr)
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.done
		c.done <- nil
		// Killed, it may have been cut in the middle of a line (the
		// access log is written in buffered chunks): that is what a
		// crash loses, not a bad line.
		checker.DropPartial()
	})
	line := c.stderr.WaitLine(t, "listening", func(l map[string]any) bool { return l["msg"] == "listening" })
	c.api = "http://" + line["api_addr"].(string)
	c.admin = "http://" + line["admin_addr"].(string)
	return c
}

// signal sends sig to the child.
func (c *child) signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// wait waits up to 30 s for the child to exit and returns its status.
func (c *child) wait(t testing.TB) int {
	t.Helper()
	select {
	case err := <-c.done:
		c.done <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		t.Fatalf("the service did not exit within 30s; its log:\n%s", c.stderr)
		return -1
	}
}

// status reads a field of /proc/PID/status of the child, in KiB.
func (c *child) status(t testing.TB, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("%s %q: %v", field, v, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/PID/status", field)
	return 0
}

// instance is a service started by startServe.
type instance struct {
	api, admin string // base URLs
	stdout     *logtest.Buffer
	stderr     *logtest.Buffer
	stop       context.CancelFunc
	done       chan error
}

// envOf returns env as os.Environ lists an environment.
func envOf(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// startServe runs "serve" with args on loopback ports and waits until the
// service has logged its listening addresses. The service is stopped at the
// end of the test.
func startServe(t testing.TB, env map[string]string, args ...string) *instance {
	t.Helper()
	stderr := &logtest.Buffer{}
	return startLogging(t, env, stderr, stderr, args...)
}

// startLogging is startServe with the service's log written to logTo and
// read back, for the listening line and by the test, from view.
func startLogging(t testing.TB, env map[string]string, logTo io.Writer, view *logtest.Buffer, args ...string) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{stdout: &logtest.Buffer{}, stderr: view, stop: cancel, done: make(chan error, 1)}
	full := append([]string{"serve", "-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0", "-shutdown-delay", "0s"}, args...)
	logTo = logsChecked.check(t, logTo)
	go func() { in.done <- run(ctx, full, envOf(env), strings.NewReader(""), in.stdout, logTo) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-in.done:
		case <-time.After(30 * time.Second):
			t.Errorf("service did not stop within 30s")
		}
	})
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		for _, line := range logLines(t, view.String()) {
			if line["msg"] == "listening" {
				in.api = "http://" + line["api_addr"].(string)
				in.admin = "http://" + line["admin_addr"].(string)
				return in
			}
		}
		select {
		case <-view.Written():
		case err := <-in.done:
			in.done <- err
			t.Fatalf("serve %q ended before listening: %v\nstderr:\n%s", args, err, view)
		case <-timeout.C:
			t.Fatalf("serve %q did not log its addresses within 30s; stderr:\n%s", args, view)
		}
	}
}

// logLines decodes the JSON log lines in s.
func logLines(t testing.TB, s string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err == nil {
			lines = append(lines, m)
		}
	}
	return lines
}

// get sends GET url with an optional bearer token and returns the status
// and body.
func get(t testing.TB, url, token string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, body, resp.Header
}

type wirePlant struct {
	Name string `json:"name"`
	Tag  string `json:"tag,omitempty"`
}

// expectedPlants lists, by the access rule and apart from any store, what
// caller may read in c.
func expectedPlants(c *plants.Catalog, caller plants.Caller) []wirePlant {
	out := []wirePlant{}
	for _, p := range c.Plants() {
		if plants.Readable(p.Readers, caller) {
			out = append(out, wirePlant{p.Name, p.Tag})
		}
	}
	return out
}

// patience is how long a test waits for what should happen within moments
// before it fails.
const patience = 30 * time.Second

// waitFor polls cond every 10 ms until it reports true, and fails the test
// after limit, naming what it waited for. It is the one wait of these
// tests: what they wait for is a condition, never a fixed sleep.
func waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// answers returns a condition for waitFor: GET url answers want.
func answers(url string, want int) func() bool {
	return func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == want
	}
}
