package plants

import (
	"fmt"
	"testing"
)

// TestBuilderSharesReaderLists checks which plants share one list of
// readers: those whose readers are equal, and no others, whatever bytes
// their readers join to. Readers given with repeats get a list of their
// own, without the repeats.
func TestBuilderSharesReaderLists(t *testing.T) {
	tests := []struct {
		name    string
		readers [][]string
		want    int // reader lists in the catalog
	}{
		{"equal", [][]string{{"*", "user:a"}, {"*", "user:a"}, {"*", "user:a"}}, 1},
		{"repeats", [][]string{{"*", "user:a"}, {"*", "*", "user:a", "*"}, {"*", "user:a", "*", "*"}}, 3},
		{"order kept", [][]string{{"*", "user:a"}, {"user:a", "*"}}, 2},
		{"one more", [][]string{{"*", "user:a"}, {"*", "user:a", "user:b"}}, 2},
		{"one less", [][]string{{"*", "user:a", "user:b"}, {"*", "user:a"}}, 2},
		{"same bytes joined", [][]string{{"user:ab"}, {"user:a", "user:b"}, {"user:a"}, {"user:ab"}}, 3},
		{"repeat in place of another", [][]string{{"user:a", "user:b"}, {"user:a", "user:a"}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewCatalogBuilder(0, 0)
			for i, rs := range tt.readers {
				var readers [][]byte
				for _, r := range rs {
					readers = append(readers, []byte(r))
				}
				if err := b.AddWithoutID([]byte(fmt.Sprint("plant ", i)), nil, readers); err != nil {
					t.Fatal(err)
				}
			}
			c, err := b.Catalog()
			if err != nil {
				t.Fatal(err)
			}
			if got := len(c.readerSets); got != tt.want {
				t.Errorf("readers %q: %d lists; want %d", tt.readers, got, tt.want)
			}
		})
	}
}

// TestBuilderStopsLookingForLists builds a catalog whose first
// maxRememberedSets plants each have readers of their own: the builder
// stops looking for lists again, and the plants after them, though they
// repeat earlier lists, get lists of their own. A catalog whose lists
// come back often enough keeps sharing them past that size.
func TestBuilderStopsLookingForLists(t *testing.T) {
	for _, tt := range []struct {
		name   string
		period int // plant i has the readers of plant i mod period
		want   int // reader lists in the catalog
	}{
		{"few found", maxRememberedSets + 100, maxRememberedSets + 200},
		{"enough found", maxRememberedSets + 100 - maxRememberedSets/8, maxRememberedSets + 100 - maxRememberedSets/8},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := NewCatalogBuilder(0, 0)
			star := []byte("*")
			var user []byte
			for i := range maxRememberedSets + 200 {
				user = fmt.Appendf(user[:0], "user:u%d", i%tt.period)
				if err := b.AddWithoutID(user, nil, [][]byte{user, star}); err != nil {
					t.Fatal(err)
				}
			}
			c, err := b.Catalog()
			if err != nil {
				t.Fatal(err)
			}
			if got := len(c.readerSets); got != tt.want {
				t.Errorf("%d lists; want %d", got, tt.want)
			}
		})
	}
}
