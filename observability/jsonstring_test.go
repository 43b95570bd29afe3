package observability_test

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/plantstore/plantstore/observability"
)

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	tests := []string{
		"", "Basil", `a"b\c`, "\x00\x01\b\f\n\r\t\x1f\x7f", "<script>&</script>",
		"é 🌵 \u2028 \u2029", "\xff", "a\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "\"", "\\", "\x00", "\x1f", "<", "&", "é", "\u2028", "\xff", "\xc3", "🌵", "\x80"}
	for range 2000 {
		var b []byte
		for range rng.IntN(12) {
			if rng.IntN(3) == 0 {
				b = append(b, byte(rng.IntN(256)))
			} else {
				b = append(b, alphabet[rng.IntN(len(alphabet))]...)
			}
		}
		tests = append(tests, string(b))
	}
	for _, s := range tests {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := observability.AppendJSONString(nil, s); string(got) != string(want) {
			t.Errorf("AppendJSONString(%q) = %s; want %s", s, got, want)
		}
	}
}
