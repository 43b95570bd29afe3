package postgres

import (
	"fmt"
	"testing"
)

// TestNoReaders checks the cache of principals that read nothing: entries
// hold for one version only, versions only move forward except through
// reset, and the memory stays bounded.
func TestNoReaders(t *testing.T) {
	t.Parallel()
	var c noReaders
	split := func() string {
		rest, cached, v := c.split([]string{"a", "b", "c"})
		return fmt.Sprintf("%v %v %d", rest, cached, v)
	}
	steps := []struct {
		do   func()
		want string
	}{
		{func() {}, "[a b c] [] 0"},
		{func() { c.learn(0, []string{"a"}) }, "[a b c] [] 0"}, // version 0 is no version
		{func() { c.learn(3, []string{"a", "b"}) }, "[c] [a b] 3"},
		{func() { c.learn(2, []string{"c"}) }, "[c] [a b] 3"}, // older: ignored
		{func() { c.saw(3) }, "[c] [a b] 3"},
		{func() { c.saw(4) }, "[a b c] [] 4"}, // newer: entries dropped
		{func() { c.learn(4, []string{"c"}) }, "[a b] [c] 4"},
		{func() { c.reset(1) }, "[a b c] [] 1"}, // a poll may go back
		{func() { c.learn(1, []string{"b"}) }, "[a c] [b] 1"},
	}
	for i, st := range steps {
		st.do()
		if got := split(); got != st.want {
			t.Fatalf("step %d: split = %s; want %s", i, got, st.want)
		}
	}
	big := make([]string, 0, 1<<16)
	for i := range cap(big) {
		big = append(big, fmt.Sprintf("group:%0200d", i))
	}
	c.learn(1, big)
	if c.bytes > maxCachedPrincipalBytes || len(c.set) == 0 {
		t.Errorf("after learning %d MB of principals: %d bytes, %d entries; want at most %d bytes, some entries", len(big)*200>>20, c.bytes, len(c.set), maxCachedPrincipalBytes)
	}
}
