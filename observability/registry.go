package observability

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// NewRegistry returns a registry holding the Go runtime and process
// collectors (go_* and process_*) and plantstore_build_info, a gauge of 1
// labelled with version, revision and goversion.
//
// version and revision are normally set at link time; an empty one is
// filled in as [BuildVersion] says.
func NewRegistry(version, revision string) *prometheus.Registry {
	version, revision = BuildVersion(version, revision)
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "plantstore_build_info",
			Help: "A metric with a constant '1' value labelled by the version, revision and Go version plantstore was built from.",
			ConstLabels: prometheus.Labels{
				"version":   version,
				"revision":  revision,
				"goversion": runtime.Version(),
			},
		}, func() float64 { return 1 }),
	)
	return reg
}

// BuildVersion returns version and revision, the values stamped at link
// time, with an empty one taken from the build information the Go
// toolchain embeds (the main module's version, the vcs.revision setting),
// or "unknown" when that is missing too.
func BuildVersion(version, revision string) (string, string) {
	bi, _ := debug.ReadBuildInfo()
	return buildVersion(version, revision, bi)
}

// buildVersion fills an empty version or revision from bi, the embedded
// build information (nil when there is none).
func buildVersion(version, revision string, bi *debug.BuildInfo) (string, string) {
	if version != "" && revision != "" {
		return version, revision
	}
	var mainVersion, vcsRevision string
	if bi != nil {
		if v := bi.Main.Version; v != "(devel)" {
			mainVersion = v
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				vcsRevision = s.Value
			}
		}
	}
	return firstNonEmpty(version, mainVersion, "unknown"), firstNonEmpty(revision, vcsRevision, "unknown")
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
