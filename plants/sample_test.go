package plants_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/plants"
)

func TestSampleUsersSeeDistinctSets(t *testing.T) {
	c := plants.SampleCatalog()
	if c.Len() < 24 {
		t.Fatalf("SampleCatalog().Len() = %d; want a few dozen", c.Len())
	}
	seen := map[string]string{} // visible ids → subject
	everyone := map[string]bool{}
	for _, id := range plants.SampleUsers() {
		var ids []string
		for _, p := range c.Plants() {
			if plants.Readable(p.Readers, id) {
				ids = append(ids, p.ID)
				everyone[p.ID] = true
			}
		}
		if len(ids) == 0 {
			t.Errorf("sample user %q sees no plant", id.Subject)
		}
		if len(ids) == c.Len() {
			t.Errorf("sample user %q sees the whole catalog", id.Subject)
		}
		key := strings.Join(ids, ",")
		if other, dup := seen[key]; dup {
			t.Errorf("sample users %q and %q see the same plants", other, id.Subject)
		}
		seen[key] = id.Subject
	}
	if len(everyone) == c.Len() {
		t.Errorf("the sample users together see all %d plants; want some plants none of them sees", c.Len())
	}
}

func TestSampleUsers(t *testing.T) {
	tests := []struct {
		sub       string
		groups    []string
		sees      string // a plant name the user sees
		doesntSee string // a plant name the user doesn't see
	}{
		{"alice", []string{"gardeners"}, "Boston fern", "Jade plant"},
		{"bob", nil, "Jade plant", "Boston fern"},
		{"carol", nil, "Basil", "Boston fern"},
		{"dave", []string{"botanists", "gardeners"}, "Saguaro", "Jade plant"},
	}
	users := plants.SampleUsers()
	for _, tt := range tests {
		t.Run(tt.sub, func(t *testing.T) {
			i := slices.IndexFunc(users, func(u plants.Caller) bool { return u.Subject == tt.sub })
			if i < 0 {
				t.Fatalf("SampleUsers() has no %q", tt.sub)
			}
			if !slices.Equal(users[i].Groups, tt.groups) {
				t.Errorf("SampleUsers() %q has groups %q; want %q", tt.sub, users[i].Groups, tt.groups)
			}
			for _, p := range plants.SampleCatalog().Plants() {
				if p.Name == tt.sees && !plants.Readable(p.Readers, users[i]) {
					t.Errorf("%q does not see %q; want it seen", tt.sub, p.Name)
				}
				if p.Name == tt.doesntSee && plants.Readable(p.Readers, users[i]) {
					t.Errorf("%q sees %q; want it hidden", tt.sub, p.Name)
				}
			}
		})
	}
}
