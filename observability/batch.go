package observability

import (
	"io"
	"sync"
	"time"
)

// batchDelay is how long a line may wait for others before the batch it
// opened is written: at tens of thousands of requests a second, one write
// carries tens of access log lines instead of one.
const batchDelay = time.Millisecond

// idleGap is how long without a line makes the writer idle: the next line
// is written at once, as a service at rest (or a client waiting on each
// answer) expects, and batching starts only when lines come closer than
// this, which is under load.
const idleGap = 250 * time.Microsecond

// maxBatch is the size at which a Write writes the batch itself instead of
// leaving it to the background: the memory a stalled output can hold.
const maxBatch = 256 << 10

// BatchWriter collects log lines and writes them to its output in batches:
// under load one write(2) carries many lines, where writing each line
// would cost a system call per request. A line that comes more than 250 µs
// after the one before is written at once, in the caller; closer lines
// are batched and reach the output at most about a millisecond later.
// [BatchWriter.WriteNow], [BatchWriter.Sync] and [BatchWriter.Close]
// write at once. Lines keep their order. When the output is slower than
// the lines come, a Write that fills the batch to 256 KiB writes it out
// itself, so memory stays bounded and the writers are held back instead.
//
// It is safe for concurrent use; its output need not be. A write error of
// the output is kept and returned by the next Sync or Close.
type BatchWriter struct {
	out  io.Writer
	kick chan struct{}
	quit chan struct{}
	done chan struct{}

	outMu sync.Mutex // held while writing to out: batches go out in order
	spare []byte     // the previous batch's buffer, reused; under outMu

	mu     sync.Mutex // guards what follows
	buf    []byte
	last   time.Time // of the last Write
	closed bool
	err    error
}

// NewBatchWriter returns a BatchWriter writing to out, with its background
// goroutine started; Close stops it.
func NewBatchWriter(out io.Writer) *BatchWriter {
	b := &BatchWriter{
		out:  out,
		kick: make(chan struct{}, 1),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	go b.loop()
	return b
}

// Write appends p to the batch. It never returns an error: zap writes one
// line per call and has nobody to tell.
func (b *BatchWriter) Write(p []byte) (int, error) {
	now := time.Now()
	b.mu.Lock()
	opened := len(b.buf) == 0
	idle := opened && now.Sub(b.last) > idleGap
	b.last = now
	b.buf = append(b.buf, p...)
	full := len(b.buf) >= maxBatch
	closed := b.closed // no background flush any more
	b.mu.Unlock()
	switch {
	case full, idle, closed:
		b.flush()
	case opened:
		select {
		case b.kick <- struct{}{}:
		default: // a flush is already due
		}
	}
	return len(p), nil
}

// WriteNow writes p after what is batched, before it returns: for lines
// that are rare and may be awaited, such as a key rotation or an error.
func (b *BatchWriter) WriteNow(p []byte) (int, error) {
	b.mu.Lock()
	b.buf = append(b.buf, p...)
	b.mu.Unlock()
	b.flush()
	return len(p), nil
}

// Sync writes out what is batched and returns the first write error since
// the last Sync, if any.
func (b *BatchWriter) Sync() error {
	b.flush()
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.err
	b.err = nil
	return err
}

// Close writes out what is batched and stops the background goroutine;
// later writes go to the output directly. It returns what Sync returns.
func (b *BatchWriter) Close() error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.quit)
	}
	b.mu.Unlock()
	<-b.done
	return b.Sync()
}

// loop writes out each batch batchDelay after its first line.
func (b *BatchWriter) loop() {
	defer close(b.done)
	t := time.NewTimer(0)
	<-t.C
	for {
		select {
		case <-b.kick:
		case <-b.quit:
			return
		}
		t.Reset(batchDelay)
		select {
		case <-t.C:
		case <-b.quit:
			return
		}
		b.flush()
	}
}

// flush writes the batch out, if there is one.
func (b *BatchWriter) flush() {
	b.outMu.Lock()
	defer b.outMu.Unlock()
	b.mu.Lock()
	batch := b.buf
	b.buf = b.spare[:0]
	b.mu.Unlock()
	if len(batch) > 0 {
		b.write(batch)
	}
	if cap(batch) > 2*maxBatch { // one huge line grew it: let it go
		batch = nil
	}
	b.spare = batch[:0]
}

// write writes p to the output, keeping its first error; outMu is held.
func (b *BatchWriter) write(p []byte) {
	if _, err := b.out.Write(p); err != nil {
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
}
