package api_test

import (
	"errors"
	"testing"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/api"
)

func TestParseLimit(t *testing.T) {
	tests := []struct {
		raw  string
		want int
		ok   bool
	}{
		// Accepted.
		{"", plants.NoLimit, true},
		{"other=1", plants.NoLimit, true},
		{"limit=0", 0, true},
		{"limit=1", 1, true},
		{"limit=10", 10, true},
		{"limit=007", 7, true},
		{"limit=00000000000000000000000000001", 1, true},
		{"limit=2147483647", 2147483647, true},
		{"limit=%31", 1, true},
		{"limit=1%30", 10, true},
		{"%6cimit=3", 3, true},
		{"li%6Dit=4", 4, true},
		{"a=b&limit=5&c=d", 5, true},
		{"limit=5&", 5, true},
		{"&&limit=5", 5, true},
		{"limits=x&limit=6", 6, true},
		{"Limit=x&LIMIT=-1", plants.NoLimit, true},
		{"%zz=1&limit=2", 2, true},
		{"x=%zz&limit=2", 2, true},
		{"limit%3D1=x", plants.NoLimit, true},
		{"limit_=1&limit[]=2&limit=8", 8, true},
		// Refused.
		{"limit=", 0, false},
		{"limit", 0, false},
		{"limit&other=1", 0, false},
		{"limit=-1", 0, false},
		{"limit=-0", 0, false},
		{"limit=+1", 0, false},
		{"limit=%2B1", 0, false},
		{"limit=%2D1", 0, false},
		{"limit= 1", 0, false},
		{"limit=1%20", 0, false},
		{"limit=%201", 0, false},
		{"limit=1+", 0, false},
		{"limit=1.0", 0, false},
		{"limit=1e3", 0, false},
		{"limit=0x10", 0, false},
		{"limit=abc", 0, false},
		{"limit=1a", 0, false},
		{"limit=１", 0, false}, // a full-width digit
		{"limit=%EF%BC%91", 0, false},
		{"limit=%00", 0, false},
		{"limit=1%00", 0, false},
		{"limit=%", 0, false},
		{"limit=%3", 0, false},
		{"limit=%zz", 0, false},
		{"limit=1;x=2", 0, false},
		{"limit=2147483648", 0, false},
		{"limit=9999999999999999999999999", 0, false},
		{"limit=99999999999999999999999999a", 0, false},
		{"limit=1&limit=1", 0, false},
		{"limit=1&limit=2", 0, false},
		{"limit=1&%6cimit=2", 0, false},
		{"limit=1&limit", 0, false},
		{"limit=&limit=", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			got, err := api.ParseLimit(tt.raw)
			if tt.ok {
				if err != nil || got != tt.want {
					t.Errorf("ParseLimit(%q) = %d, %v; want %d, nil", tt.raw, got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, api.ErrInvalidLimit) {
				t.Errorf("ParseLimit(%q) = %d, %v; want an ErrInvalidLimit", tt.raw, got, err)
			}
		})
	}
}
