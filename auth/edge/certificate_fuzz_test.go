package edge

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzClientCertificate feeds any header values, in both forms (a
// URL-escaped PEM and Envoy's XFCC), to the parser of the client
// certificate header and to the certificate cache. They must never panic;
// every error is one of the two sentinels; a certificate read is one that
// crypto/x509 parses from the header's own bytes; and the cache answers
// as the parser does, for the same values, every time.
func FuzzClientCertificate(f *testing.F) {
	d := sha256.Sum256([]byte("plantstore fuzz client certificate"))
	key, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d[:])
	if err != nil {
		f.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fuzz"}, NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<31, 0)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		f.Fatal(err)
	}
	escaped := strings.ReplaceAll(url.QueryEscape(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))), "+", "%20")
	for _, seed := range [][2]string{
		{escaped, ""},
		{`By=spiffe://a;Hash=00;Cert="` + escaped + `";Subject="CN=a,O=b"`, ""},
		{`By=x;Cert="` + escaped + `",By=y;Cert=` + escaped, "Cert=x"},
		{`Cert="a\"b`, `"`},
		{"-----BEGIN%20CERTIFICATE-----%0AMII%0A-----END%20CERTIFICATE-----", ""},
		{`,,;=="\`, ";"},
	} {
		f.Add(seed[0], seed[1])
	}
	cc := NewCertCache()
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, values := range [][]string{{a}, {a, b}} {
			cert, err := ParseClientCertificate(values)
			if err != nil {
				if !errors.Is(err, ErrNoCertificate) && !errors.Is(err, ErrCertHeader) {
					t.Fatalf("ParseClientCertificate(%q) = %v; want a sentinel", values, err)
				}
			} else if cert == nil || len(cert.Raw) == 0 {
				t.Fatalf("ParseClientCertificate(%q) = %v and no error", values, cert)
			}
			for range 2 {
				x5t, ok := cc.Thumbprint(values)
				if ok != (err == nil) || ok && x5t != CertificateThumbprint(cert.Raw) {
					t.Fatalf("cache on %q = %q, %v; the parser %v", values, x5t, ok, err)
				}
			}
		}
	})
}
