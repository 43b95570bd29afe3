package auth_test

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/edge"
	"github.com/plantstore/plantstore/auth/keys"
)

// certAttacks are the rows of TestKnownAttacks about certificate-bound
// tokens (RFC 8705): a stolen token presented without its certificate,
// with another, through a peer that may not vouch for one, or with a
// header that tries to make the service read another certificate than
// the one the gateway verified.
func certAttacks(t *testing.T, key authtest.Key, ks keys.Keys) []attack {
	ca := authtest.NewCA(t)
	client, other := ca.Issue(t, "client"), ca.Issue(t, "other")
	trusted := func(mode auth.MTLSMode, proxies string) *apiServer {
		o := verifierOptions
		o.ClientCertHeader = "X-Client-Cert"
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix(proxies)}
		srv := serveVerifier(t, newVerifierOpts(t, o, auth.Config{MTLS: mode}, ks))
		return &srv
	}
	certSrv := trusted(auth.MTLSOptional, "127.0.0.0/8")
	// Requests come from 127.0.0.1, which this server does not trust.
	untrustedSrv := trusted(auth.MTLSOptional, "10.0.0.0/8")
	requiredSrv := trusted(auth.MTLSRequired, "127.0.0.0/8")
	offSrv := trusted(auth.MTLSOff, "127.0.0.0/8")

	boundTo := func(x5t any) string {
		return "Bearer " + authtest.Token(t, key, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"x5t#S256": x5t}}))
	}
	bound := boundTo(edge.CertificateThumbprint(client.DER))
	sum := sha256.Sum256(client.DER)
	pemSum := sha256.Sum256(client.PEM)
	spki := sha256.Sum256(client.Cert.RawSubjectPublicKeyInfo)
	escaped, xfcc := client.Escaped(), client.XFCC()
	chain := func(certs ...authtest.Cert) string {
		var b []byte
		for _, c := range certs {
			b = append(b, c.PEM...)
		}
		return authtest.EscapePEM(b)
	}
	const ref = "RFC 8705 §3"
	return []attack{
		{name: "control: certificate-bound token with its certificate (escaped PEM)", ref: "-", server: certSrv, authz: bound, cert: []string{escaped}, wantSub: "alice"},
		{name: "control: certificate-bound token with its certificate (XFCC)", ref: "-", server: certSrv, authz: bound, cert: []string{xfcc}, wantSub: "alice"},
		{name: "control: unbound token with a certificate", ref: "-", server: certSrv, authz: "Bearer " + authtest.Token(t, key, nil, authtest.Claims(nil)), cert: []string{escaped}, wantSub: "alice"},
		{name: "certificate-bound token without a certificate", ref: ref, server: certSrv, authz: bound, want: auth.ReasonCertMissing},
		{name: "certificate-bound token with another certificate of the CA", ref: ref, server: certSrv, authz: bound, cert: []string{other.Escaped()}, want: auth.ReasonCertMismatch},
		{name: "certificate header from a peer that is no trusted proxy", ref: "RFC 8705 §3, -trusted-proxies", server: untrustedSrv, authz: bound, cert: []string{escaped}, want: auth.ReasonCertMissing},
		{name: "certificate-bound token where no header is configured", ref: ref, authz: bound, cert: []string{escaped}, want: auth.ReasonCertBound},
		{name: "certificate-bound token where the issuer has mtls off", ref: ref, server: offSrv, authz: bound, cert: []string{escaped}, want: auth.ReasonCertBound},
		{name: "unbound token where the issuer requires mtls", ref: ref, server: requiredSrv, authz: "Bearer " + authtest.Token(t, key, nil, authtest.Claims(nil)), cert: []string{escaped}, want: auth.ReasonCertMissing},
		{name: "control: certificate-bound token where the issuer requires mtls", ref: "-", server: requiredSrv, authz: bound, cert: []string{escaped}, wantSub: "alice"},

		// Envoy appends its element for the client it verified: only the
		// last one is the gateway's word.
		{name: "XFCC: the bound certificate in an earlier element, another last", ref: "Envoy XFCC (APPEND_FORWARD)", server: certSrv, authz: bound, cert: []string{xfcc + "," + other.XFCC()}, want: auth.ReasonCertMismatch},
		{name: "XFCC: three elements, the bound certificate in the middle", ref: "Envoy XFCC (APPEND_FORWARD)", server: certSrv, authz: bound, cert: []string{other.XFCC() + "," + xfcc + "," + other.XFCC()}, want: auth.ReasonCertMismatch},
		{name: "XFCC: the bound certificate in an earlier header line, another last", ref: "Envoy XFCC, RFC 9110 §5.3", server: certSrv, authz: bound, cert: []string{xfcc, other.XFCC()}, want: auth.ReasonCertMismatch},
		{name: "control: XFCC with an attacker's element before the gateway's", ref: "-", server: certSrv, authz: bound, cert: []string{other.XFCC() + "," + xfcc}, wantSub: "alice"},
		{name: "XFCC: Hash of the bound certificate, Cert another", ref: "Envoy XFCC (Hash is not the certificate)", server: certSrv, authz: bound, cert: []string{strings.Replace(other.XFCC(), "Hash="+fmt.Sprintf("%x", sha256.Sum256(other.DER)), "Hash="+fmt.Sprintf("%x", sum), 1)}, want: auth.ReasonCertMismatch},
		{name: "XFCC: Hash of the bound certificate and no Cert", ref: "Envoy XFCC", server: certSrv, authz: bound, cert: []string{"By=spiffe://x;Hash=" + fmt.Sprintf("%x", sum)}, want: auth.ReasonCertMissing},
		{name: "XFCC: a quote left open to swallow the gateway's element", ref: "Envoy XFCC", server: certSrv, authz: bound, cert: []string{`Cert="` + escaped + `";x="` + "," + other.XFCC()}, want: auth.ReasonCertMissing},
		{name: "XFCC: a quote that closes in the gateway's element", ref: "Envoy XFCC", server: certSrv, authz: bound, cert: []string{`Cert="` + escaped + `;Subject="x,` + other.XFCC()}, want: auth.ReasonCertMismatch},
		{name: "XFCC: a quoted comma in the last element", ref: "Envoy XFCC", server: certSrv, authz: bound, cert: []string{other.XFCC() + `,Subject="CN=a,O=b";Cert="` + escaped + `"`}, wantSub: "alice"},
		{name: "XFCC: two Cert in the last element", ref: "Envoy XFCC", server: certSrv, authz: bound, cert: []string{`Cert="` + escaped + `";Cert="` + other.Escaped() + `"`}, want: auth.ReasonCertMissing},
		{name: "two escaped PEM header lines", ref: "RFC 9110 §5.3", server: certSrv, authz: bound, cert: []string{escaped, escaped}, want: auth.ReasonCertMissing},

		{name: "malformed PEM: base64 cut short", ref: "RFC 7468", server: certSrv, authz: bound, cert: []string{authtest.EscapePEM(truncatedPEM(client.PEM))}, want: auth.ReasonCertMissing},
		{name: "malformed PEM: a private key block", ref: "RFC 7468", server: certSrv, authz: bound, cert: []string{authtest.EscapePEM(client.KeyPEM)}, want: auth.ReasonCertMissing},
		{name: "PEM not URL-escaped: a bad escape", ref: "RFC 3986 §2.1", server: certSrv, authz: bound, cert: []string{escaped[:40] + "%zz" + escaped[40:]}, want: auth.ReasonCertMissing},
		{name: "DER bytes that are no certificate", ref: "RFC 5280", server: certSrv, authz: bound, cert: []string{authtest.EscapePEM(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: client.DER[:len(client.DER)-1]}))}, want: auth.ReasonCertMissing},

		// A chain: the first certificate is the client's, the rest is
		// the path to the CA and binds nothing.
		{name: "chain: the bound certificate second", ref: "RFC 8705 §3.1 (the client certificate)", server: certSrv, authz: bound, cert: []string{chain(other, client)}, want: auth.ReasonCertMismatch},
		{name: "control: chain with the bound certificate first", ref: "-", server: certSrv, authz: bound, cert: []string{chain(client, other)}, wantSub: "alice"},

		// The thumbprint is SHA-256 over the DER, base64url, exactly.
		{name: "thumbprint in hex", ref: "RFC 8705 §3.1", server: certSrv, authz: boundTo(fmt.Sprintf("%x", sum)), cert: []string{escaped}, want: auth.ReasonClaims},
		{name: "thumbprint in standard base64", ref: "RFC 8705 §3.1, RFC 4648 §5", server: certSrv, authz: boundTo(base64.StdEncoding.EncodeToString(sum[:])), cert: []string{escaped}, want: auth.ReasonClaims},
		{name: "thumbprint over the PEM text", ref: "RFC 8705 §3.1 (DER)", server: certSrv, authz: boundTo(base64.RawURLEncoding.EncodeToString(pemSum[:])), cert: []string{escaped}, want: auth.ReasonCertMismatch},
		{name: "thumbprint over the public key", ref: "RFC 8705 §3.1 (the certificate)", server: certSrv, authz: boundTo(base64.RawURLEncoding.EncodeToString(spki[:])), cert: []string{escaped}, want: auth.ReasonCertMismatch},
		{name: "thumbprint not a string", ref: "RFC 8705 §3.1", server: certSrv, authz: boundTo([]byte("x")), cert: []string{escaped}, want: auth.ReasonClaims},
	}
}

// truncatedPEM returns p with its base64 cut in the middle of the
// certificate, the PEM lines kept.
func truncatedPEM(p []byte) []byte {
	block, _ := pem.Decode(p)
	block.Bytes = block.Bytes[:len(block.Bytes)/2]
	if _, err := x509.ParseCertificate(block.Bytes); err == nil {
		panic("half a certificate parses")
	}
	return pem.EncodeToMemory(block)
}
