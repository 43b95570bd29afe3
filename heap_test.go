package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestHeapBallast(t *testing.T) {
	for _, gogc := range []string{"100", "off", "400"} {
		if b := heapBallast(newEnv(envOf(map[string]string{"GOGC": gogc})).get); b != nil {
			t.Errorf("GOGC=%s: a ballast of %d bytes, want none", gogc, len(b))
		}
	}
	b := heapBallast(newEnv(envOf(map[string]string{"GOMEMLIMIT": "256MiB"})).get)
	if len(b) != ballastSize {
		t.Fatalf("ballast of %d bytes, want %d", len(b), ballastSize)
	}
	// The collector counts it as live: its goal is at least twice it.
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(sample)
	if goal := sample[0].Value.Uint64(); goal < 2*ballastSize {
		t.Errorf("heap goal %d bytes with the ballast held, want at least %d", goal, 2*ballastSize)
	}
	runtime.KeepAlive(b)
}

// TestHeapBallastNotResident checks, in a fresh process (this test binary
// run again), that the ballast costs address space and no resident memory.
func TestHeapBallastNotResident(t *testing.T) {
	if os.Getenv("TEST_BALLAST_CHILD") == "1" {
		before := residentKiB(t)
		b := heapBallast(os.Getenv)
		runtime.GC()
		after := residentKiB(t)
		runtime.KeepAlive(b)
		fmt.Printf("ballast %d resident %d\n", len(b), after-before)
		return
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc/self/status to read the resident size from")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHeapBallastNotResident$")
	cmd.Env = append(os.Environ(), "TEST_BALLAST_CHILD=1", "GOGC=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var size, grown int
	for line := range strings.Lines(string(out)) {
		if _, err := fmt.Sscanf(line, "ballast %d resident %d", &size, &grown); err == nil {
			break
		}
	}
	if size != ballastSize {
		t.Fatalf("child held a ballast of %d bytes, want %d; its output:\n%s", size, ballastSize, out)
	}
	// 16 MiB written would show as 16384 KiB; allow for what the GC and
	// the runtime touch meanwhile, and, under the race detector, for the
	// one byte of shadow it writes for each 8 bytes allocated.
	budget := 2048
	if raceEnabled {
		budget += ballastSize / 8 >> 10
	}
	t.Logf("resident memory grew by %d KiB with a %d-byte ballast", grown, size)
	if grown > budget {
		t.Errorf("resident memory grew by %d KiB with the ballast, want under %d", grown, budget)
	}
}

// residentKiB returns VmRSS of this process.
func residentKiB(t *testing.T) int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestHoldBallastLetsGo checks that the ballast is held while the live
// heap is smaller than it, and freed once the heap holds as much besides
// it.
func TestHoldBallastLetsGo(t *testing.T) {
	for _, tt := range []struct {
		live, size uint64
		want       bool
	}{
		{live: 16 << 20, size: 16 << 20, want: true},   // the ballast alone
		{live: 31 << 20, size: 16 << 20, want: true},   // 15 MiB besides it
		{live: 32 << 20, size: 16 << 20, want: false},  // 16 MiB besides it
		{live: 400 << 20, size: 16 << 20, want: false}, // a large catalog
	} {
		if got := ballastNeeded(tt.live, int(tt.size)); got != tt.want {
			t.Errorf("live %d MiB, ballast %d MiB: needed %t, want %t", tt.live>>20, tt.size>>20, got, tt.want)
		}
	}

	// A small ballast, a live heap larger than it: it must be let go, and
	// the collector must free it.
	b := make([]byte, 1<<20)
	freed := make(chan struct{})
	runtime.AddCleanup(&b[0], func(ch chan struct{}) { close(ch) }, freed)
	live := make([]byte, 8<<20)
	runtime.GC()
	done := holdBallast(t.Context(), b, time.Millisecond)
	b = nil
	deadline := time.After(10 * time.Second)
	for released := false; ; {
		select {
		case <-done:
			released = true
			done = nil
		case <-freed:
			// Both may be ready at once: the release is what came first.
			if !released {
				select {
				case <-done:
					released = true
				default:
				}
			}
			if !released {
				t.Fatal("the ballast was freed while held")
			}
			runtime.KeepAlive(live)
			return
		case <-deadline:
			t.Fatalf("the ballast was not freed within 10s (released %t) with %d MiB live besides it", released, len(live)>>20)
		case <-time.After(time.Millisecond):
			runtime.GC()
		}
	}
}
