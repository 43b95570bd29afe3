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
)

func TestHeapBallast(t *testing.T) {
	for _, gogc := range []string{"100", "off", "400"} {
		if b := heapBallast(envOf(map[string]string{"GOGC": gogc})); b != nil {
			t.Errorf("GOGC=%s: a ballast of %d bytes, want none", gogc, len(b))
		}
	}
	b := heapBallast(envOf(map[string]string{"GOMEMLIMIT": "256MiB"}))
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
	if os.Getenv("PLANTSTORE_BALLAST_CHILD") == "1" {
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
	cmd.Env = append(os.Environ(), "PLANTSTORE_BALLAST_CHILD=1", "GOGC=")
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
	// the runtime touch meanwhile.
	t.Logf("resident memory grew by %d KiB with a %d-byte ballast", grown, size)
	if grown > 2048 {
		t.Errorf("resident memory grew by %d KiB with the ballast, want under 2048", grown)
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
