package main

import (
	"strings"
	"testing"
)

// TestUnlistedResourceWarned: the start warns when an audience list is set
// and -public-url is not, since tokens whose aud is the resource URL the
// metadata publishes (RFC 8707) are then refused; not with -public-url,
// under which that URL is an audience, nor without an audience list.
func TestUnlistedResourceWarned(t *testing.T) {
	secret := hmacSecretFile(t)
	for _, tt := range []struct {
		name string
		args []string
		want bool
	}{
		{"audience without a public URL", []string{"-jwt-audience", "plantstore"}, true},
		{"audience and a public URL", []string{"-jwt-audience", "plantstore", "-public-url", "https://gw.example.com/garden"}, false},
		{"no audience", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := startServe(t, nil, append([]string{"-jwt-hmac-secret-file", secret}, tt.args...)...)
			var warned []map[string]any
			for _, l := range logLines(t, in.stderr.String()) {
				if l["level"] == "warn" && strings.HasPrefix(l["msg"].(string), "tokens whose aud is this resource's URL are refused") {
					warned = append(warned, l)
				}
			}
			switch {
			case tt.want && len(warned) != 1:
				t.Fatalf("%d warnings of the resource URL at start, want 1:\n%s", len(warned), in.stderr)
			case !tt.want && len(warned) != 0:
				t.Fatalf("a warning of the resource URL at start, want none:\n%s", in.stderr)
			case tt.want:
				if of, _ := warned[0]["audiences_of"].([]any); len(of) != 1 || of[0] != "-jwt-audience" || warned[0]["set"] != "PLANTSTORE_PUBLIC_URL" {
					t.Errorf("warning %v; want audiences_of [-jwt-audience] and set PLANTSTORE_PUBLIC_URL", warned[0])
				}
			}
		})
	}
}
