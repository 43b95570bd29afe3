package observability_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plantstore/plantstore/observability"
)

// countingWriter records what reaches it and in how many writes.
type countingWriter struct {
	syncBuffer
	writes atomic.Int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes.Add(1)
	return w.syncBuffer.Write(p)
}

func TestBatchWriterKeepsEveryLineInOrder(t *testing.T) {
	out := &countingWriter{}
	b := observability.NewBatchWriter(out)
	const n = 5000
	var want strings.Builder
	for i := range n {
		line := fmt.Sprintf("line %d\n", i)
		want.WriteString(line)
		if k, err := b.Write([]byte(line)); k != len(line) || err != nil {
			t.Fatalf("Write = %d, %v; want %d, nil", k, err, len(line))
		}
	}
	if err := b.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if got := out.String(); got != want.String() {
		t.Fatalf("output differs from the lines written: %d bytes, want %d", len(got), want.Len())
	}
	if w := out.writes.Load(); w >= n/10 {
		t.Errorf("%d lines took %d writes; want them batched (fewer than %d)", n, w, n/10)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestBatchWriterFlushesWithoutSync(t *testing.T) {
	out := &countingWriter{}
	b := observability.NewBatchWriter(out)
	defer b.Close()
	for round := range 3 { // a later batch is written out as the first was
		// The first line after a pause goes out at once; the one right
		// after it is batched.
		b.Write(fmt.Appendf(nil, "first %d\n", round))
		line := fmt.Sprintf("batched %d\n", round)
		b.Write([]byte(line))
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(out.String(), line) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the line was not written within 5 s without Sync", round)
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(2 * time.Millisecond) // idle again
	}
}

func TestBatchWriterWritesAtOnceWhenIdle(t *testing.T) {
	out := &countingWriter{}
	b := observability.NewBatchWriter(out)
	defer b.Close()
	for i := range 5 {
		time.Sleep(2 * time.Millisecond) // well over the idle gap
		line := fmt.Sprintf("line %d\n", i)
		b.Write([]byte(line))
		if !strings.HasSuffix(out.String(), line) {
			t.Fatalf("after a pause, line %d was not written before Write returned: output %q", i, out.String())
		}
	}
}

func TestBatchWriterWriteNowKeepsOrder(t *testing.T) {
	out := &countingWriter{}
	b := observability.NewBatchWriter(out)
	defer b.Close()
	b.Write([]byte("a\n")) // after the start: written at once
	b.Write([]byte("b\n")) // batched
	b.WriteNow([]byte("now\n"))
	if got := out.String(); got != "a\nb\nnow\n" {
		t.Fatalf("after WriteNow the output is %q; want the batched line, then the new one", got)
	}
}

func TestBatchWriterCloseFlushesThenWritesThrough(t *testing.T) {
	out := &countingWriter{}
	b := observability.NewBatchWriter(out)
	b.Write([]byte("before\n"))
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := out.String(); got != "before\n" {
		t.Fatalf("after Close the output is %q; want the batched line", got)
	}
	b.Write([]byte("after\n"))
	if got := out.String(); got != "before\nafter\n" {
		t.Fatalf("a write after Close left the output at %q; want it written at once", got)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestBatchWriterConcurrentLinesStayWhole(t *testing.T) {
	out := &countingWriter{}
	b := observability.NewBatchWriter(out)
	const writers, lines = 8, 2000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				b.Write(fmt.Appendf(nil, "writer %d line %d %s\n", w, i, strings.Repeat("x", i%300)))
			}
		})
	}
	wg.Wait()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	next := make([]int, writers) // each writer's lines in its own order
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines out, want %d", len(got), writers*lines)
	}
	for _, l := range got {
		var w, i int
		var pad string
		if _, err := fmt.Sscanf(l, "writer %d line %d %s", &w, &i, &pad); err != nil && i%300 != 0 {
			t.Fatalf("torn line %q: %v", l, err)
		}
		if w < 0 || w >= writers || i != next[w] || len(pad) != i%300 {
			t.Fatalf("line %q out of order or torn (want writer %d's line %d)", l, w, next[w])
		}
		next[w]++
	}
}

// blockingWriter blocks every write until release is closed.
type blockingWriter struct {
	release chan struct{}
	n       atomic.Int64
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	<-w.release
	w.n.Add(int64(len(p)))
	return len(p), nil
}

func TestBatchWriterHoldsWritersBackWhenOutputStalls(t *testing.T) {
	out := &blockingWriter{release: make(chan struct{})}
	b := observability.NewBatchWriter(out)
	line := bytes.Repeat([]byte("y"), 999)
	line = append(line, '\n')
	var accepted atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 10_000 { // 10 MB
			b.Write(line)
			accepted.Add(int64(len(line)))
		}
	}()
	time.Sleep(300 * time.Millisecond)
	// One batch is stuck in the output's Write, a second fills up to the
	// limit and its writer waits: the memory held is bounded.
	const bound = 2*256<<10 + 2*1000
	if a := accepted.Load(); a > bound {
		t.Fatalf("with the output stalled, %d bytes were taken in; want at most %d", a, bound)
	}
	close(out.release)
	<-done
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := out.n.Load(); got != 10_000*1000 {
		t.Fatalf("%d bytes reached the output, want %d", got, 10_000*1000)
	}
}

// failingWriter fails every write.
type failingWriter struct{}

var errBroken = errors.New("broken pipe")

func (failingWriter) Write(p []byte) (int, error) { return 0, errBroken }

func TestBatchWriterReportsWriteErrors(t *testing.T) {
	b := observability.NewBatchWriter(failingWriter{})
	b.Write([]byte("lost\n"))
	if err := b.Sync(); !errors.Is(err, errBroken) {
		t.Fatalf("Sync after a failed write = %v; want %v", err, errBroken)
	}
	if err := b.Sync(); err != nil {
		t.Fatalf("second Sync = %v; want nil (the error was reported)", err)
	}
	b.Write([]byte("lost too\n"))
	if err := b.Close(); !errors.Is(err, errBroken) {
		t.Fatalf("Close = %v; want %v", err, errBroken)
	}
}
