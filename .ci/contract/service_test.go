package contract_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// binary is the plantstore executable under test: $TEST_PLANTSTORE_BIN, or one
// built from ../.. by TestMain.
var binary string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	binary = os.Getenv("TEST_PLANTSTORE_BIN")
	if binary == "" {
		dir, err := os.MkdirTemp("", "plantstore-contract-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "plantstore")
		build := exec.Command("go", "build", "-o", binary, ".")
		build.Dir = filepath.Join("..", "..")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "building plantstore in %s: %v\n", build.Dir, err)
			return 1
		}
	}
	if abs, err := filepath.Abs(binary); err == nil {
		binary = abs
	}
	return m.Run()
}

// service is one running plantstore process.
type service struct {
	// API and Admin are base URLs, e.g. http://127.0.0.1:41234.
	API, Admin string
	// AdminAddr is the admin listener's host:port.
	AdminAddr string
	// Tokens maps each -dev sample user to its printed bearer token, in
	// banner order in Users.
	Tokens map[string]string
	Users  []string
	// Stderr is the file the service logs to.
	Stderr string
}

// listening is the log line that names the bound addresses.
type listening struct {
	Msg       string `json:"msg"`
	APIAddr   string `json:"api_addr"`
	AdminAddr string `json:"admin_addr"`
}

var (
	bannerUser = regexp.MustCompile(`^# (\S+) \(reads as `)
	bannerCurl = regexp.MustCompile(`^curl -sS -w '\\n' -H 'Authorization: Bearer ([A-Za-z0-9._-]+)' (http://\S+)/plants$`)
)

// startService runs "plantstore serve" on free 127.0.0.1 ports with args
// added, waits until /readyz answers 200, and stops it (SIGTERM, then a
// check for exit status 0) when the test ends.
func startService(t testing.TB, args ...string) *service {
	t.Helper()
	return launch(t, true, args...)
}

// startUnready is startService for a service that cannot become ready (its
// store is down): it waits only for the "listening" log line.
func startUnready(t testing.TB, args ...string) *service {
	t.Helper()
	return launch(t, false, args...)
}

func launch(t testing.TB, ready bool, args ...string) *service {
	t.Helper()
	dir := t.TempDir()
	outPath, errPath := filepath.Join(dir, "stdout"), filepath.Join(dir, "stderr")
	stdout, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(errPath)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()

	full := append([]string{"serve", "-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0", "-shutdown-delay", "0s"}, args...)
	cmd := exec.Command(binary, full...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s %s: %v", binary, strings.Join(full, " "), err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { stop(t, cmd, exited, errPath) })

	var addrs listening
	deadline := time.Now().Add(15 * time.Second)
	for addrs.APIAddr == "" {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("plantstore %s exited before listening: %v\nstderr:\n%s", strings.Join(full, " "), err, readFile(t, errPath))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("plantstore %s: no \"listening\" log line within 15s\nstderr:\n%s", strings.Join(full, " "), readFile(t, errPath))
		}
		addrs = findListening(readFile(t, errPath))
		if addrs.APIAddr == "" {
			time.Sleep(20 * time.Millisecond)
		}
	}
	s := &service{
		API:       "http://" + addrs.APIAddr,
		Admin:     "http://" + addrs.AdminAddr,
		AdminAddr: addrs.AdminAddr,
		Tokens:    map[string]string{},
		Stderr:    errPath,
	}
	for _, a := range []string{addrs.APIAddr, addrs.AdminAddr} {
		host, _, err := net.SplitHostPort(a)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("listening on %q, want 127.0.0.1:<port>", a)
		}
	}
	if ready {
		waitReady(t, s.Admin+"/readyz")
	}

	// The -dev banner is written before the API starts serving, so once
	// /readyz answers the file holds all of it.
	if ready && hasArg(args, "-dev") {
		s.Users, s.Tokens = parseBanner(t, readFile(t, outPath), s.API)
		if len(s.Users) == 0 {
			t.Fatalf("plantstore -dev printed no token lines on stdout:\n%s", readFile(t, outPath))
		}
	}
	return s
}

func hasArg(args []string, name string) bool {
	for _, a := range args {
		if a == name {
			return true
		}
	}
	return false
}

func findListening(log string) listening {
	for line := range strings.SplitSeq(log, "\n") {
		var l listening
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "listening" && l.APIAddr != "" && l.AdminAddr != "" {
			return l
		}
	}
	return listening{}
}

// parseBanner reads the -dev banner: "# <user> (reads as ...)" followed by a
// curl line with the user's token and the API's base URL.
func parseBanner(t testing.TB, out, api string) ([]string, map[string]string) {
	t.Helper()
	var users []string
	tokens := map[string]string{}
	user := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := bannerUser.FindStringSubmatch(line); m != nil {
			user = m[1]
			continue
		}
		if m := bannerCurl.FindStringSubmatch(line); m != nil && user != "" {
			if m[2] != api {
				t.Errorf("-dev banner: curl line for %s targets %s, want %s", user, m[2], api)
			}
			users = append(users, user)
			tokens[user] = m[1]
			user = ""
		}
	}
	return users, tokens
}

func waitReady(t testing.TB, url string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("GET %s: not 200 within 15s (last: %s)", url, last)
}

// stop sends SIGTERM and expects a clean exit (status 0) within 10s, as
// SPEC section 9 says; a process that hangs is killed.
func stop(t testing.TB, cmd *exec.Cmd, exited chan error, errPath string) {
	t.Helper()
	select {
	case err := <-exited:
		t.Errorf("plantstore exited on its own before the test ended: %v\nstderr:\n%s", err, readFile(t, errPath))
		return
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("SIGTERM to plantstore (pid %d): %v", cmd.Process.Pid, err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("plantstore after SIGTERM: %v, want exit status 0", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-exited
		t.Errorf("plantstore (pid %d) still running 10s after SIGTERM with -shutdown-delay 0s; killed", cmd.Process.Pid)
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// exchange is one real request and the service's answer, with the body
// read and put back so that it can be read again.
type exchange struct {
	Req  *http.Request
	Resp *http.Response
	Body []byte
}

// do sends a request and reads the whole response.
func do(t testing.TB, method, url string, header http.Header) exchange {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return exchange{Req: req, Resp: resp, Body: body}
}

// rewind makes the response body readable again.
func (e exchange) rewind() *http.Response {
	e.Resp.Body = io.NopCloser(bytes.NewReader(e.Body))
	return e.Resp
}

func bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

// get fetches url and fails the test unless the answer is 200.
func get(t testing.TB, url string, header http.Header) []byte {
	t.Helper()
	e := do(t, http.MethodGet, url, header)
	if e.Resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d, want 200; body %q", url, e.Resp.StatusCode, e.Body)
	}
	return e.Body
}

// mintToken runs "plantstore token" and returns the printed token.
func mintToken(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(binary, append([]string{"token"}, args...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("plantstore token %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatalf("plantstore token %s: %v", strings.Join(args, " "), err)
	}
	tok := strings.TrimSuffix(string(out), "\n")
	if tok == "" || strings.ContainsAny(tok, " \n") {
		t.Fatalf("plantstore token %s printed %q, want one token and a newline", strings.Join(args, " "), out)
	}
	return tok
}

// storeDownService runs plantstore with a key file and a PostgreSQL URL
// that refuses connections, and returns it with a token it accepts.
func storeDownService(t testing.TB) (s *service, token string) {
	t.Helper()
	prefix := filepath.Join(t.TempDir(), "k")
	if out, err := exec.Command(binary, "keygen", "-alg", "EdDSA", "-out", prefix).CombinedOutput(); err != nil {
		t.Fatalf("plantstore keygen -alg EdDSA -out %s: %v\n%s", prefix, err, out)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	closed.Close() // nothing listens there now: connections are refused
	s = startUnready(t, "-jwt-key-file", prefix+".jwks.json",
		"-database-url", "postgres://plantstore@"+addr+"/plantstore?connect_timeout=2&sslmode=disable")
	return s, mintToken(t, "-key", prefix+".key", "-alg", "EdDSA", "-sub", "contract")
}

// scopedService runs plantstore with a key file from "plantstore keygen"
// and -jwt-required-scope plants:read, and returns it with a token that has
// the scope and one that does not.
func scopedService(t testing.TB) (s *service, withScope, withoutScope string) {
	t.Helper()
	prefix := filepath.Join(t.TempDir(), "k")
	if out, err := exec.Command(binary, "keygen", "-alg", "EdDSA", "-out", prefix).CombinedOutput(); err != nil {
		t.Fatalf("plantstore keygen -alg EdDSA -out %s: %v\n%s", prefix, err, out)
	}
	s = startService(t, "-jwt-key-file", prefix+".jwks.json", "-jwt-required-scope", "plants:read")
	withScope = mintToken(t, "-key", prefix+".key", "-alg", "EdDSA", "-sub", "contract", "-scope", "plants:read")
	withoutScope = mintToken(t, "-key", prefix+".key", "-alg", "EdDSA", "-sub", "contract", "-scope", "other")
	return s, withScope, withoutScope
}
