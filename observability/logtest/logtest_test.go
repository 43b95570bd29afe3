package logtest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/observability/logtest"
)

func TestCheckLine(t *testing.T) {
	tests := []struct {
		name, line string
		want       string // part of the error; "" for none
	}{
		{"a log line", `{"level":"info","msg":"request","status":200,"sub":"a"}`, ""},
		{"nested objects", `{"a":{"b":1,"c":[{"b":2},{"b":3}]},"b":{"a":null}}`, ""},
		{"a key twice", `{"msg":"keys reloaded","source":"x","keys":1,"source":"x"}`, `key "source" appears twice in $`},
		{"a key twice in a nested object", `{"a":{"b":1,"b":2}}`, `key "b" appears twice in $.a`},
		{"a key twice in an object in an array", `{"a":[{},{"k":1,"k":1}]}`, `key "k" appears twice in $.a[1]`},
		{"keys that differ in case", `{"msg":"x","MSG":"y"}`, ""},
		{"not JSON", `level=info msg=request`, "not JSON"},
		{"an array", `[{"msg":"x"}]`, "not a JSON object"},
		{"two objects", `{"msg":"x"}{"msg":"y"}`, "data after the object"},
		{"truncated", `{"msg":"x"`, "not JSON"},
	}
	for _, tt := range tests {
		err := logtest.CheckLine([]byte(tt.line))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: CheckLine(%s) = %v; want nil", tt.name, tt.line, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: CheckLine(%s) = %v; want an error holding %q", tt.name, tt.line, err, tt.want)
		}
	}
}

// TestChecker writes lines split across writes, and lines together in one
// write, as a batching writer does.
func TestChecker(t *testing.T) {
	c := &logtest.Checker{Allowed: func(l string) bool { return strings.HasPrefix(l, "plantstore: ") }}
	for _, w := range []string{`{"msg":"a"}` + "\n" + `{"msg":`, `"b","k":1}` + "\n", `{"msg":"a"}` + "\n" + "plantstore: exit\n"} {
		c.Write([]byte(w))
	}
	n, msgs := c.Lines()
	if n != 3 || msgs["a"] != 2 || msgs["b"] != 1 {
		t.Errorf("Lines() = %d, %v; want 3 lines: a twice, b once", n, msgs)
	}
	c.Write([]byte(`{"msg":"c","k":1,"k":2}`)) // no newline: Check takes it
	if n, _ := c.Lines(); n != 3 {
		t.Errorf("Lines() = %d before the last line ends; want 3", n)
	}
	rec := &recorder{TB: t}
	c.Check(rec)
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], `key "k" appears twice`) {
		t.Errorf("Check reported %q; want the last line's repeated key", rec.errors)
	}
}

// recorder is a testing.TB that records errors instead of failing.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// TestCheckerDropPartial: a line cut off by a killed process is dropped,
// not reported; the complete lines before it still count.
func TestCheckerDropPartial(t *testing.T) {
	c := &logtest.Checker{}
	c.Write([]byte(`{"msg":"a"}` + "\n" + `{"msg":"request","sub":"aaaa`))
	c.DropPartial()
	rec := &recorder{TB: t}
	c.Check(rec)
	if n, _ := c.Lines(); len(rec.errors) != 0 || n != 1 {
		t.Errorf("after DropPartial: %d lines, errors %q; want 1 line, none", n, rec.errors)
	}
	c.Write([]byte(`{"msg":"b"`))
	c.Check(rec)
	if len(rec.errors) != 1 {
		t.Errorf("a cut line not dropped: errors %q; want it reported", rec.errors)
	}
}
