package check_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
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

// buildProblems parses a Dockerfile with BuildKit's parser and returns how
// its build falls short of issue 17: the build stage must run on the
// builder's platform and compile for the target's (TARGETOS/TARGETARCH),
// with cache mounts for the module and build caches, and every base image
// must be a build argument (so a digest-pinned reference can be given).
func buildProblems(t testing.TB, dt []byte) []string {
	t.Helper()
	res, err := parser.Parse(bytes.NewReader(dt))
	if err != nil {
		t.Fatal(err)
	}
	stages, metaArgs, err := instructions.Parse(res.AST, nil)
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	args := map[string]string{}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			if kv.Value != nil {
				args[kv.Key] = *kv.Value
			}
		}
	}
	for _, st := range stages {
		name, ok := strings.CutPrefix(st.BaseName, "${")
		name, _ = strings.CutSuffix(name, "}")
		if !ok || args[name] == "" {
			problems = append(problems, fmt.Sprintf("stage %q: base image %s is not a build argument with a default", st.Name, st.BaseName))
		}
	}
	build := slices.IndexFunc(stages, func(s instructions.Stage) bool { return s.Name == "build" })
	if build < 0 {
		return append(problems, "no stage named build")
	}
	st := stages[build]
	if st.Platform != "$BUILDPLATFORM" {
		problems = append(problems, fmt.Sprintf("stage build: --platform=%q, want $BUILDPLATFORM", st.Platform))
	}
	declared := map[string]bool{}
	compiled := false
	for _, c := range st.Commands {
		switch c := c.(type) {
		case *instructions.ArgCommand:
			for _, kv := range c.Args {
				declared[kv.Key] = true
			}
		case *instructions.RunCommand:
			line := strings.Join(c.CmdLine, " ")
			if !strings.Contains(line, "go build") && !strings.Contains(line, "go mod download") {
				continue
			}
			// Mount options are parsed when the command is expanded; the
			// words here hold no variables.
			if err := c.Expand(func(word string) (string, error) { return word, nil }); err != nil {
				t.Fatal(err)
			}
			caches := map[string]bool{}
			for _, m := range instructions.GetMounts(c) {
				if m.Type == instructions.MountTypeCache {
					caches[m.Target] = true
				}
			}
			if !caches["/go/pkg/mod"] {
				problems = append(problems, fmt.Sprintf("%q: no cache mount of /go/pkg/mod", line))
			}
			if strings.Contains(line, "go build") {
				compiled = true
				if !caches["/root/.cache/go-build"] {
					problems = append(problems, fmt.Sprintf("%q: no cache mount of /root/.cache/go-build", line))
				}
				if !strings.Contains(line, "GOOS=${TARGETOS}") || !strings.Contains(line, "GOARCH=${TARGETARCH}") {
					problems = append(problems, fmt.Sprintf("%q: does not compile for TARGETOS/TARGETARCH", line))
				}
			}
		}
	}
	if !compiled {
		problems = append(problems, "stage build: no go build")
	}
	if !declared["TARGETOS"] || !declared["TARGETARCH"] {
		problems = append(problems, "stage build: ARG TARGETOS and TARGETARCH are not declared")
	}
	return problems
}

func TestDockerfileBuildsForTargets(t *testing.T) {
	top, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if got := buildProblems(t, top); len(got) > 0 {
		t.Errorf("Dockerfile:\n  %s", strings.Join(got, "\n  "))
	}
	// The Dockerfile before issue 17: no platform, no cache mounts, no
	// cross-compilation.
	old, err := os.ReadFile(filepath.Join("testdata", "before", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(buildProblems(t, old), "\n")
	for _, want := range []string{"want $BUILDPLATFORM", "no cache mount of /go/pkg/mod", "no cache mount of /root/.cache/go-build", "does not compile for TARGETOS/TARGETARCH", "ARG TARGETOS and TARGETARCH"} {
		if !strings.Contains(got, want) {
			t.Errorf("testdata/before/Dockerfile: problems\n  %s\nwant one containing %q", got, want)
		}
	}
}
