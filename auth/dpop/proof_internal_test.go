package dpop

import (
	"bytes"
	"crypto/rand"
	"encoding/asn1"
	"math/big"
	"testing"
)

// TestECDSADER holds ecdsaDER to encoding/asn1's encoding of the same two
// integers, for r and s of every curve's size, with leading zeros and top
// bits set or not.
func TestECDSADER(t *testing.T) {
	for _, size := range []int{32, 48, 66} {
		for i := range 200 {
			r, s := make([]byte, size), make([]byte, size)
			rand.Read(r)
			rand.Read(s)
			switch i % 4 {
			case 1:
				r[0], s[0] = 0x80, 0xff // top bit set: a leading 0 in DER
			case 2:
				r[0], r[1], s[0] = 0, 0, 0 // leading zeros dropped
			case 3:
				clear(r) // zero
			}
			want, err := asn1.Marshal(struct{ R, S *big.Int }{new(big.Int).SetBytes(r), new(big.Int).SetBytes(s)})
			if err != nil {
				t.Fatal(err)
			}
			if got := ecdsaDER(r, s); !bytes.Equal(got, want) {
				t.Fatalf("ecdsaDER(%x, %x) = %x; want %x", r, s, got, want)
			}
		}
	}
}

// TestPlainOrigin: an origin plainOrigin takes, with any escaped path,
// is what normalizeHTU would make of it, so resourceURI may skip parsing;
// and it leaves the others to normalizeHTU.
func TestPlainOrigin(t *testing.T) {
	paths := []string{"/", "/plants", "/garden/plants", "/a%2Fb", "/%E2%82%AC", "/a;b=c", "/~x", "/plants/"}
	for _, tt := range []struct {
		origin string
		plain  bool
	}{
		{"http://127.0.0.1:8080", true},
		{"https://api.example.com", true},
		{"http://localhost", true},
		{"https://api.example.com:8443", true},
		{"https://API.example.com", false},
		{"https://api.example.com:443", false},
		{"http://api.example.com:80", false},
		{"http://[::1]:8080", false},
		{"http://host:", false},
		{"ftp://host", false},
		{"http://", false},
	} {
		if got := plainOrigin(tt.origin); got != tt.plain {
			t.Errorf("plainOrigin(%q) = %t; want %t", tt.origin, got, tt.plain)
		}
		if !tt.plain {
			continue
		}
		for _, p := range paths {
			if n, ok := normalizeHTU(tt.origin + p); !ok || n != tt.origin+p {
				t.Errorf("normalizeHTU(%q) = %q, %t; want it unchanged", tt.origin+p, n, ok)
			}
		}
	}
}
