package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/issuers"
	"github.com/plantstore/plantstore/observability/testenv"
	"github.com/plantstore/plantstore/plants/postgres/pgtest"
)

// The commands the documentation shows are run, so that it cannot drift
// from the code. Every shell block (```sh, ```bash, ```console) in
// README.md, SECURITY.md and docs/ follows a marker line that says how:
//
//	<!-- run: sh -->                the block runs: TestDocsCommands
//	<!-- run: sh, database -->      the same, and the document gets a
//	                                PostgreSQL database (below)
//	<!-- run: sh, after FILE -->    the same, and the document goes on from
//	                                FILE: its session runs FILE's blocks
//	                                first, as a reader who read FILE first
//	                                (the options combine: sh, database,
//	                                after README.md)
//	<!-- run: by FILE[:Test], ... --> it runs in that script or test
//	<!-- run: none (REASON) -->     it cannot run here (a cluster, a registry)
//
// TestDocsCommands runs the "sh" blocks of each document in order, as a
// reader who pastes them into one terminal: one bash session per document
// (with set -Eeuo pipefail), in a fresh copy of the repository, with no
// plantstore on PATH unless the document puts it there. It fails on a
// command that fails, on a block that leaves a job running (an example
// stops the servers it starts, so that the next one's readiness loop
// cannot pass against an old server), and on any process the document
// leaves behind. A block that starts a service in the background waits
// for it with readyLoop, which stops waiting when the service has exited,
// so that a service that cannot start fails the block instead of hanging
// it. Each document gets ports of its own: 127.0.0.1:8080 and
// 127.0.0.1:9090 (and localhost:...) in its text are rewritten to free
// loopback ports, which PLANTSTORE_ADDR and PLANTSTORE_ADMIN_ADDR name too,
// for the commands that listen by default; PLANTSTORE_SHUTDOWN_DELAY=0s
// spares each stop the delay a load balancer needs. A document with a
// "sh, database" block gets a new, empty schema of the test server: the
// DSN docDSN in its text is rewritten to it. The copies of the repository
// are made one after the other at one path, so that the build the
// documents run reuses the build cache.

// docDSN is the database the documents' examples use: the one the tests
// use, which the container of docs/postgres.md creates. The docs test
// rewrites it to a schema of its own.
const docDSN = pgtest.DefaultDSN

// readyLoop is how a block waits for the service it started in the
// background: until /readyz answers, or until the service has exited
// ($! is gone), when the loop ends and the next command, which needs the
// service, fails. A reader who pastes it into a terminal gets the same:
// no endless loop, and the terminal stays open.
const readyLoop = "until curl -sf http://127.0.0.1:9090/readyz >/dev/null; do kill -0 $! || break; sleep 0.1; done"

// untilExited is what every wait loop of a block that started a job in
// the background must hold (readyLoop, or a wait for the job's output).
const untilExited = "kill -0 $! || break"

// docBlock is a shell block of a document.
type docBlock struct {
	file string // relative to the repository
	line int    // of the opening fence
	run  string // the marker's text after "run:"
	text string
}

// shOptions are the options of a "run: sh, ..." marker.
type shOptions struct {
	database bool   // "database": the document gets a database
	after    string // "after FILE": the document goes on from FILE
}

// runsHere reports whether the block runs in TestDocsCommands, and with
// what options; err says what is wrong with a marker that starts with sh.
func (b docBlock) runsHere() (ok bool, o shOptions, err error) {
	kind, rest, _ := strings.Cut(b.run, ",")
	if strings.TrimSpace(kind) != "sh" {
		return false, o, nil
	}
	if rest == "" {
		return true, o, nil
	}
	for _, opt := range strings.Split(rest, ",") {
		opt = strings.TrimSpace(opt)
		switch file, isAfter := strings.CutPrefix(opt, "after "); {
		case opt == "database":
			o.database = true
		case isAfter && file != "":
			o.after = file
		default:
			return false, o, fmt.Errorf("run: %q: option %q: want database or after FILE", b.run, opt)
		}
	}
	return true, o, nil
}

var (
	fence  = regexp.MustCompile("^\\s*```(\\w*)\\s*$")
	marker = regexp.MustCompile(`^\s*<!-- run: (.*?) -->\s*$`)
)

// docFiles returns the documents whose commands are run.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "SECURITY.md"}
	err := filepath.WalkDir("docs", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// shellBlocks returns the shell blocks of the Markdown file path, failing
// t for a block without a marker.
func shellBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []docBlock
	var cur *docBlock
	prev := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case cur != nil:
				blocks = append(blocks, *cur)
				cur = nil
			case m[1] == "sh" || m[1] == "bash" || m[1] == "console":
				cur = &docBlock{file: path, line: n}
				if mm := marker.FindStringSubmatch(prev); mm != nil {
					cur.run = mm[1]
				} else {
					t.Errorf("%s:%d: a shell block without a <!-- run: ... --> marker on the line before", path, n)
				}
			case m[1] != "":
				// Another language: skip to its closing fence.
				cur = &docBlock{run: "-"}
			}
			prev = line
			continue
		}
		if cur != nil {
			cur.text += line + "\n"
		}
		prev = line
	}
	var out []docBlock
	for _, b := range blocks {
		if b.run != "-" {
			out = append(out, b)
		}
	}
	return out
}

var testFunc = regexp.MustCompile(`^[A-Za-z0-9_./-]+:Test\w+$`)

// TestDocsMarkers checks every marker: "by" names files that exist (and
// tests they define), "none" gives a reason, nothing else is allowed.
func TestDocsMarkers(t *testing.T) {
	counts := map[string]int{}
	for _, f := range docFiles(t) {
		for _, b := range shellBlocks(t, f) {
			where := fmt.Sprintf("%s:%d", b.file, b.line)
			kind, rest, _ := strings.Cut(b.run, " ")
			kind = strings.TrimSuffix(kind, ",")
			counts[kind]++
			switch kind {
			case "sh":
				_, o, err := b.runsHere()
				if err != nil {
					t.Errorf("%s: %v", where, err)
				}
				if o.after != "" && !slices.Contains(docFiles(t), o.after) {
					t.Errorf("%s: run: after %s: no such document", where, o.after)
				}
				checkWaits(t, b)
			case "by":
				for _, ref := range strings.Split(rest, ",") {
					ref = strings.TrimSpace(ref)
					file, test, _ := strings.Cut(ref, ":")
					src, err := os.ReadFile(file)
					if err != nil {
						t.Errorf("%s: run by %s: %v", where, ref, err)
						continue
					}
					if test != "" && (!testFunc.MatchString(ref) || !bytes.Contains(src, []byte("func "+test+"("))) {
						t.Errorf("%s: run by %s: %s defines no %s", where, ref, file, test)
					}
				}
			case "none":
				if !strings.HasPrefix(rest, "(") || len(rest) < 10 {
					t.Errorf("%s: run: none needs a reason in parentheses", where)
				}
			default:
				t.Errorf("%s: run: %q: want sh, by FILE[:Test] or none (REASON)", where, b.run)
			}
			if err := exec.Command("bash", "-n", "-c", b.text).Run(); err != nil {
				t.Errorf("%s: not valid bash: %v\n%s", where, err, b.text)
			}
		}
	}
	t.Logf("shell blocks: %d run here, %d run by a script or test, %d not runnable here", counts["sh"], counts["by"], counts["none"])
	// A document's examples reach PostgreSQL at docDSN only, which the
	// test rewrites to a schema of its own: any other DSN would be the
	// test server's real database.
	for _, f := range docFiles(t) {
		database, named := false, false
		for _, b := range shellBlocks(t, f) {
			runs, o, _ := b.runsHere()
			if !runs {
				continue
			}
			database = database || o.database
			named = named || strings.Contains(b.text, docDSN)
			if n := strings.Count(b.text, "postgres://"); n != strings.Count(b.text, docDSN) {
				t.Errorf("%s:%d: a DSN other than %s, which the docs test would not rewrite", b.file, b.line, docDSN)
			}
		}
		if named && !database {
			t.Errorf("%s names %s in a block the test runs, but no block is marked sh, database", f, docDSN)
		}
	}
	// One database for the tests and the examples, named where a
	// newcomer looks for it, and made by the container the documentation
	// starts (a block that cannot run here, so its text is checked).
	for _, f := range []string{"README.md", "docs/postgres.md"} {
		if b, err := os.ReadFile(f); err != nil || !bytes.Contains(b, []byte(docDSN)) {
			t.Errorf("%s does not name %s, the database of the tests and of the examples (%v)", f, docDSN, err)
		}
	}
	u, err := url.Parse(docDSN)
	if err != nil {
		t.Fatal(err)
	}
	creates := regexp.MustCompile(`-e POSTGRES_DB=` + regexp.QuoteMeta(strings.TrimPrefix(u.Path, "/")) + `(\s|$)`)
	containers := 0
	for _, b := range shellBlocks(t, "docs/postgres.md") {
		if run := strings.ReplaceAll(b.text, "\\\n", " "); strings.Contains(run, "docker run") {
			containers++
			if !creates.MatchString(run) {
				t.Errorf("docs/postgres.md:%d: the container does not create the database of %s (-e POSTGRES_DB=%s)", b.line, docDSN, strings.TrimPrefix(u.Path, "/"))
			}
		}
	}
	if containers == 0 {
		t.Errorf("docs/postgres.md starts no PostgreSQL container")
	}
}

// checkWaits fails t for a wait loop (until ...) of b that would go on
// forever once the job b started in the background has exited.
func checkWaits(t *testing.T, b docBlock) {
	t.Helper()
	started := false
	for i, line := range strings.Split(b.text, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasSuffix(line, "&") && !strings.HasSuffix(line, "&&") {
			started = true
		}
		if strings.Contains(line, "/readyz") && strings.HasPrefix(line, "until ") && line != readyLoop {
			t.Errorf("%s:%d: a wait for /readyz other than\n\t%s\nwhich stops when the service has exited", b.file, b.line+1+i, readyLoop)
		}
		if started && strings.HasPrefix(line, "until ") && !strings.Contains(line, untilExited) {
			t.Errorf("%s:%d: a wait loop after a job started in the background, without %q: it would never end if the job exited", b.file, b.line+1+i, untilExited)
		}
	}
}

// TestDocsCommands runs the "sh" blocks of every document, each document
// in a session of its own (see the top of this file), and then one whose
// service cannot start, which must fail at once.
func TestDocsCommands(t *testing.T) {
	testenv.Docs(t)
	repo, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "plantstore")
	// The build every document runs compiles at dir: once here, then from
	// the cache.
	copyTracked(t, repo, dir)
	build := exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), "plantstore"), ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, f := range docFiles(t) {
		blocks := docSession(t, f)
		if len(blocks) == 0 {
			continue
		}
		t.Run(f, func(t *testing.T) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			copyTracked(t, repo, dir)
			if err := runDoc(t, dir, blocks, 5*time.Minute); err != nil {
				t.Error(err)
			}
			notIgnored(t, repo, dir)
		})
	}
	// A service that cannot start (a catalog with a trailing comma) fails
	// the block that waits for it, at once, with its error in the output.
	t.Run("a service that cannot start", func(t *testing.T) {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		copyTracked(t, repo, dir)
		blocks := []docBlock{{file: "made-up.md", line: 10, run: "sh", text: `go build -o plantstore . && export PATH="$PWD:$PATH"
plantstore keygen -alg ES256 -out broken
printf '[\n  {"id": "a", "name": "A", "readers": ["*"]},\n]\n' > broken.json
plantstore serve -jwt-key-file broken.jwks.json -data broken.json &
` + readyLoop + `
curl -sSf http://127.0.0.1:8080/plants
`}}
		start := time.Now()
		err := runDoc(t, dir, blocks, time.Minute)
		took := time.Since(start)
		for _, want := range []string{" at made-up.md:16: ", "broken.json: line 3, column 1: a comma after the last entry"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("a document whose service cannot start: %v; want an error holding %q", err, want)
			}
		}
		if took > 30*time.Second {
			t.Errorf("a document whose service cannot start took %s to fail; want seconds", took)
		}
	})
}

// docSession returns the blocks TestDocsCommands runs for the document f,
// in the order of its session: those of the document it goes on from
// (after FILE), if any, then its own.
func docSession(t *testing.T, f string) []docBlock {
	t.Helper()
	var before, own []docBlock
	for _, b := range shellBlocks(t, f) {
		runs, o, _ := b.runsHere()
		if !runs {
			continue
		}
		if o.after != "" && before == nil {
			before = docSession(t, o.after)
		}
		own = append(own, b)
	}
	if len(own) == 0 {
		return nil
	}
	return append(before, own...)
}

// notIgnored fails t for each file a document wrote into dir, a copy of
// repo, that repo's .gitignore does not ignore: a reader who follows the
// documentation in a clone must not find its files among the changes
// git shows.
func notIgnored(t *testing.T, repo, dir string) {
	t.Helper()
	list, err := exec.Command("git", "-C", repo, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	tracked := map[string]bool{}
	for _, name := range strings.Split(string(list), "\x00") {
		tracked[name] = true
	}
	var written []string
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err == nil && !tracked[filepath.ToSlash(rel)] {
			written = append(written, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(written) == 0 {
		return
	}
	cmd := exec.Command("git", "-C", repo, "check-ignore", "--no-index", "--")
	cmd.Args = append(cmd.Args, written...)
	out, _ := cmd.Output() // exit status 1 when none is ignored
	ignored := strings.Fields(string(out))
	for _, name := range written {
		if !slices.Contains(ignored, name) {
			t.Errorf("the document wrote %s into the clone, which .gitignore does not ignore", name)
		}
	}
}

// docScript returns blocks as one bash script, and the line of the
// script at which each block starts: after each block, a check that it
// left no job running; on a command that fails, the line it failed at.
func docScript(blocks []docBlock) (string, []int) {
	var b strings.Builder
	b.WriteString(`set -Eeuo pipefail
trap 'echo "docs test: failed at script line $LINENO" >&2' ERR
docs_block_end() {
  local left
  left=$(jobs -rp)
  if [ -n "$left" ]; then
    echo "docs test: the block at $1 left running: $(ps -o pid=,args= -p "$(echo $left | tr ' ' ,)")" >&2
    kill $left 2>/dev/null || true
    exit 97
  fi
}
`)
	starts := make([]int, len(blocks))
	for i, blk := range blocks {
		starts[i] = strings.Count(b.String(), "\n") + 1
		b.WriteString(blk.text)
		fmt.Fprintf(&b, "docs_block_end '%s:%d'\n", blk.file, blk.line)
	}
	return b.String(), starts
}

// runDoc runs the blocks of one document in dir, a fresh copy of the
// repository, and returns why the document fails, with its output.
func runDoc(t *testing.T, dir string, blocks []docBlock, timeout time.Duration) error {
	api, admin := freeAddr(t), freeAddr(t)
	script, starts := docScript(blocks)
	doc := blocks[len(blocks)-1].file
	rewrite := []string{"127.0.0.1:8080", api, "127.0.0.1:9090", admin, "localhost:8080", api, "localhost:9090", admin}
	if slices.ContainsFunc(blocks, func(b docBlock) bool { _, o, _ := b.runsHere(); return o.database }) {
		if !strings.Contains(script, docDSN) {
			t.Fatalf("%s has a database block but never names %s, which the test rewrites to its own schema", doc, docDSN)
		}
		rewrite = append(rewrite, docDSN, pgtest.NewSchema(t))
	}
	script = strings.NewReplacer(rewrite...).Replace(script)
	path := filepath.Join(t.TempDir(), "doc.sh")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", path)
	cmd.Dir = dir
	cmd.Env = append(docEnv(t), "PLANTSTORE_ADDR="+api, "PLANTSTORE_ADMIN_ADDR="+admin, "PLANTSTORE_SHUTDOWN_DELAY=0s")
	// A process group of its own, to find what it leaves behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// What it leaves in the background holds the output open: once the
	// shell has exited, stop waiting for that after a moment.
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return err
	}
	err := cmd.Wait()
	left := leftBehind(cmd.Process.Pid)
	if err != nil && !errors.Is(err, exec.ErrWaitDelay) {
		where := ""
		if m := regexp.MustCompile(`docs test: failed at script line (\d+)`).FindStringSubmatch(out.String()); m != nil {
			n, _ := strconv.Atoi(m[1])
			where = " at " + docLine(blocks, starts, n)
		}
		said := strings.Join(regexp.MustCompile(`(?m)^docs test: .*$`).FindAllString(out.String(), -1), "; ")
		return fmt.Errorf("%s: %v%s: %s\n--- its output:\n%s", doc, err, where, said, out.String())
	}
	if left != "" {
		return fmt.Errorf("%s left processes running at its end (stop what an example starts: kill %%1; wait %%1):\n%s\n--- its output:\n%s", doc, left, out.String())
	}
	return nil
}

// TestDocsRunner runs made-up documents through the runner of
// TestDocsCommands: it must refuse a failed step (naming its line), a
// block that leaves a job running, a process left behind at the end, a
// plantstore the document did not put on PATH, and a job that exits
// while readyLoop waits for it, at once; and pass a document that stops
// what it starts.
func TestDocsRunner(t *testing.T) {
	dir := t.TempDir()
	// A plantstore on this test's PATH, which the documents must not see.
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "plantstore"), []byte("#!/bin/sh\necho found\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	doc := func(texts ...string) []docBlock {
		var bs []docBlock
		for i, text := range texts {
			bs = append(bs, docBlock{file: "made-up.md", line: 10 * (i + 1), run: "sh", text: text})
		}
		return bs
	}
	tests := []struct {
		name   string
		blocks []docBlock
		want   string // part of the error; "" for none
	}{
		{"stops what it starts", doc("sleep 30 &\nkill %1; wait %1 || true\n", "echo 127.0.0.1:8080 | grep -v ':8080$'\n"), ""},
		{"a failed step", doc("true\n", "echo one\nfalse\necho never\n"), "made-up.md:22"},
		{"a block that leaves a job", doc("sleep 30 &\n", "true\n"), "the block at made-up.md:10 left running"},
		{"a process left behind", doc("(sleep 30 &)\n"), "left processes running at its end"},
		{"plantstore not put on PATH", doc("plantstore\n"), "plantstore: command not found"},
		{"a job that exits while readyLoop waits", doc("sh -c 'echo cannot start >&2; exit 1' &\n" + readyLoop + "\ncurl -sSf http://127.0.0.1:9090/readyz\n"), "made-up.md:13"},
	}
	for _, tt := range tests {
		err := runDoc(t, dir, tt.blocks, 30*time.Second)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v; want it to pass", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v; want an error holding %q", tt.name, err, tt.want)
		}
	}
}

// docLine returns the file:line of the document that line n of the script
// of blocks, whose blocks start at starts, comes from.
func docLine(blocks []docBlock, starts []int, n int) string {
	for i := len(blocks) - 1; i >= 0; i-- {
		if n >= starts[i] {
			return fmt.Sprintf("%s:%d", blocks[i].file, blocks[i].line+1+n-starts[i])
		}
	}
	return fmt.Sprintf("script line %d", n)
}

// docEnv is the environment of a document: this one without the
// directories of PATH that hold a plantstore, without PLANTSTORE_*
// variables, and without what the go command was told for this test.
func docEnv(t *testing.T) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "PLANTSTORE_"), name == "GOFLAGS":
			continue
		case name == "PATH":
			var keep []string
			for _, d := range filepath.SplitList(value) {
				if _, err := os.Stat(filepath.Join(d, "plantstore")); err != nil {
					keep = append(keep, d)
				}
			}
			kv = "PATH=" + strings.Join(keep, string(os.PathListSeparator))
		}
		env = append(env, kv)
	}
	return env
}

// leftBehind waits up to a second for the processes of the process group
// pgid to end, and returns those still running, then kills them.
func leftBehind(pgid int) string {
	deadline := time.Now().Add(time.Second)
	for syscall.Kill(-pgid, 0) == nil {
		if time.Now().After(deadline) {
			out, _ := exec.Command("pgrep", "-a", "-g", strconv.Itoa(pgid)).Output()
			syscall.Kill(-pgid, syscall.SIGKILL)
			if len(out) == 0 {
				out = []byte("(a process of the group)")
			}
			return string(out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ""
}

// copyTracked copies the files git tracks in repo into dir, as they are in
// the working tree.
func copyTracked(t *testing.T, repo, dir string) {
	t.Helper()
	list, err := exec.Command("git", "-C", repo, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, name := range strings.Split(strings.TrimSuffix(string(list), "\x00"), "\x00") {
		src := filepath.Join(repo, name)
		fi, err := os.Lstat(src)
		if err != nil {
			continue // deleted in the working tree
		}
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestDocsFlagTable holds the serve flag table of docs/configuration.md
// to "plantstore serve -h": the same flags, each with its variable and
// its default.
func TestDocsFlagTable(t *testing.T) {
	fromHelp := serveHelp(t)
	doc, err := os.ReadFile("docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `-([a-z0-9-]+)` \\|\\s*(?:`(PLANTSTORE_[A-Z0-9_]+)`)?\\s*\\|\\s*([^|]*?)\\s*\\|")
	inDoc := map[string]bool{}
	section := ""
	for _, line := range strings.Split(string(doc), "\n") {
		if title, ok := strings.CutPrefix(line, "### "); ok {
			section = title
		} else if strings.HasPrefix(line, "## ") {
			section = ""
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name, variable, def := m[1], m[2], strings.TrimSpace(m[3])
		if inDoc[name] {
			// A later table (the issuers file's keys) names the flag again.
			continue
		}
		inDoc[name] = true
		h, ok := fromHelp[name]
		if !ok {
			t.Errorf("docs/configuration.md lists -%s, which serve -h does not", name)
			continue
		}
		if variable != h.variable {
			t.Errorf("-%s: the doc says variable %q, serve -h %q", name, variable, h.variable)
		}
		if h.def != "" && !strings.Contains(unspaced(def), "`"+unspaced(h.def)+"`") {
			t.Errorf("-%s: the doc's default %q does not show serve -h's %q", name, def, h.def)
		}
		if section != h.group {
			t.Errorf("-%s: the doc lists it under %q, serve -h under %q", name, section, h.group)
		}
	}
	for name := range fromHelp {
		if !inDoc[name] {
			t.Errorf("serve -h has -%s, which docs/configuration.md does not list", name)
		}
	}
}

// unwrap joins a line of -h to the lines before it with a space. -h may
// also break a comma list after a comma: compare what it says with
// [unspaced].
func unwrap(before, line string) string {
	if before == "" {
		return line
	}
	return before + " " + line
}

// unspaced returns s without its spaces, to compare help text across the
// places -h wrapped it.
func unspaced(s string) string { return strings.ReplaceAll(s, " ", "") }

// helpFlag is what serve -h says of one flag.
type helpFlag struct{ group, variable, def, help string }

// serveHelp returns what serve -h says of each flag: the title of its
// group, its variable, its default and its help (the wrapped lines joined
// again).
func serveHelp(t testing.TB) map[string]helpFlag {
	t.Helper()
	var help bytes.Buffer
	if err := run(t.Context(), []string{"serve", "-h"}, nil, nil, &help, &help); err != nil && !isUsage(err) {
		t.Fatalf("serve -h: %v", err)
	}
	out := map[string]helpFlag{}
	defEnv := regexp.MustCompile(`\((?:default "?(.*?)"?; )?env (PLANTSTORE_[A-Z0-9_]+)\)$`)
	group, name := "", ""
	flush := func(f helpFlag) {
		if e := defEnv.FindStringSubmatch(f.help); e != nil {
			f.variable, f.def = e[2], e[1]
		}
		out[name] = f
	}
	var cur helpFlag
	for _, line := range strings.Split(help.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "        "):
			cur.help = unwrap(cur.help, strings.TrimSpace(line))
			continue
		case name != "":
			flush(cur)
			name = ""
		}
		if f, ok := strings.CutPrefix(line, "  -"); ok {
			name, _, _ = strings.Cut(f, " ")
			cur = helpFlag{group: group}
		} else if title, ok := strings.CutSuffix(line, ":"); ok && line != "" && !strings.HasPrefix(line, " ") {
			group = title
		}
	}
	if name != "" {
		flush(cur)
	}
	return out
}

// TestDocsCommandFlags checks that the command table of
// docs/configuration.md names each flag of token, proof and keygen, as
// their -h prints them.
func TestDocsCommandFlags(t *testing.T) {
	doc, err := os.ReadFile("docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	flagLine := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)
	for _, cmd := range []string{"token", "proof", "keygen"} {
		row := regexp.MustCompile("(?m)^\\| `" + cmd + " .*$").Find(doc)
		if row == nil {
			t.Errorf("docs/configuration.md has no row for %s", cmd)
			continue
		}
		var help bytes.Buffer
		if err := run(t.Context(), []string{cmd, "-h"}, nil, nil, &help, &help); err != nil && !isUsage(err) {
			t.Fatalf("%s -h: %v", cmd, err)
		}
		flags := flagLine.FindAllStringSubmatch(help.String(), -1)
		if len(flags) == 0 {
			t.Fatalf("%s -h lists no flag:\n%s", cmd, help.String())
		}
		for _, m := range flags {
			if !regexp.MustCompile(`[ \[(]-` + m[1] + `\b`).Match(row) {
				t.Errorf("docs/configuration.md's %s row does not name -%s", cmd, m[1])
			}
		}
	}
}

// TestDocsIssuersExamples loads every issuers file that
// docs/configuration.md shows, as the service would.
func TestDocsIssuersExamples(t *testing.T) {
	doc, err := os.ReadFile("docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(issuers:.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 2 {
		t.Fatalf("docs/configuration.md shows %d issuers files, want the two examples", len(blocks))
	}
	for i, b := range blocks {
		dir := t.TempDir()
		yaml := b[1]
		// A key file the example names is made where the test can read it.
		if m := regexp.MustCompile(`key_file: (\S+)`).FindStringSubmatch(yaml); m != nil {
			path := filepath.Join(dir, "jwks.json")
			if err := os.WriteFile(path, authtest.JWKS(t, authtest.NewKey(t, "ES256")), 0o600); err != nil {
				t.Fatal(err)
			}
			yaml = strings.ReplaceAll(yaml, m[1], path)
		}
		// So is the introspection client's secret.
		if m := regexp.MustCompile(`client_secret_file: (\S+)`).FindStringSubmatch(yaml); m != nil {
			path := filepath.Join(dir, "secret")
			if err := os.WriteFile(path, []byte("s3cret\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			yaml = strings.ReplaceAll(yaml, m[1], path)
		}
		path := filepath.Join(dir, "issuers.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		// As a service behind a gateway that forwards client certificates
		// runs, which an example with mtls: required needs.
		f, err := issuers.Load(ctx, path, issuers.Options{}, func(is []auth.Issuer) error {
			_, err := auth.NewVerifier(auth.Options{ClientCertHeader: "X-Forwarded-Client-Cert"}, is...)
			return err
		})
		if err != nil {
			cancel()
			t.Errorf("example %d: %v\n%s", i+1, err, b[1])
			continue
		}
		cancel()
		f.Wait()
	}
}

// TestDocsStandAlone: what users read (the documentation, the manifests,
// the code and its comments, the help of every command) never points at a
// document the repository does not hold: the product contract the
// project was built from is not shipped with it.
func TestDocsStandAlone(t *testing.T) {
	list, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	cite := regexp.MustCompile(`\bSPEC\b`)
	for _, name := range strings.Split(strings.TrimSuffix(string(list), "\x00"), "\x00") {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil || bytes.IndexByte(b, 0) >= 0 {
			continue // deleted in the working tree, or binary
		}
		for i, line := range strings.Split(string(b), "\n") {
			if cite.MatchString(line) {
				t.Errorf("%s:%d cites SPEC: %s", name, i+1, strings.TrimSpace(line))
			}
		}
	}
	for _, cmd := range []string{"help", "serve", "token", "proof", "keygen", "migrate", "import", "version"} {
		var help bytes.Buffer
		if err := run(t.Context(), []string{"help", cmd}, nil, nil, &help, &help); err != nil {
			t.Fatalf("help %s: %v", cmd, err)
		}
		if cite.Match(help.Bytes()) {
			t.Errorf("help %s cites SPEC:\n%s", cmd, help.String())
		}
	}
}
