package main

import (
	"context"
	"runtime"
	"runtime/metrics"
	"time"
)

// ballastSize is the size of the heap ballast serve holds.
const ballastSize = 16 << 20

// heapBallast returns the heap ballast of a serving process: ballastSize
// bytes that are allocated and never written, or nil when GOGC is set.
//
// The service keeps little live memory with a small catalog and allocates
// a few KiB per request, mostly in net/http. With the default GOGC the
// collector's goal is then its 4 MiB minimum, and under load it runs far
// more often than the live heap calls for (docs/performance.md has the
// measured rate and its share of the CPU). The collector counts the
// ballast as live, so its goal becomes at least twice ballastSize and it
// runs that much less often; marking the ballast costs nothing (it holds
// no pointers), and the kernel never backs pages that are never written,
// so the resident memory grows only by the garbage the larger goal lets
// accumulate (at most ballastSize). With a large catalog the goal is far
// above the floor anyway, and the ballast adds at most ballastSize of
// garbage to it. This is the minimum heap goal the runtime has no setting
// for (golang/go#23044); gopls holds one for the same reason.
//
// GOMEMLIMIT, which the Deployment sets from the container's limit, keeps
// its meaning: the ballast counts towards it as ballastSize. An operator
// who sets GOGC has chosen the pacing, and gets no ballast.
func heapBallast(getenv func(string) string) []byte {
	if getenv("GOGC") != "" {
		return nil
	}
	return make([]byte, ballastSize)
}

// holdHeapBallast holds the heap ballast of a serving process (see
// heapBallast) until ctx ends or the returned function is called, which
// waits for it to be let go.
func holdHeapBallast(ctx context.Context, getenv func(string) string) (release func()) {
	ctx, cancel := context.WithCancel(ctx)
	held := holdBallast(ctx, heapBallast(getenv), ballastCheck)
	return func() {
		cancel()
		<-held
	}
}

// ballastCheck is how often holdBallast reads the live heap.
const ballastCheck = time.Second

// holdBallast keeps b alive until ctx ends or the live heap, as the last
// collection measured it, holds as much again as b besides b, checking
// every interval; then it drops b, so the collector frees it and its goal
// no longer counts it. The returned channel is closed when it has stopped.
func holdBallast(ctx context.Context, b []byte, every time.Duration) <-chan struct{} {
	done := make(chan struct{})
	if b == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		for {
			select {
			case <-ctx.Done():
				runtime.KeepAlive(b)
				return
			case <-t.C:
			}
			metrics.Read(sample)
			// A runtime without the metric keeps the ballast.
			if v := sample[0].Value; v.Kind() == metrics.KindUint64 && !ballastNeeded(v.Uint64(), len(b)) {
				return // b is not used from here on: the next collection frees it
			}
			runtime.KeepAlive(b)
		}
	}()
	return done
}

// ballastNeeded reports whether a ballast of size bytes still raises the
// collector's goal, given the live heap in bytes (which counts the
// ballast): while the rest of the heap is smaller than the ballast.
func ballastNeeded(live uint64, size int) bool {
	return live < 2*uint64(size)
}
