package main

import "testing"

// TestLinkBase: what the Link header puts before /plants is -public-url
// without its trailing "/" (its path kept), or nothing without it.
func TestLinkBase(t *testing.T) {
	for _, tt := range []struct{ publicURL, want string }{
		{"", ""},
		{"https://api.example.com", "https://api.example.com"},
		{"https://api.example.com/", "https://api.example.com"},
		{"https://api.example.com/v1/", "https://api.example.com/v1"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
	} {
		if got := linkBase(tt.publicURL); got != tt.want {
			t.Errorf("linkBase(%q) = %q; want %q", tt.publicURL, got, tt.want)
		}
	}
}
