package plants_test

import (
	"slices"
	"testing"

	"github.com/plantstore/plantstore/plants"
)

// TestReadableMeetsPrincipals checks that Readable, the tests' oracle,
// answers as the principals the stores look up do: a plant is readable iff
// one of Caller.Principals is among its readers.
func TestReadableMeetsPrincipals(t *testing.T) {
	callers := []plants.Caller{
		{Subject: "alice", Groups: []string{"gardeners", "gardeners"}},
		{Issuer: "staff", Subject: "alice", Groups: []string{"ops"}},
		{Subject: "", Groups: []string{"g"}},
		{Subject: "bad\x00", Groups: []string{"\xff", "ok"}},
		{Issuer: "cust-1", Subject: "bob"},
	}
	readerLists := [][]string{
		{"*"},
		{"user:alice"},
		{"group:gardeners", "user:bob"},
		{"*@staff"},
		{"user@staff:alice"},
		{"group@staff:gardeners"},
		{"user:"},
		{"group:ok"},
		{"group:\xff", "user:bad\x00"},
		{"user@cust-1:bob"},
		{"group:ops"},
	}
	readable := 0
	for _, c := range callers {
		principals := c.Principals()
		for _, readers := range readerLists {
			want := slices.ContainsFunc(principals, func(p string) bool { return slices.Contains(readers, p) })
			if got := plants.Readable(readers, c); got != want {
				t.Errorf("Readable(%q, %+v) = %v; want %v (principals %q)", readers, c, got, want, principals)
			}
			if want {
				readable++
			}
		}
	}
	// Every caller reads through "*"; some read through more.
	if readable <= len(callers) {
		t.Errorf("%d readable pairs; want more than %d", readable, len(callers))
	}
}
