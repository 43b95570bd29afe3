package plants

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// This file is the access rule, the one place that says which plants a
// caller may read: a plant is listed iff its readers and the caller's
// principals meet, compared as exact byte strings. A caller's principals
// are made here only: the memory store looks them up in its index, the
// PostgreSQL store sends them in its query, and the -dev banner prints
// them. Readable states the rule for one plant; no store calls it, and the
// tests check the stores against it.

// A Caller is who is asking, as verification established it.
type Caller struct {
	// Issuer is the configured name of the issuer that vouched for the
	// caller, "" for the unnamed issuer of the -jwt-* flags.
	Issuer string
	// Subject is the token's sub.
	Subject string
	// Groups are the token's groups, in any order, possibly repeated.
	Groups []string
}

// Principals returns the principals of c, the names readers use for it,
// without repeats:
//
//   - for the unnamed issuer: "user:<sub>", "group:<g>" for each group, "*";
//   - for an issuer named n: "user@n:<sub>", "group@n:<g>" for each group,
//     "*@n" and "*".
//
// "*" is every authenticated caller of every issuer. An empty subject or
// group gives no principal, and neither does one holding a byte that no
// catalog can hold (U+0000 or invalid UTF-8): no reader could name it, so
// it changes no answer, on any store.
func (c Caller) Principals() []string {
	ps := make([]string, 0, len(c.Groups)+3)
	var buf [128]byte
	// A token may carry hundreds of groups: past a few, repeats are found
	// with a map rather than by comparing each with all before it.
	var seen map[string]struct{}
	if len(c.Groups) > 8 {
		seen = make(map[string]struct{}, len(c.Groups)+3)
	}
	for i := 0; ; i++ {
		p, ok, more := c.principal(i, buf[:0])
		if !more {
			return ps
		}
		if !ok {
			continue
		}
		if seen != nil {
			if _, dup := seen[string(p)]; !dup {
				s := string(p)
				seen[s] = struct{}{}
				ps = append(ps, s)
			}
		} else if !slices.Contains(ps, string(p)) {
			ps = append(ps, string(p))
		}
	}
}

// principal builds in buf the principal number i of c and returns it, or
// ok false when that one does not exist (a subject or group that no
// catalog can hold); more is false past the last. The numbering: the
// subject, the groups in order (repeats included), "*@<issuer>" for a
// named issuer, "*". Callers loop over i with a buffer of their own:
// unlike a callback, the loop keeps that buffer on the stack.
func (c Caller) principal(i int, buf []byte) (p []byte, ok, more bool) {
	qualify := func(kind string) []byte {
		b := append(buf[:0], kind...)
		if c.Issuer != "" {
			b = append(b, '@')
			b = append(b, c.Issuer...)
		}
		return b
	}
	switch {
	case i == 0:
		if !holdable(c.Subject) {
			return nil, false, true
		}
		return append(append(qualify("user"), ':'), c.Subject...), true, true
	case i <= len(c.Groups):
		g := c.Groups[i-1]
		if !holdable(g) {
			return nil, false, true
		}
		return append(append(qualify("group"), ':'), g...), true, true
	case i == len(c.Groups)+1 && c.Issuer != "":
		return qualify("*"), true, true
	case i == len(c.Groups)+1, i == len(c.Groups)+2 && c.Issuer != "":
		return append(buf[:0], '*'), true, true
	}
	return nil, false, false
}

// holdable reports whether s can be part of a reader of a catalog: it is
// not empty, it is valid UTF-8, and it holds no U+0000.
func holdable(s string) bool {
	return s != "" && utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// Readable reports whether c may read a plant with the given readers:
// whether readers and c's principals meet. The stores answer the same
// question from their indexes, for all plants at once; Readable is the
// rule as it reads, the oracle of their tests (package storetest).
func Readable(readers []string, c Caller) bool {
	var buf [128]byte
	for i := 0; ; i++ {
		p, ok, more := c.principal(i, buf[:0])
		if !more {
			return false
		}
		if ok && slices.Contains(readers, string(p)) {
			return true
		}
	}
}

// ValidReader reports whether r is a reader a catalog may hold: "*",
// "user:<x>" or "group:<x>" for the unnamed issuer, "*@<name>",
// "user@<name>:<x>" or "group@<name>:<x>" for an issuer named name
// ([ValidIssuerName]), with a non-empty x that [Caller.Principals] could
// produce (valid UTF-8 without U+0000).
func ValidReader(r string) bool {
	if r == "*" {
		return true
	}
	if name, ok := strings.CutPrefix(r, "*@"); ok {
		return ValidIssuerName(name)
	}
	for _, kind := range []string{"user", "group"} {
		rest, ok := strings.CutPrefix(r, kind)
		if !ok {
			continue
		}
		if x, ok := strings.CutPrefix(rest, ":"); ok {
			return holdable(x)
		}
		if rest, ok = strings.CutPrefix(rest, "@"); ok {
			name, x, ok := strings.Cut(rest, ":")
			return ok && ValidIssuerName(name) && holdable(x)
		}
	}
	return false
}

// readerIssuer returns the name of the issuer whose callers a valid reader
// names: "" for "user:<x>" and "group:<x>", the unnamed issuer's, and n
// for "*@n", "user@n:<x>" and "group@n:<x>"; every is true for "*", which
// names every caller of every issuer.
func readerIssuer(r string) (name string, every bool) {
	if r == "*" {
		return "", true
	}
	if name, ok := strings.CutPrefix(r, "*@"); ok {
		return name, false
	}
	for _, kind := range []string{"user@", "group@"} {
		if rest, ok := strings.CutPrefix(r, kind); ok {
			name, _, _ := strings.Cut(rest, ":")
			return name, false
		}
	}
	return "", false // "user:<x>" or "group:<x>", whose x may hold '@'
}

// Unmatched is what [Catalog.Unmatched] found: readers that no caller of
// the configured issuers can ever be, so the plants that name them are
// hidden from whoever they were meant for.
type Unmatched struct {
	// Readers counts the distinct readers; Examples holds up to three of
	// them, in the catalog's order.
	Readers  int
	Examples []string
	// Plants counts the plants that name one at least; Hidden those that
	// name no other reader, which no caller can read.
	Plants, Hidden int
}

// Unmatched returns the readers of c that no caller of the issuers named
// can match: "user:<x>" and "group:<x>" when the unnamed issuer ("") is
// not among issuers, "user@n:<x>", "group@n:<x>" and "*@n" when n is not.
// "*" matches every caller of every issuer.
func (c *Catalog) Unmatched(issuers []string) Unmatched {
	var u Unmatched
	seen := map[string]bool{}
	some := make([]bool, len(c.readerSets)) // the set names one
	all := make([]bool, len(c.readerSets))  // the set names only such
	for i, set := range c.readerSets {
		all[i] = len(set) > 0
		for _, r := range set {
			if name, every := readerIssuer(r); every || slices.Contains(issuers, name) {
				all[i] = false
				continue
			}
			some[i] = true
			if !seen[r] {
				seen[r] = true
				u.Readers++
				if len(u.Examples) < 3 {
					u.Examples = append(u.Examples, r)
				}
			}
		}
	}
	for _, e := range c.entries {
		if some[e.readers] {
			u.Plants++
		}
		if all[e.readers] {
			u.Hidden++
		}
	}
	return u
}

// ValidIssuerName reports whether name can name an issuer: 1 to 32 of
// [a-z0-9-].
func ValidIssuerName(name string) bool {
	if len(name) == 0 || len(name) > 32 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// SampleUsers returns the callers the sample catalog is designed around,
// each of which sees a different, non-empty part of it:
//   - alice, in group gardeners, reads through group:gardeners and "*";
//   - bob, in no group, reads through user:bob and "*";
//   - carol, in no group, sees only the plants open to "*";
//   - dave, in groups botanists and gardeners, sees the most, and still not
//     everything.
func SampleUsers() []Caller {
	return []Caller{
		{Subject: "alice", Groups: []string{"gardeners"}},
		{Subject: "bob"},
		{Subject: "carol"},
		{Subject: "dave", Groups: []string{"botanists", "gardeners"}},
	}
}
