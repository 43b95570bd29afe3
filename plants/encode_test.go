package plants

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
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
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Errorf("appendJSONString(%q) = %s; want %s", s, got, want)
		}
	}
}

func TestAppendPlantJSON(t *testing.T) {
	tests := []struct {
		p    Plant
		want string
	}{
		{Plant{ID: "secret-id", Name: "Basil", Readers: []string{"*"}}, `{"name":"Basil"}`},
		{Plant{ID: "x", Name: "Aloe", Tag: "succulent", Readers: []string{"user:u"}}, `{"name":"Aloe","tag":"succulent"}`},
		{Plant{Name: "a<b", Tag: "\n"}, `{"name":"a\u003cb","tag":"\n"}`},
	}
	for _, tt := range tests {
		if got := appendPlantJSON(nil, tt.p); string(got) != tt.want {
			t.Errorf("appendPlantJSON(%+v) = %s; want %s", tt.p, got, tt.want)
		}
	}
}

// BenchmarkAppendPlantJSON encodes one plant of the common shape (ASCII
// name and tag, nothing to escape), as the list handler does per plant.
func BenchmarkAppendPlantJSON(b *testing.B) {
	p := Plant{Name: "Monstera deliciosa 000123", Tag: "aroid"}
	buf := make([]byte, 0, 256)
	b.SetBytes(int64(len(appendPlantJSON(nil, p))))
	for b.Loop() {
		buf = appendPlantJSON(buf[:0], p)
	}
}
