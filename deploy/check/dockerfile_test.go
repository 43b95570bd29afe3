package check_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/subrequests/lint"
	digest "github.com/opencontainers/go-digest"
)

// lintDockerfile runs BuildKit's "docker build --check" rules on dt without
// reaching a registry, and returns one "line N: Rule: detail" per warning.
func lintDockerfile(t testing.TB, dt []byte) []string {
	t.Helper()
	st := llb.Local("dockerfile")
	sm := llb.NewSourceMap(&st, "Dockerfile", "", dt)
	def, err := st.Marshal(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	sm.Definition = def
	res, err := dockerfile2llb.DockerfileLint(t.Context(), dt, dockerfile2llb.ConvertOpt{MetaResolver: offline{}, SourceMap: sm})
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	return warnings(res)
}

func warnings(res *lint.LintResults) []string {
	var out []string
	for _, w := range res.Warnings {
		line := 0
		if w.Location != nil && len(w.Location.Ranges) > 0 {
			line = int(w.Location.Ranges[0].Start.Line)
		}
		out = append(out, fmt.Sprintf("line %d: %s: %s", line, w.RuleName, w.Detail))
	}
	if res.Error != nil {
		out = append(out, "error: "+res.Error.Message)
	}
	return out
}

// offline resolves every base image to an empty config, so that the rules
// that look at base images run without a registry.
type offline struct{}

func (offline) ResolveImageConfig(_ context.Context, ref string, _ sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	return ref, digest.FromString(ref), []byte(`{"architecture":"amd64","os":"linux","config":{},"rootfs":{"type":"layers","diff_ids":[]}}`), nil
}

func TestDockerfileLint(t *testing.T) {
	top, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dt   string
		want []string // rule names expected; none for the real Dockerfile
	}{
		{"Dockerfile", string(top), nil},
		{"experimental rules", "# check=experimental=all\n" + string(top), nil},
		{"broken", "from golang:1.26 as Build\nMAINTAINER me\nWORKDIR src\nENV A 1\nCMD go run .\n",
			[]string{"ConsistentInstructionCasing", "StageNameCasing", "MaintainerDeprecated", "WorkdirRelativePath", "LegacyKeyValueFormat", "JSONArgsRecommended"}},
		{"parse error", "FROM scratch\nMAINTAINR me\n", []string{"unknown instruction: MAINTAINR"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := lintDockerfile(t, []byte(tt.dt))
			if tt.want == nil {
				if len(got) > 0 {
					t.Errorf("lint %s: got\n  %s\nwant no warnings", tt.name, strings.Join(got, "\n  "))
				}
				return
			}
			all := strings.Join(got, "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("lint %q: got\n  %s\nwant %s among them", tt.dt, strings.Join(got, "\n  "), w)
				}
			}
		})
	}
}
