package observability_test

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/plantstore/plantstore/observability"
)

func TestBuildVersion(t *testing.T) {
	stamped := &debug.BuildInfo{
		Main:     debug.Module{Path: "github.com/plantstore/plantstore", Version: "v0.4.0"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "feedface"}},
	}
	devel := &debug.BuildInfo{Main: debug.Module{Path: "github.com/plantstore/plantstore", Version: "(devel)"}}
	tests := []struct {
		name              string
		version, revision string
		bi                *debug.BuildInfo
		wantVersion       string
		wantRev           string
	}{
		{"given", "v1.2.3", "0123abcd", stamped, "v1.2.3", "0123abcd"},
		{"revision from build info", "v1.2.3", "", stamped, "v1.2.3", "feedface"},
		{"version from build info", "", "0123abcd", stamped, "v0.4.0", "0123abcd"},
		{"both from build info", "", "", stamped, "v0.4.0", "feedface"},
		{"devel build", "", "", devel, "unknown", "unknown"},
		{"devel build, version given", "v1.2.3", "", devel, "v1.2.3", "unknown"},
		{"no build info", "", "", nil, "unknown", "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, r := observability.BuildVersionOf(tt.version, tt.revision, tt.bi)
			if v != tt.wantVersion || r != tt.wantRev {
				t.Errorf("buildVersion(%q, %q, %s) = %q, %q; want %q, %q", tt.version, tt.revision, tt.name, v, r, tt.wantVersion, tt.wantRev)
			}
		})
	}
}

func TestNewRegistry(t *testing.T) {
	bi, _ := debug.ReadBuildInfo()
	// This binary's own build information, as NewRegistry reads it.
	binVersion, binRev := observability.BuildVersionOf("", "", bi)
	tests := []struct {
		name, version, revision string
		wantVersion, wantRev    string
	}{
		{"given", "v1.2.3", "0123abcd", "v1.2.3", "0123abcd"},
		{"revision from build info", "v1.2.3", "", "v1.2.3", binRev},
		{"both from build info", "", "", binVersion, binRev},
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
			want := map[string]string{"version": tt.wantVersion, "revision": tt.wantRev, "goversion": runtime.Version()}
			if len(labels) != len(want) {
				t.Errorf("plantstore_build_info labels = %v, want %v", labels, want)
			}
			for k, v := range want {
				if labels[k] != v {
					t.Errorf("NewRegistry(%q, %q): %s = %q, want %q", tt.version, tt.revision, k, labels[k], v)
				}
			}
		})
	}
}
