package plants

import (
	"slices"

	"github.com/plantstore/plantstore/auth"
)

// Principals returns the principals of a caller: "user:<sub>", "group:<g>"
// for each of its groups, and "*", without repeats. Empty subjects and group
// names give no principal, since no reader can name them.
// It is [auth.Principals], which the auth middleware computes once per
// cached token.
func Principals(id auth.Identity) []string {
	return auth.Principals(id)
}

// VisibleTo reports whether a caller with the given principals may see p:
// whether p's readers and the principals meet.
func (p Plant) VisibleTo(principals []string) bool {
	for _, r := range p.Readers {
		if slices.Contains(principals, r) {
			return true
		}
	}
	return false
}

// SampleUsers returns the identities the sample catalog is designed around,
// each of which sees a different, non-empty part of it:
//   - alice, in group gardeners, reads through group:gardeners and "*";
//   - bob, in no group, reads through user:bob and "*";
//   - carol, in no group, sees only the plants open to "*";
//   - dave, in groups botanists and gardeners, sees the most, and still not
//     everything.
func SampleUsers() []auth.Identity {
	return []auth.Identity{
		{Subject: "alice", Groups: []string{"gardeners"}},
		{Subject: "bob"},
		{Subject: "carol"},
		{Subject: "dave", Groups: []string{"botanists", "gardeners"}},
	}
}
