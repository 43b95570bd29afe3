package plants_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/plantstore/plantstore/plants"
)

// TestCursorRoundTrip: a key's cursor decodes to the key, is base64url
// without padding, and is the same bytes for the same key (the
// version-1 layout, pinned: replicas of another build must agree).
func TestCursorRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		key  plants.Key
		want string
	}{
		{plants.Key{Name: "Aloe vera", ID: "aloe-vera"}, "AQlBbG9lIHZlcmFhbG9lLXZlcmE"},
		{plants.Key{Name: "tie", ID: "0000000010"}, "AQN0aWUwMDAwMDAwMDEw"},
		{plants.Key{Name: "😀", ID: "é"}, "AQTwn5iAw6k"},
	} {
		got := tt.key.Cursor()
		if got != tt.want {
			t.Errorf("%+v: cursor %q; want %q", tt.key, got, tt.want)
		}
		k, err := plants.ParseCursor(got)
		if err != nil || k != tt.key {
			t.Errorf("ParseCursor(%q) = %+v, %v; want %+v", got, k, err, tt.key)
		}
	}
	// The longest key that fits.
	long := plants.Key{Name: strings.Repeat("n", plants.MaxCursorKeyBytes-1), ID: "i"}
	if c := long.Cursor(); len(c) > plants.MaxCursorLen {
		t.Errorf("a key of %d bytes makes a cursor of %d characters", plants.MaxCursorKeyBytes, len(c))
	} else if k, err := plants.ParseCursor(c); err != nil || k != long {
		t.Errorf("the longest key: %v", err)
	}
}

// TestParseCursorRefuses: what no key's cursor is.
func TestParseCursorRefuses(t *testing.T) {
	enc := func(b ...byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	good := plants.Key{Name: "n", ID: "i"}.Cursor()
	for _, s := range []string{
		"",
		"A",
		good + "=",
		good[:len(good)-1] + "j",  // non-zero unused bits
		"AQFu/Q",                  // the standard alphabet
		enc(2, 1, 'n', 'i'),       // another version
		enc(1),                    // no length
		enc(1, 0, 'i'),            // empty name
		enc(1, 1, 'n'),            // empty id
		enc(1, 5, 'n', 'i'),       // length past the end
		enc(1, 0x81, 0, 'n', 'i'), // a length not in its shortest form
		enc(1, 1, 0, 'i'),         // U+0000
		enc(1, 1, 'n', 0xff),      // not UTF-8
		strings.Repeat("A", plants.MaxCursorLen+1),
		"AQ+uaQ",
		"A\rQTxn720070", // line breaks the decoder skips
		"AQlBbG9lIHZlcmFhbG9l\nLXZlcmE",
	} {
		if k, err := plants.ParseCursor(s); !errors.Is(err, plants.ErrBadCursor) {
			t.Errorf("ParseCursor(%q) = %+v, %v; want ErrBadCursor", s, k, err)
		}
	}
}

// FuzzParseCursor feeds any string to ParseCursor. It must never panic; a
// key it returns has a non-empty UTF-8 name and id and encodes back to the
// same string (one cursor per key); the cursor of any valid key that fits
// decodes to it.
func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "AQlBbG9lIHZlcmFhbG9lLXZlcmE", "AQN0aWUwMDAwMDAwMDEw", "AQTwn5iAw6k", "AQ", "AgFuaQ", strings.Repeat("_", 513)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := plants.ParseCursor(s)
		if err == nil {
			if k.Name == "" || k.ID == "" || !utf8.ValidString(k.Name) || !utf8.ValidString(k.ID) {
				t.Fatalf("ParseCursor(%q) = %+v: not a key", s, k)
			}
			if c := k.Cursor(); c != s {
				t.Fatalf("ParseCursor(%q) = %+v, whose cursor is %q", s, k, c)
			}
		} else if !errors.Is(err, plants.ErrBadCursor) {
			t.Fatalf("ParseCursor(%q): %v; want ErrBadCursor", s, err)
		}
		// s as a key, split in two.
		name, id, _ := strings.Cut(s, ",")
		key := plants.Key{Name: name, ID: id}
		if name == "" || id == "" || !utf8.ValidString(s) || strings.ContainsRune(s, 0) || len(name)+len(id) > plants.MaxCursorKeyBytes {
			return
		}
		if got, err := plants.ParseCursor(key.Cursor()); err != nil || got != key {
			t.Fatalf("key %+v: cursor %q decodes to %+v, %v", key, key.Cursor(), got, err)
		}
	})
}
