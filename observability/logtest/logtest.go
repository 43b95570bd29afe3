// Package logtest captures what the service logs, for tests: a buffer that
// a server goroutine may write while the test reads it, and that decodes
// its JSON lines.
package logtest

import (
	"bufio"
	"bytes"
	"encoding/json"
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
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
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
