package api

import (
	"testing"

	"github.com/plantstore/plantstore/plants"
)

func TestAppendPlantJSON(t *testing.T) {
	tests := []struct {
		p    plants.Plant
		want string
	}{
		{plants.Plant{ID: "secret-id", Name: "Basil", Readers: []string{"*"}}, `{"name":"Basil"}`},
		{plants.Plant{ID: "x", Name: "Aloe", Tag: "succulent", Readers: []string{"user:u"}}, `{"name":"Aloe","tag":"succulent"}`},
		{plants.Plant{Name: "a<b", Tag: "\n"}, `{"name":"a\u003cb","tag":"\n"}`},
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
	p := plants.Plant{Name: "Monstera deliciosa 000123", Tag: "aroid"}
	buf := make([]byte, 0, 256)
	b.SetBytes(int64(len(appendPlantJSON(nil, p))))
	for b.Loop() {
		buf = appendPlantJSON(buf[:0], p)
	}
}
