package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/dpop"
	"github.com/plantstore/plantstore/plants/postgres"
)

// TestCapacityTablesCurrent holds docs/capacity.md to the model: its sizing
// tables must be what .ci/capacity prints from .ci/capacity.d/inputs, so a
// changed input or a changed rule shows in the document, or fails here.
func TestCapacityTablesCurrent(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), filepath.Join(".ci", "capacity")).Output()
	if err != nil {
		t.Fatalf(".ci/capacity: %v", err)
	}
	doc, err := os.ReadFile(filepath.Join("docs", "capacity.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), string(out)) {
		t.Errorf("docs/capacity.md does not hold what .ci/capacity prints now; paste it in place of the tables:\n%s", out)
	}
}

// TestCapacityModel checks the model's rules on inputs made for it: the
// replicas come from cores at the target utilisation, never fewer than
// the minimum, and a catalog that outgrows the pod's memory is named as
// its first limit.
func TestCapacityModel(t *testing.T) {
	inputs, err := os.ReadFile(filepath.Join(".ci", "capacity.d", "inputs"))
	if err != nil {
		t.Fatal(err)
	}
	// Every path costs 100 µs a request, a pod serves 0.5 CPU at the
	// autoscaler's target: 1,000 requests/s take 0.1 cores and the minimum
	// of 3 replicas, 100,000 take 10 cores and 20 replicas.
	set := map[string]string{
		"cpu_bearer_cached": "100", "cpu_bearer_shared_limit": "100", "cpu_dpop_shared": "100", "cpu_bearer_rs256_uncached": "100",
		"cpu_dpop": "100", "cpu_pg_request": "100", "pod_cpu_target": "0.5",
		"min_replicas": "3", "max_replicas": "100", "replay_entries": "1000000000",
		"pg_max_connections": "100000", "redis_us_rate": "1", "redis_us_dpop": "1",
		"mem_base_mb": "100", "token_cache_mb": "0", "plant_bytes": "1048.576", "reload_factor": "1", "pod_mem_mb": "1000",
	}
	var lines []string
	for _, l := range strings.Split(string(inputs), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && !strings.HasPrefix(f[0], "#") {
			if v, ok := set[f[0]]; ok {
				l = f[0] + " " + v
				delete(set, f[0])
			}
		}
		lines = append(lines, l)
	}
	if len(set) != 0 {
		t.Fatalf("inputs the test sets are missing from the inputs file: %v", set)
	}
	path := filepath.Join(t.TempDir(), "inputs")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), "awk", "-f", filepath.Join(".ci", "capacity.d", "model.awk"), path).Output()
	if err != nil {
		t.Fatalf("model.awk: %v", err)
	}
	for _, want := range []string{
		"| 1,000 | bearer, cached token, no -rate-limit (with or without -redis-url) | 100.0 | 0.10 | 3 |",
		"| 100,000 | bearer, cached token, no -rate-limit (with or without -redis-url) | 100.0 | 10.0 | 20 |",
		// 100 MiB + 1,000 B a plant: 10,000,000 plants are 10,100 MiB.
		"| 1,000 | 1,000,000 | 3 | 1100 MiB | 0.8 s | 3,000,000 | memory per pod (1100 MiB > 1000 MiB) |",
		"| 1,000 | 100,000 | 3 | 200 MiB | 0.1 s | 300,000 | none |",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the model's tables lack %q:\n%s", want, out)
		}
	}
}

// TestCapacityInputsMatchCode holds the model's inputs to the figures the
// import guard computes with (postgres.Budget): the process at rest, the
// token cache's default bound, a full replay cache and the replicas'
// memory by default must be those of .ci/capacity.d/inputs, so the guard
// and docs/capacity.md count the same memory.
func TestCapacityInputsMatchCode(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(".ci", "capacity.d", "inputs"))
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]float64{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && !strings.HasPrefix(f[0], "#") {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatalf("inputs: %s: %v", l, err)
			}
			in[f[0]] = v
		}
	}
	const mib = 1 << 20
	tests := []struct {
		input string
		got   float64 // from the inputs
		want  float64 // from the code
	}{
		{"mem_base_mb", in["mem_base_mb"], postgres.ProcessBytes / mib},
		{"token_cache_mb", in["token_cache_mb"], auth.DefaultCacheBytes / mib},
		{"pod_mem_mb", in["pod_mem_mb"], postgres.DefaultMemory / mib},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("inputs %s = %v, the code's %v", tt.input, tt.got, tt.want)
		}
	}
	// The replay cache's bytes: the model's measured figure within the
	// bound the guard counts.
	if full := in["replay_entries"] * in["replay_entry_bytes"]; full > dpop.ReplayCacheBytes || full < dpop.ReplayCacheBytes*9/10 {
		t.Errorf("inputs: a full replay cache of %v bytes, the guard counts %d", full, dpop.ReplayCacheBytes)
	}
}
