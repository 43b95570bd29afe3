package edge_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/edge"
)

// TestParseClientCertificate reads both header forms and refuses what
// is not one certificate, without the header's text in the error.
func TestParseClientCertificate(t *testing.T) {
	ca := authtest.NewCA(t)
	cert := ca.Issue(t, "client")
	for _, tt := range []struct {
		name   string
		values []string
		want   error // nil: the certificate
	}{
		{"escaped PEM", []string{cert.Escaped()}, nil},
		{"XFCC", []string{cert.XFCC()}, nil},
		{"XFCC, Cert unquoted, key in lower case", []string{"By=x;cert=" + cert.Escaped()}, nil},
		{"XFCC, spaces around the element", []string{"By=x, " + cert.XFCC() + " "}, nil},
		{"XFCC, quoted value with an escaped quote", []string{`Subject="a\"b";Cert="` + cert.Escaped() + `"`}, nil},
		{"none", nil, edge.ErrNoCertificate},
		{"empty", []string{""}, edge.ErrNoCertificate},
		{"XFCC without Cert", []string{"By=x;Hash=00"}, edge.ErrNoCertificate},
		{"XFCC, trailing comma", []string{cert.XFCC() + ","}, edge.ErrCertHeader},
		{"XFCC, a pair without =", []string{"By;Cert=" + cert.Escaped()}, edge.ErrCertHeader},
		{"XFCC, a quote inside an unquoted value", []string{`Cert=a"b`}, edge.ErrCertHeader},
		{"PEM as it is (nothing to unescape)", []string{string(cert.PEM)}, nil},
		{"bad escape", []string{"-----BEGIN%2"}, edge.ErrCertHeader},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := edge.ParseClientCertificate(tt.values)
			if tt.want == nil {
				if err != nil || edge.CertificateThumbprint(got.Raw) != edge.CertificateThumbprint(cert.DER) {
					t.Fatalf("ParseClientCertificate = %v; want the certificate", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("ParseClientCertificate = %v; want %v", err, tt.want)
			}
			if strings.Contains(err.Error(), "BEGIN") || strings.Contains(err.Error(), "By=") {
				t.Errorf("error %q carries the header's text", err)
			}
		})
	}
}

// TestCertCacheLargeCertificate: a certificate whose escaped PEM is over
// the 8 KiB the cache keeps as it is, sent on every request, is parsed
// once, then answered from the cache by its hash: a lookup allocates a
// few times, a parse dozens.
func TestCertCacheLargeCertificate(t *testing.T) {
	ca := authtest.NewCA(t)
	large := ca.Issue(t, strings.Repeat("c", 8000))
	if n := len(large.Escaped()); n <= 8<<10 {
		t.Fatalf("escaped PEM of %d bytes; the test needs over 8 KiB", n)
	}
	small := ca.Issue(t, "client")
	cc := edge.NewCertCache()
	values := []string{large.Escaped()}
	want, ok := cc.Thumbprint(values)
	if !ok || want != edge.CertificateThumbprint(large.Cert.Raw) {
		t.Fatalf("Thumbprint = %q, %v; want the certificate's", want, ok)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if got, ok := cc.Thumbprint(values); !ok || got != want {
			t.Fatalf("Thumbprint again = %q, %v", got, ok)
		}
	})
	if allocs > 4 {
		t.Errorf("a large certificate seen before costs %v allocations; want a cache lookup (at most 4), not a parse", allocs)
	}
	if got, ok := cc.Thumbprint([]string{small.Escaped()}); !ok || got != edge.CertificateThumbprint(small.Cert.Raw) {
		t.Errorf("another certificate: %q, %v; want its own thumbprint", got, ok)
	}
}
