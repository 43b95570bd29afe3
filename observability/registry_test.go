package observability_test

import (
	"runtime"
	"testing"

	"github.com/plantstore/plantstore/observability"
)

func TestNewRegistry(t *testing.T) {
	tests := []struct {
		name, version, revision string
		wantVersion, wantRev    string // "" when only non-empty is known
	}{
		{"given", "v1.2.3", "0123abcd", "v1.2.3", "0123abcd"},
		{"revision from build info", "v1.2.3", "", "v1.2.3", ""},
		{"both from build info", "", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := observability.NewRegistry(tt.version, tt.revision)
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatalf("Gather: %v", err)
			}
			names := map[string]bool{}
			var labels map[string]string
			var value float64
			for _, mf := range mfs {
				names[mf.GetName()] = true
				if mf.GetName() != "plantstore_build_info" {
					continue
				}
				if n := len(mf.GetMetric()); n != 1 {
					t.Fatalf("plantstore_build_info has %d series, want 1", n)
				}
				m := mf.GetMetric()[0]
				value = m.GetGauge().GetValue()
				labels = map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
			}
			for _, n := range []string{"go_goroutines", "process_start_time_seconds", "plantstore_build_info"} {
				if !names[n] {
					t.Errorf("NewRegistry(%q, %q) gathers no %s", tt.version, tt.revision, n)
				}
			}
			if value != 1 {
				t.Errorf("plantstore_build_info = %v, want 1", value)
			}
			if len(labels) != 3 {
				t.Errorf("plantstore_build_info labels = %v, want version, revision, goversion", labels)
			}
			check := func(key, want string) {
				got := labels[key]
				if (want != "" && got != want) || got == "" || got == "(devel)" {
					t.Errorf("NewRegistry(%q, %q): %s = %q, want %q (or a non-empty fallback)", tt.version, tt.revision, key, got, want)
				}
			}
			check("version", tt.wantVersion)
			check("revision", tt.wantRev)
			check("goversion", runtime.Version())
		})
	}
}
