package plants

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"unicode/utf8"
)

// A Key is the sort key of a plant: its name, then its id, both compared
// byte by byte. The contract's order is the order of keys, and a keyset
// page starts strictly after the key of the last plant of the page before.
// The zero Key sorts before every plant (names are never empty).
type Key struct {
	Name, ID string
}

// KeyOf returns the sort key of p.
func KeyOf(p Plant) Key { return Key{Name: p.Name, ID: p.ID} }

// Compare returns -1, 0 or +1 as k sorts before, with or after o.
func (k Key) Compare(o Key) int {
	if c := strings.Compare(k.Name, o.Name); c != 0 {
		return c
	}
	return strings.Compare(k.ID, o.ID)
}

// IsZero reports whether k is the zero Key, which names no plant.
func (k Key) IsZero() bool { return k.Name == "" && k.ID == "" }

// MaxCursorLen is the length, in base64url characters, of the longest
// cursor [ParseCursor] accepts. A key whose name and id take more than
// [MaxCursorKeyBytes] in all may make a longer one.
const MaxCursorLen = 512

// MaxCursorKeyBytes is the number of bytes of name and id together that
// still fit in a cursor of [MaxCursorLen] characters: the 384 bytes those
// characters carry, less the version byte and a two-byte length of the
// name.
const MaxCursorKeyBytes = MaxCursorLen/4*3 - 3

// cursorVersion is the first byte of every cursor: the layout of the rest
// (the name's length as an unsigned varint, the name, the id). A cursor
// of another version is refused, so the layout can change without an old
// cursor being read the new way.
const cursorVersion = 1

// cursorEncoding is base64url without padding (RFC 4648 §5), strict: the
// unused bits of the last character must be zero, so each key has exactly
// one cursor.
var cursorEncoding = base64.RawURLEncoding.Strict()

// ErrBadCursor reports a cursor that does not decode to a key.
var ErrBadCursor = errors.New("not a cursor this service made")

// Cursor returns the opaque cursor of k: base64url without padding of a
// version byte, the name's length and the name and id bytes. It holds
// nothing but the key, is the same on every store and replica, and is no
// credential: the access rule still applies to every page.
func (k Key) Cursor() string { return string(k.AppendCursor(nil)) }

// AppendCursor appends [Key.Cursor] of k to dst and returns the result.
func (k Key) AppendCursor(dst []byte) []byte {
	var scratch [256]byte // most keys: no allocation
	b := append(scratch[:0], cursorVersion)
	b = binary.AppendUvarint(b, uint64(len(k.Name)))
	b = append(b, k.Name...)
	b = append(b, k.ID...)
	return cursorEncoding.AppendEncode(dst, b)
}

// ParseCursor returns the key of a cursor made by [Key.Cursor]. Anything
// else is an error wrapping [ErrBadCursor]: an empty string, a string over
// [MaxCursorLen] characters, one that is not strict unpadded base64url, of
// another version (or holding a line break, which the base64 decoder
// would skip), with a length that does not fit, or with an empty or
// invalid UTF-8 name or id, or one holding U+0000 (which no catalog
// holds).
func ParseCursor(s string) (Key, error) {
	if s == "" || len(s) > MaxCursorLen {
		return Key{}, ErrBadCursor
	}
	var buf [MaxCursorLen / 4 * 3]byte
	n, err := cursorEncoding.Decode(buf[:], []byte(s))
	// The decoder skips CR and LF; a cursor holds neither, so every
	// character must have been decoded.
	if err != nil || n < 1 || cursorEncoding.EncodedLen(n) != len(s) || buf[0] != cursorVersion {
		return Key{}, ErrBadCursor
	}
	b := buf[1:n]
	nameLen, w := binary.Uvarint(b)
	if w <= 0 || nameLen > uint64(len(b)-w) {
		return Key{}, ErrBadCursor
	}
	// The shortest varint only: one key, one cursor.
	if w != len(binary.AppendUvarint(nil, nameLen)) {
		return Key{}, ErrBadCursor
	}
	b = b[w:]
	if !validKeyPart(b[:nameLen]) || !validKeyPart(b[nameLen:]) {
		return Key{}, ErrBadCursor
	}
	key := string(b) // name and id in one allocation
	return Key{Name: key[:nameLen], ID: key[nameLen:]}, nil
}

// validKeyPart reports whether b could be a catalog name or id: non-empty
// UTF-8 without U+0000.
func validKeyPart(b []byte) bool {
	if len(b) == 0 || !utf8.Valid(b) {
		return false
	}
	for _, c := range b {
		if c == 0 {
			return false
		}
	}
	return true
}
