package observability

import (
	"io"
	"sync/atomic"
	"time"

	"go.uber.org/zap/zapcore"
)

// The batching of [LogOutput].
const (
	// outputBuffer is the most a LogOutput holds before a write goes out
	// in the caller: the memory a stalled output can hold.
	outputBuffer = 256 << 10
	// outputFlush is how long a line may wait for others under load.
	outputFlush = 10 * time.Millisecond
	// idleGap is how long without a line makes the output idle: the next
	// line is written at once.
	idleGap = 250 * time.Microsecond
)

// LogOutput is where the service's log lines go: w behind zap's
// [zapcore.BufferedWriteSyncer], so that under load one write(2) carries
// many lines instead of one each, plus one rule of its own: a line that
// comes more than 250 µs after the one before is written at once, so a
// service at rest (or a client waiting on each answer) sees each line as
// it is logged. Under load lines reach w at most 10 ms later, or at once
// when 256 KiB are waiting; they keep their order. It is safe for
// concurrent use; w need not be.
type LogOutput struct {
	buf    *zapcore.BufferedWriteSyncer
	last   atomic.Int64 // UnixNano of the last Write
	closed atomic.Bool  // no timer flushes any more: write through
}

var _ zapcore.WriteSyncer = (*LogOutput)(nil)

// NewLogOutput returns a LogOutput writing to w. [LogOutput.Close] writes
// what waits and stops its timer.
func NewLogOutput(w io.Writer) *LogOutput {
	return &LogOutput{buf: &zapcore.BufferedWriteSyncer{
		// Only w's Write: a Sync is a flush here, and fsync(2) on a pipe
		// or a terminal (stderr) fails.
		WS:            zapcore.AddSync(struct{ io.Writer }{w}),
		Size:          outputBuffer,
		FlushInterval: outputFlush,
	}}
}

// Write adds p, one log line, to the output.
func (o *LogOutput) Write(p []byte) (int, error) {
	return o.WriteAt(p, time.Now())
}

// WriteAt is Write for a line stamped now, which it takes as the time of
// the write instead of reading the clock again.
func (o *LogOutput) WriteAt(p []byte, now time.Time) (int, error) {
	t := now.UnixNano()
	idle := t-o.last.Swap(t) > int64(idleGap)
	n, err := o.buf.Write(p)
	if (idle || o.closed.Load()) && err == nil {
		err = o.buf.Sync()
	}
	return n, err
}

// Sync writes out what waits and returns the error of the output, if any.
func (o *LogOutput) Sync() error { return o.buf.Sync() }

// Close writes out what waits and stops the flush timer; later writes
// still reach the output.
func (o *LogOutput) Close() error {
	o.closed.Store(true)
	return o.buf.Stop()
}
