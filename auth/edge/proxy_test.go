package edge_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/auth/edge"
)

func TestParseTrustedProxies(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr bool
	}{
		{"empty", "", nil, false},
		{"blank", "  ", nil, false},
		{"one CIDR", "10.0.0.0/8", []string{"10.0.0.0/8"}, false},
		{"list with spaces", " 10.0.0.0/8 , 192.168.1.1, fd00::/8", []string{"10.0.0.0/8", "192.168.1.1/32", "fd00::/8"}, false},
		{"bare IPv6", "::1", []string{"::1/128"}, false},
		{"host bits masked", "10.1.2.3/8", []string{"10.0.0.0/8"}, false},
		{"mapped IPv4", "::ffff:10.0.0.1", []string{"10.0.0.1/32"}, false},
		{"mapped IPv4 prefix", "::ffff:10.0.0.0/104", []string{"10.0.0.0/8"}, false},
		{"garbage", "proxy.local", nil, true},
		{"bad prefix length", "10.0.0.0/33", nil, true},
		{"empty entry", "10.0.0.0/8,", nil, true},
		{"zone", "fe80::1%eth0", nil, true},
		{"port", "10.0.0.1:80", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := edge.ParseTrustedProxies(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseTrustedProxies(%q) = %v, nil; want an error", tt.in, got)
				}
				return
			}
			var gotS []string
			for _, p := range got {
				gotS = append(gotS, p.String())
			}
			if err != nil || !slices.Equal(gotS, tt.want) {
				t.Fatalf("ParseTrustedProxies(%q) = %v, %v; want %v, nil", tt.in, gotS, err, tt.want)
			}
		})
	}
}

func TestParseTrustedProxiesErrorNamesEntry(t *testing.T) {
	_, err := edge.ParseTrustedProxies("10.0.0.0/8,nope")
	if err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf(`ParseTrustedProxies("10.0.0.0/8,nope") error = %v; want one naming "nope"`, err)
	}
}
