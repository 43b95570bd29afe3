// Package logtest captures what the service logs, for tests: a buffer that
// a server goroutine may write while the test reads it, and that decodes
// its JSON lines; and the check that a log line is what strict JSON
// ingesters take, one object with unique keys, which every line decoded
// through it passes.
package logtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer safe for concurrent use. The zero value is
// ready to use.
type Buffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{} // has a value after a Write; made on first use
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.signal() <- struct{}{}:
	default:
	}
	return n, err
}

// Written returns a channel that receives a value after a Write, for a
// test that waits for what the writer will write. One value may stand for
// several writes.
func (b *Buffer) Written() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.signal()
}

// signal returns the channel Write signals on; b.mu is held.
func (b *Buffer) signal() chan struct{} {
	if b.written == nil {
		b.written = make(chan struct{}, 1)
	}
	return b.written
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines decodes every line written so far as a JSON object, failing t on
// a line that is not one.
func (b *Buffer) Lines(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader([]byte(b.String())))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if err := CheckLine(sc.Bytes()); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// CheckLine returns why line is not one JSON object whose objects, at
// every depth, each name a key once, or nil. encoding/json and zap accept
// a repeated key (the last wins, or both are written); many log pipelines
// refuse such a line or keep either value.
func CheckLine(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if tok != json.Delim('{') {
		return errors.New("not a JSON object")
	}
	if err := checkObject(dec, "$"); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the object")
	}
	return nil
}

// checkObject reads the rest of an object whose '{' dec has read, at path.
func checkObject(dec *json.Decoder, path string) error {
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("not JSON: %w", err)
		}
		key := tok.(string) // the decoder allows only strings here
		if seen[key] {
			return fmt.Errorf("key %q appears twice in %s", key, path)
		}
		seen[key] = true
		if err := checkValue(dec, path+"."+key); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return fmt.Errorf("not JSON: %w", err)
	}
	return nil
}

// checkValue reads one value, checking the objects in it.
func checkValue(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	switch tok {
	case json.Delim('{'):
		return checkObject(dec, path)
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := checkValue(dec, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // ']'
			return fmt.Errorf("not JSON: %w", err)
		}
	}
	return nil
}

// A Checker is an io.Writer that checks every line written to it with
// [CheckLine] as it comes, keeping only the lines at fault and counts, so
// that it can take all a long run logs. Writes may split lines anywhere.
// Lines that allowed accepts are not checked. A Checker is safe for
// concurrent use.
type Checker struct {
	// Allowed, when not nil, tells the lines that are not log lines and
	// need no check (a command's last words on stderr).
	Allowed func(line string) bool

	mu      sync.Mutex
	partial []byte
	lines   int
	bad     []string
	msgs    map[string]int
}

// Write checks the complete lines of p, and keeps the rest for the next
// Write.
func (c *Checker) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	data := append(c.partial, p...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		c.check(data[:i])
		data = data[i+1:]
	}
	c.partial = append([]byte(nil), data...)
	return len(p), nil
}

// check checks one line; c.mu is held.
func (c *Checker) check(line []byte) {
	if len(bytes.TrimSpace(line)) == 0 || c.Allowed != nil && c.Allowed(string(line)) {
		return
	}
	c.lines++
	if err := CheckLine(line); err != nil {
		if len(c.bad) < 20 {
			c.bad = append(c.bad, fmt.Sprintf("%v: %s", err, line))
		}
		return
	}
	var m struct {
		Msg string `json:"msg"`
	}
	if json.Unmarshal(line, &m) == nil {
		if c.msgs == nil {
			c.msgs = map[string]int{}
		}
		c.msgs[m.Msg]++
	}
}

// DropPartial forgets the incomplete last line written so far, if any:
// for a process killed while it wrote one.
func (c *Checker) DropPartial() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partial = nil
}

// Check fails t for every line at fault seen so far, and for a last line
// left without its newline.
func (c *Checker) Check(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.partial) > 0 {
		c.check(c.partial)
		c.partial = nil
	}
	if len(c.bad) > 0 {
		t.Errorf("%d log lines are not one JSON object with unique keys:\n%s", len(c.bad), strings.Join(c.bad, "\n"))
	}
}

// Lines returns the number of lines checked, and how many of them had
// each msg.
func (c *Checker) Lines() (int, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	msgs := make(map[string]int, len(c.msgs))
	for k, v := range c.msgs {
		msgs[k] = v
	}
	return c.lines, msgs
}

// WaitLine waits up to 30 s for a line for which match returns true, and
// returns it; it fails t when none comes. It looks again after each Write.
func (b *Buffer) WaitLine(t testing.TB, what string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	written := b.Written()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		for _, l := range b.Lines(t) {
			if match(l) {
				return l
			}
		}
		select {
		case <-written:
		case <-timeout.C:
			t.Fatalf("no log line %s within 30s; the log:\n%s", what, b.String())
		}
	}
}

// WaitCount waits up to 30 s until n lines have the message msg, and fails
// t when they do not come.
func (b *Buffer) WaitCount(t testing.TB, msg string, n int) {
	t.Helper()
	written := b.Written()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		seen := 0
		for _, l := range b.Lines(t) {
			if l["msg"] == msg {
				seen++
			}
		}
		if seen >= n {
			return
		}
		select {
		case <-written:
		case <-timeout.C:
			t.Fatalf("%d of %d log lines %q within 30s; the log:\n%s", seen, n, msg, b.String())
		}
	}
}
