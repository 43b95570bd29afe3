package auth_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/edge"
	"github.com/plantstore/plantstore/auth/jws"
	"github.com/plantstore/plantstore/observability/setting"
)

// certOptions are Options that read the client certificate from
// X-Client-Cert, sent by a proxy on loopback.
func certOptions() auth.Options {
	return auth.Options{ClientCertHeader: "x-client-cert", TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
}

// certRequest sends GET url with authz, the client certificate header
// cert (none when empty) and the DPoP proofs given, and returns the status
// and challenge.
func certRequest(t testing.TB, url, authz, cert string, proofs ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", authz)
	if cert != "" {
		req.Header.Set("X-Client-Cert", cert)
	}
	for _, p := range proofs {
		req.Header.Add("DPoP", p)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, strings.Join(withoutMetadata(t, resp.Header.Values("WWW-Authenticate")), "")
}

// TestCertificateBinding: a token bound both ways needs its certificate
// and a DPoP proof of its key, the certificate checked first; the modes
// of an issuer; and a token verified before (cached) is held to its
// certificate on every request.
func TestCertificateBinding(t *testing.T) {
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	ca := authtest.NewCA(t)
	cert, other := ca.Issue(t, "client"), ca.Issue(t, "other")
	jkt := client.Thumbprint(t)
	x5t := edge.CertificateThumbprint(cert.DER)
	srv := newDPoPServer(t, issuer, auth.DPoPOptional, certOptions())
	both := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"jkt": jkt, "x5t#S256": x5t}}))
	certOnly := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"x5t#S256": x5t}}))
	proof := func(token string) string { return authtest.Proof(t, client, "GET", srv.url, token, nil, nil) }

	for _, tt := range []struct {
		name, authz, cert string
		proof             bool
		want              auth.Reason // "" for 200
		dpopChallenge     bool
	}{
		{"both: certificate and proof", "DPoP " + both, cert.Escaped(), true, "", false},
		{"both: proof, no certificate", "DPoP " + both, "", true, auth.ReasonCertMissing, true},
		{"both: proof, another certificate", "DPoP " + both, other.Escaped(), true, auth.ReasonCertMismatch, true},
		{"both: certificate, as Bearer", "Bearer " + both, cert.Escaped(), false, auth.ReasonDPoPBound, false},
		{"both: certificate, no proof", "DPoP " + both, cert.Escaped(), false, auth.ReasonDPoPMissing, true},
		{"certificate only: under the DPoP scheme", "DPoP " + certOnly, cert.Escaped(), true, auth.ReasonDPoPUnbound, true},
		// The same token, cached by the requests above, again and again
		// without its certificate.
		{"certificate only: cached, no certificate", "Bearer " + certOnly, "", false, auth.ReasonCertMissing, false},
		{"certificate only: cached, its certificate", "Bearer " + certOnly, cert.Escaped(), false, "", false},
		{"certificate only: cached, another certificate", "Bearer " + certOnly, other.Escaped(), false, auth.ReasonCertMismatch, false},
		{"certificate only: cached, its certificate again", "Bearer " + certOnly, cert.XFCC(), false, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var proofs []string
			if tt.proof {
				_, token, _ := strings.Cut(tt.authz, " ")
				proofs = append(proofs, proof(token))
			}
			status, ch := certRequest(t, srv.url, tt.authz, tt.cert, proofs...)
			if tt.want == "" {
				if status != http.StatusOK {
					t.Fatalf("status %d %q; want 200", status, ch)
				}
				return
			}
			if status != http.StatusUnauthorized || !strings.Contains(ch, `error_description="`+tt.want.Description()+`"`) || strings.HasPrefix(ch, "DPoP ") != tt.dpopChallenge {
				t.Fatalf("status %d %q; want 401 %s (DPoP challenge %v)", status, ch, tt.want, tt.dpopChallenge)
			}
		})
	}
	if got := failures(t, srv.reg); got[auth.ReasonCertMissing] != 2 || got[auth.ReasonCertMismatch] != 2 {
		t.Errorf("failures %v; want 2 cert_missing and 2 cert_mismatch", got)
	}
}

// TestMTLSConfig: required needs a header to read certificates from, the
// header must be a header name that carries nothing else, and the
// metadata says certificate-bound tokens are accepted exactly when some
// are.
func TestMTLSConfig(t *testing.T) {
	ks := authtest.KeySet(authtest.NewKey(t, "ES256"))
	_, err := auth.NewVerifier(auth.Options{}, auth.Issuer{Name: "a", Config: auth.Config{Issuer: "https://a", MTLS: auth.MTLSRequired}, JWS: jws.New(ks)})
	var ce *setting.Error
	if !errors.As(err, &ce) || ce.Key != "mtls" || ce.Issuer != "a" {
		t.Errorf("mtls required without a header: %v; want an mtls *setting.Error of issuer a", err)
	}
	for _, name := range []string{"X Client Cert", "Authorization", "dpop", "X-Forwarded-For", "a:b"} {
		_, err := auth.NewVerifier(auth.Options{ClientCertHeader: name}, auth.Issuer{JWS: jws.New(ks)})
		if !errors.As(err, &ce) || ce.Key != "client_cert_header" {
			t.Errorf("ClientCertHeader %q: %v; want a client_cert_header *setting.Error", name, err)
		}
	}
	for _, tt := range []struct {
		name   string
		header string
		modes  []auth.MTLSMode
		want   bool
	}{
		{"no header", "", []auth.MTLSMode{auth.MTLSOptional}, false},
		{"header, optional", "X-Forwarded-Client-Cert", []auth.MTLSMode{auth.MTLSOptional}, true},
		{"header, off", "X-Forwarded-Client-Cert", []auth.MTLSMode{auth.MTLSOff}, false},
		{"header, off and required", "X-Forwarded-Client-Cert", []auth.MTLSMode{auth.MTLSOff, auth.MTLSRequired}, true},
	} {
		var issuers []auth.Issuer
		for i, m := range tt.modes {
			name := string(rune('a' + i))
			issuers = append(issuers, auth.Issuer{Name: name, Config: auth.Config{Issuer: "https://" + name, MTLS: m}, JWS: jws.New(ks)})
		}
		v, err := auth.NewVerifier(auth.Options{ClientCertHeader: tt.header}, issuers...)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		md := v.Metadata(httptest.NewRequest("GET", "http://plants.internal/plants", nil))
		if md.TLSClientCertificateBoundAccessTokens != tt.want {
			t.Errorf("%s: tls_client_certificate_bound_access_tokens %v; want %v", tt.name, md.TLSClientCertificateBoundAccessTokens, tt.want)
		}
	}
}

// BenchmarkCertBinding is what a certificate-bound token costs beside a
// bearer token, both ES256 and cached after the first request, both with
// the certificate header (nginx's escaped PEM, about 1 KiB) from a
// trusted proxy: through Authenticate alone (authenticate/...), through a
// whole request on a loopback server with the access log
// (request/...), and the two requests in turns, reporting the bound
// one's median time as a ratio of the bearer one's, measured in the same
// moments (x-bearer), which holds on a machine busy with other work.
//
//	go test ./auth -run '^$' -bench CertBinding -count 10
func BenchmarkCertBinding(b *testing.B) {
	issuer := authtest.NewKey(b, "ES256")
	cert := authtest.NewCA(b).Issue(b, "client")
	v := newVerifierOpts(b, certOptions(), auth.Config{}, authtest.KeySet(issuer))
	bearer := authtest.Token(b, issuer, nil, authtest.Claims(nil))
	bound := authtest.Token(b, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"x5t#S256": edge.CertificateThumbprint(cert.DER)}}))
	escaped := cert.Escaped()
	request := func(token string) *http.Request {
		req := httptest.NewRequest("GET", "/plants?limit=10", nil)
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Client-Cert", escaped)
		return req
	}
	for _, tt := range []struct{ name, token string }{{"bearer", bearer}, {"bound", bound}} {
		b.Run("authenticate/"+tt.name, func(b *testing.B) {
			req := request(tt.token)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Authenticate(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	srv := serveVerifier(b, v)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	get := func(b *testing.B, token string) {
		req, err := http.NewRequest("GET", srv.url+"?limit=10", nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Client-Cert", escaped)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	for _, tt := range []struct{ name, token string }{{"bearer", bearer}, {"bound", bound}} {
		b.Run("request/"+tt.name, func(b *testing.B) {
			for b.Loop() {
				get(b, tt.token)
			}
		})
	}
	b.Run("request/in-turns", func(b *testing.B) {
		// Medians, not sums: one request descheduled for milliseconds
		// by the rest of the machine would outweigh thousands.
		var dBound, dBearer []time.Duration
		for i := 0; b.Loop(); i++ {
			x, y := inTurns(i, func() { get(b, bound) }, func() { get(b, bearer) })
			dBound, dBearer = append(dBound, x), append(dBearer, y)
		}
		median := func(d []time.Duration) float64 {
			slices.Sort(d)
			return float64(d[len(d)/2])
		}
		b.ReportMetric(median(dBound), "ns/op")
		b.ReportMetric(median(dBound)/median(dBearer), "x-bearer")
	})
}
