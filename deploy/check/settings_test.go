package check_test

import (
	"os/exec"
	"regexp"
	"slices"
	"testing"

	"github.com/plantstore/plantstore/deploy/check"
)

// TestSettingsMatchBinary: the serve flags the policy knows are those the
// built binary lists in "serve -h", each with its PLANTSTORE_* variable;
// a pending flag is one the binary does not have yet.
func TestSettingsMatchBinary(t *testing.T) {
	bin := plantstoreBin(t)
	out, _ := exec.CommandContext(t.Context(), bin, "serve", "-h").CombinedOutput()
	flags := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1)
	if len(flags) < 10 {
		t.Fatalf("serve -h lists %d flags; its output:\n%s", len(flags), out)
	}
	var listed []string
	for _, f := range flags {
		if f[1] == "dev" {
			continue // no variable
		}
		listed = append(listed, f[1])
		if !regexp.MustCompile(`env ` + check.SettingVariable(f[1]) + `\)`).Match(out) {
			t.Errorf("serve -h: -%s does not name its variable %s", f[1], check.SettingVariable(f[1]))
		}
	}
	served := check.ServedSettings()
	for _, f := range listed {
		if !slices.Contains(served, f) {
			t.Errorf("the binary has -%s, which the policy does not know (settings.go)", f)
		}
	}
	for _, f := range served {
		if !slices.Contains(listed, f) {
			t.Errorf("settings.go lists -%s, which serve -h does not", f)
		}
	}
}
