package postgres_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
)

// TestBudget: the catalog's share of a replica's memory is what the
// process and both caches leave, over two copies of BytesPerTextByte a
// byte; a memory the rest fills is refused.
func TestBudget(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name    string
		b       postgres.Budget
		want    int64
		wantErr bool
	}{
		// 230 - 49 - 32 - 44 = 105 MiB, over 7 x 2: 7.5 MiB.
		{"the base Deployment", postgres.Budget{Memory: 230 * mib, TokenCache: 32 * mib, ReplayCache: 44 * mib}, 105 * mib / 14, false},
		{"a GiB", postgres.Budget{Memory: 1024 * mib, TokenCache: 32 * mib, ReplayCache: 44 * mib}, 899 * mib / 14, false},
		{"no token cache", postgres.Budget{Memory: 230 * mib, ReplayCache: 44 * mib}, 137 * mib / 14, false},
		{"the caches fill it", postgres.Budget{Memory: 120 * mib, TokenCache: 32 * mib, ReplayCache: 44 * mib}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.MaxCatalogBytes(); got != tt.want {
				t.Errorf("%+v.MaxCatalogBytes() = %d, want %d", tt.b, got, tt.want)
			}
			err := tt.b.Check()
			if (err != nil) != tt.wantErr {
				t.Errorf("%+v.Check() = %v, want an error: %v", tt.b, err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "holds no catalog") {
				t.Errorf("%+v.Check() = %v, want it to say the memory holds no catalog", tt.b, err)
			}
		})
	}
}

// TestCatalogMemory measures the heap a served catalog takes per byte of
// its text: within BytesPerTextByte when every plant has its own three
// readers (the costly shape Budget assumes), and under half of that when
// the plants share a few reader lists.
func TestCatalogMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two catalogs of 200,000 plants")
	}
	const n = 200000
	measure := func(readers func(i int) [][]byte) float64 {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		b := plants.NewCatalogBuilder(n, 0)
		text := 0
		for i := range n {
			id, name, tag := fmt.Appendf(nil, "p%07d", i), fmt.Appendf(nil, "Plant number %07d", i), fmt.Appendf(nil, "tag%02d", i%50)
			rs := readers(i)
			text += len(id) + len(name) + len(tag)
			for _, r := range rs {
				text += len(r)
			}
			if err := b.Add(id, name, tag, rs); err != nil {
				t.Fatal(err)
			}
		}
		c, err := b.Catalog()
		if err != nil {
			t.Fatal(err)
		}
		s := plants.NewMemoryStore(c, nil)
		runtime.GC()
		runtime.ReadMemStats(&m1)
		runtime.KeepAlive(s)
		return float64(m1.HeapAlloc-m0.HeapAlloc) / float64(text)
	}
	own := measure(func(i int) [][]byte {
		return [][]byte{fmt.Appendf(nil, "user:u%07d", i), fmt.Appendf(nil, "group:g%07d", i), fmt.Appendf(nil, "group:h%07d", i)}
	})
	shared := measure(func(i int) [][]byte { return [][]byte{[]byte("*"), fmt.Appendf(nil, "group:g%d", i%3)} })
	t.Logf("heap per byte of text: %.2f with readers of their own, %.2f shared", own, shared)
	if own > postgres.BytesPerTextByte || own < postgres.BytesPerTextByte*0.7 {
		t.Errorf("a catalog whose plants have readers of their own takes %.2f bytes of heap per byte of text; BytesPerTextByte %d should bound it closely", own, postgres.BytesPerTextByte)
	}
	if shared > own/2 {
		t.Errorf("shared readers take %.2f bytes per byte of text, over half of %.2f", shared, own)
	}
}
