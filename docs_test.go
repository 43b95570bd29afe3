package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/plants/postgres/pgtest"
)

// The commands the documentation shows are run, so that it cannot drift
// from the code. Every shell block (```sh, ```bash, ```console) in
// README.md, SECURITY.md and docs/ follows a marker line that says how:
//
//	<!-- run: sh -->                the block runs as it is: TestDocsCommands
//	<!-- run: sh, database -->      the same, with $DATABASE_URL naming a new,
//	                                migrated PostgreSQL schema
//	<!-- run: by FILE[:Test], ... --> it runs in that script or test
//	<!-- run: none (REASON) -->     it cannot run here (a cluster, a registry)
//
// A "sh" block runs with bash -euo pipefail in a scratch copy of the
// repository, with plantstore (built from it) on PATH, and with
// 127.0.0.1:8080 and 127.0.0.1:9090 rewritten to free loopback ports that
// PLANTSTORE_ADDR and PLANTSTORE_ADMIN_ADDR name too; what it starts in the
// background is stopped after it.

// docBlock is a shell block of a document.
type docBlock struct {
	file string // relative to the repository
	line int    // of the opening fence
	run  string // the marker's text after "run:"
	text string
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
				if rest != "" && rest != "database" {
					t.Errorf("%s: run: %q: want sh or sh, database", where, b.run)
				}
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
}

// TestDocsCommands runs every "sh" block of the documentation.
func TestDocsCommands(t *testing.T) {
	soak(t)
	repo, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "plantstore"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, f := range docFiles(t) {
		for _, b := range shellBlocks(t, f) {
			if b.run != "sh" && b.run != "sh, database" {
				continue
			}
			t.Run(fmt.Sprintf("%s:%d", b.file, b.line), func(t *testing.T) {
				runDocBlock(t, repo, bin, b)
			})
		}
	}
}

// runDocBlock runs b in a scratch copy of the repository.
func runDocBlock(t *testing.T, repo, bin string, b docBlock) {
	dir := t.TempDir()
	copyTracked(t, repo, dir)
	api, admin := freeAddr(t), freeAddr(t)
	text := strings.NewReplacer("127.0.0.1:8080", api, "127.0.0.1:9090", admin, "localhost:8080", api, "localhost:9090", admin).Replace(b.text)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", text)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"PLANTSTORE_ADDR="+api, "PLANTSTORE_ADMIN_ADDR="+admin)
	if b.run == "sh, database" {
		dsn := pgtest.NewSchema(t)
		if err := run(t.Context(), []string{"migrate", "-database-url", dsn}, nil, nil, io.Discard, io.Discard); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		cmd.Env = append(cmd.Env, "DATABASE_URL="+dsn)
	}
	// Its own process group, so that what it leaves in the background
	// is stopped with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// What it left in the background holds the output open: once the
	// block's shell has exited, stop waiting for that after a moment.
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Start()
	if err == nil {
		err = cmd.Wait()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		if errors.Is(err, exec.ErrWaitDelay) {
			err = nil
		}
	}
	if err != nil {
		t.Errorf("%s:%d: %v\n--- the block:\n%s--- its output:\n%s", b.file, b.line, err, text, out.String())
	}
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
	var help bytes.Buffer
	if err := run(t.Context(), []string{"serve", "-h"}, nil, nil, &help, &help); err != nil && !isUsage(err) {
		t.Fatalf("serve -h: %v", err)
	}
	type flagDoc struct{ variable, def string }
	fromHelp := map[string]flagDoc{}
	flagLine := regexp.MustCompile(`(?m)^  -([a-z0-9-]+).*\n\s+(.*)$`)
	defEnv := regexp.MustCompile(`\((?:default "?(.*?)"?; )?env (PLANTSTORE_[A-Z0-9_]+)\)$`)
	for _, m := range flagLine.FindAllStringSubmatch(help.String(), -1) {
		d := flagDoc{}
		if e := defEnv.FindStringSubmatch(m[2]); e != nil {
			d = flagDoc{variable: e[2], def: e[1]}
		}
		fromHelp[m[1]] = d
	}
	doc, err := os.ReadFile("docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `-([a-z0-9-]+)` \\|\\s*(?:`(PLANTSTORE_[A-Z0-9_]+)`)?\\s*\\|\\s*([^|]*?)\\s*\\|")
	inDoc := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		name, variable, def := m[1], m[2], strings.TrimSpace(m[3])
		inDoc[name] = true
		h, ok := fromHelp[name]
		if !ok {
			t.Errorf("docs/configuration.md lists -%s, which serve -h does not", name)
			continue
		}
		if variable != h.variable {
			t.Errorf("-%s: the doc says variable %q, serve -h %q", name, variable, h.variable)
		}
		if h.def != "" && !strings.Contains(def, "`"+h.def+"`") {
			t.Errorf("-%s: the doc's default %q does not show serve -h's %q", name, def, h.def)
		}
	}
	for name := range fromHelp {
		if !inDoc[name] {
			t.Errorf("serve -h has -%s, which docs/configuration.md does not list", name)
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
		path := filepath.Join(dir, "issuers.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		f, err := auth.LoadIssuersFile(ctx, path, auth.SourceOptions{})
		if err != nil {
			cancel()
			t.Errorf("example %d: %v\n%s", i+1, err, b[1])
			continue
		}
		if _, err := auth.NewVerifier(auth.Options{}, f.Issuers()...); err != nil {
			t.Errorf("example %d: %v", i+1, f.Explain(err))
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
