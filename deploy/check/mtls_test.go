package check_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGatewayMutualTLS runs nginx terminating mutual TLS with a test CA
// (deploy/gateway/nginx-mtls.conf.in) in front of plantstore with
// -client-cert-header: a token bound to one client's certificate (token
// -cert) is served to that client and refused, 401 cert_mismatch, to
// another client whose certificate the same CA signed; the resource
// metadata says certificate-bound tokens are accepted; and the
// certificate nginx forwards appears in no line plantstore logs.
func TestGatewayMutualTLS(t *testing.T) {
	bin := plantstoreBin(t)
	nginx := nginxBin(t)
	dir := t.TempDir()
	prefix := filepath.Join(dir, "nginx-mtls")
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		t.Fatal(err)
	}
	ca := newTestCert(t, "plantstore test CA", nil)
	server := newTestCert(t, "127.0.0.1", &ca)
	alice, mallory := newTestCert(t, "alice", &ca), newTestCert(t, "mallory", &ca)
	writeFile(t, filepath.Join(prefix, "ca.pem"), ca.certPEM)
	writeFile(t, filepath.Join(prefix, "server.pem"), server.certPEM)
	writeFile(t, filepath.Join(prefix, "server.key"), server.keyPEM)
	aliceCert := filepath.Join(dir, "alice.pem")
	writeFile(t, aliceCert, alice.certPEM)

	issuer := filepath.Join(dir, "issuer")
	if out, err := exec.Command(bin, "keygen", "-alg", "ES256", "-out", issuer).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "token", "-key", issuer+".key", "-sub", "plantstore-ci", "-cert", aliceCert).Output()
	if err != nil {
		t.Fatalf("token -cert: %v", err)
	}
	token := strings.TrimSpace(string(out))

	ps, api, _ := runPlantstore(t, bin, dir, "plantstore-mtls", catalog,
		"-jwt-key-file", issuer+".jwks.json", "-client-cert-header", "X-Client-Cert")
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	tmpl, err := os.ReadFile(filepath.Join(gatewayDir, "nginx-mtls.conf.in"))
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(prefix, "nginx.conf")
	text := strings.NewReplacer("@PREFIX@", prefix, "@UPSTREAM@", api, "@LISTEN@", listen).Replace(string(tmpl))
	if placeholder.MatchString(text) {
		t.Fatalf("nginx-mtls.conf.in: placeholder left in\n%s", text)
	}
	writeFile(t, conf, []byte(text))
	if out, err := exec.CommandContext(t.Context(), nginx, "-t", "-q", "-p", prefix, "-c", conf).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	start(t, dir, "nginx-mtls", nginx, "-p", prefix, "-c", conf, "-g", "daemon off;")

	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	client := func(c testCert) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: roots, Certificates: []tls.Certificate{{Certificate: [][]byte{c.cert.Raw}, PrivateKey: c.key}},
		}}}
	}
	send := func(c *http.Client, path, authz string) (int, string, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+listen+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		// A client's own header is replaced by nginx's.
		req.Header.Set("X-Client-Cert", alice.escaped())
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
	}
	aliceClient, malloryClient := client(alice), client(mallory)
	waitFor(t, "nginx with mutual TLS", func() bool { s, _, _ := send(aliceClient, "/", ""); return s == http.StatusNotFound })

	if s, ch, body := send(aliceClient, "/plants", "Bearer "+token); s != http.StatusOK || body != wantCIPlants+"\n" && body != wantCIPlants {
		t.Errorf("alice's token from alice: %d %q %s; want 200 %s", s, ch, body, wantCIPlants)
	}
	if s, ch, body := send(malloryClient, "/plants", "Bearer "+token); s != http.StatusUnauthorized || !strings.Contains(ch, `error_description="client certificate does not match the token"`) {
		t.Errorf("alice's token from mallory: %d %q %s; want 401 cert_mismatch", s, ch, body)
	}
	s, _, body := send(malloryClient, "/.well-known/oauth-protected-resource", "")
	var md map[string]any
	if s != http.StatusOK || json.Unmarshal([]byte(body), &md) != nil || md["tls_client_certificate_bound_access_tokens"] != true {
		t.Errorf("resource metadata: %d %s; want tls_client_certificate_bound_access_tokens true", s, body)
	}

	var refused bool
	waitFor(t, "plantstore's access line of the refusal", func() bool {
		for _, e := range logEntries(t, ps.log) {
			refused = refused || e["auth_failure"] == "cert_mismatch"
		}
		return refused
	})
	logged, err := os.ReadFile(ps.log)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"CERTIFICATE", alice.escaped()[30:90], mallory.escaped()[30:90]} {
		if strings.Contains(string(logged), secret) {
			t.Errorf("plantstore's log holds the forwarded certificate (%q)", secret)
		}
	}
}

// testCert is a certificate, its key and their PEM.
type testCert struct {
	cert            *x509.Certificate
	key             *ecdsa.PrivateKey
	certPEM, keyPEM []byte
}

// escaped returns the certificate as nginx's $ssl_client_escaped_cert.
func (c testCert) escaped() string {
	var b strings.Builder
	for _, ch := range []byte(c.certPEM) {
		if 'a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || ch == '-' || ch == '.' || ch == '_' || ch == '~' {
			b.WriteByte(ch)
		} else {
			b.WriteString("%" + strings.ToUpper(string("0123456789abcdef"[ch>>4])+string("0123456789abcdef"[ch&15])))
		}
	}
	return b.String()
}

// newTestCert returns a CA certificate (parent nil) or a certificate for
// cn signed by parent, for a server at 127.0.0.1 and for TLS clients.
func newTestCert(t *testing.T, cn string, parent *testCert) testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.ExtKeyUsage, tmpl.IPAddresses = nil, nil
	} else {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
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
	return testCert{
		cert: cert, key: key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
