package authtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A CA is a certificate authority for client certificates (mutual TLS), as
// a gateway that terminates it trusts.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// PEM is the CA certificate, the gateway's trust anchor.
	PEM []byte
}

// A Cert is a client certificate and its key.
type Cert struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// DER is the certificate's encoding, which its x5t#S256 hashes; PEM
	// the same in a PEM block, and KeyPEM the key as PKCS#8 PEM.
	DER, PEM, KeyPEM []byte
}

var serial atomic.Int64

// NewCA returns a new CA with a P-256 key, valid for a day.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newECKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: "plantstore test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Issue returns a client certificate for cn signed by ca.
func (ca *CA) Issue(t testing.TB, cn string) Cert {
	t.Helper()
	key := newECKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Cert{
		Cert: cert, Key: key, DER: der,
		PEM:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
	}
}

// Escaped returns the PEM of c URL-escaped as nginx's
// $ssl_client_escaped_cert writes it.
func (c Cert) Escaped() string { return EscapePEM(c.PEM) }

// XFCC returns an element of Envoy's X-Forwarded-Client-Cert for c: By,
// Hash, the quoted Cert and a quoted Subject.
func (c Cert) XFCC() string {
	sum := sha256.Sum256(c.DER)
	return `By=spiffe://cluster.local/ns/plantstore/sa/plantstore;Hash=` + hex.EncodeToString(sum[:]) +
		`;Cert="` + c.Escaped() + `";Subject="CN=` + c.Cert.Subject.CommonName + `,O=plantstore"`
}

// EscapePEM URL-escapes PEM text as nginx does for
// $ssl_client_escaped_cert: everything but unreserved characters.
func EscapePEM(p []byte) string {
	return strings.ReplaceAll(url.QueryEscape(string(p)), "+", "%20")
}

func newECKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
