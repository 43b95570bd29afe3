package main

// ballastSize is the size of the heap ballast serve holds.
const ballastSize = 16 << 20

// heapBallast returns the heap ballast of a serving process: ballastSize
// bytes that are allocated and never written, or nil when GOGC is set.
//
// The service keeps little live memory (a few MiB with a small catalog)
// and allocates a few KiB per request, mostly in net/http. With the
// default GOGC the collector's goal is then its 4 MiB minimum: at tens of
// thousands of requests a second it ran about 70 times a second and took
// about 5 % of the process's CPU, more than any one handler. The
// collector counts the ballast as live, so its goal becomes at least
// 2 × 16 MiB and it runs about ten times less often; marking the ballast
// costs nothing (it holds no pointers), and the kernel never backs pages
// that are never written, so the resident memory grows only by the garbage
// the larger goal lets accumulate (at most about 16 MiB). With a large
// catalog the goal is far above the floor anyway, and the ballast adds at
// most 16 MiB of garbage to it. This is the minimum heap goal the runtime
// has no setting for (golang/go#23044); gopls holds one for the same
// reason.
//
// GOMEMLIMIT, which the Deployment sets from the container's limit, keeps
// its meaning: the ballast counts towards it as 16 MiB. An operator who sets
// GOGC has chosen the pacing, and gets no ballast.
func heapBallast(getenv func(string) string) []byte {
	if getenv("GOGC") != "" {
		return nil
	}
	return make([]byte, ballastSize)
}
