package auth

import (
	"net/http"
	"net/textproto"
	"strings"

	"github.com/plantstore/plantstore/auth/edge"
	"github.com/plantstore/plantstore/observability/setting"
)

// MTLSMode is whether an issuer's tokens may be bound to the client's TLS
// certificate (RFC 8705 §3). The zero value is MTLSOptional.
type MTLSMode = BindingMode

// The certificate-binding modes.
const (
	// MTLSOptional accepts unbound tokens, and certificate-bound tokens
	// (cnf.x5t#S256) that come with their certificate.
	MTLSOptional = BindingOptional
	// MTLSOff refuses certificate-bound tokens ([ReasonCertBound]).
	MTLSOff = BindingOff
	// MTLSRequired accepts certificate-bound tokens with their
	// certificate only; any other token is refused with
	// [ReasonCertMissing].
	MTLSRequired = BindingRequired
)

// checkCertHeader returns name as net/http keys it, or the *setting.Error of
// a name that is no HTTP field name or is one the service reads for
// something else.
func checkCertHeader(name string) (string, error) {
	if name == "" {
		return "", nil
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return "", setting.Errorf("client_cert_header", "%q is not an HTTP header name", name)
		}
	}
	key := textproto.CanonicalMIMEHeaderKey(name)
	switch key {
	case "Authorization", "Dpop", "Host", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Cookie":
		return "", setting.Errorf("client_cert_header", "%s carries something else than a client certificate", name)
	}
	return key, nil
}

// bindCert checks the client certificate of r against the token e (RFC
// 8705 §3): for a certificate-bound token, or for any token where its
// issuer requires one. The certificate is read from the header the
// gateway that terminates mutual TLS writes ([Options].ClientCertHeader),
// on requests from a trusted proxy only; from any other peer the header
// is not looked at. A token bound to a certificate is refused with
// [ReasonCertBound] when no header is configured or its issuer has mTLS
// off, [ReasonCertMissing] when the request has no certificate that
// parses, [ReasonCertMismatch] when the certificate's thumbprint is not
// the token's; an unbound token where the issuer requires mTLS with
// [ReasonCertMissing]. Under the DPoP scheme (a token bound both ways)
// the refusal's challenge is DPoP's.
func (v *Verifier) bindCert(r *http.Request, c credential, e *cacheEntry) *Error {
	err := v.certError(r, e)
	if err != nil {
		err.DPoP = c.dpop
	}
	return err
}

func (v *Verifier) certError(r *http.Request, e *cacheEntry) *Error {
	switch {
	case !e.bound.cert():
		return invalidToken(ReasonCertMissing) // the issuer requires a bound token
	case e.iss.cfg.MTLS == MTLSOff || v.opts.ClientCertHeader == "":
		return invalidToken(ReasonCertBound)
	}
	if _, trusted := edge.TrustedPeer(r.RemoteAddr, v.opts.TrustedProxies); !trusted {
		return invalidToken(ReasonCertMissing)
	}
	x5t, ok := v.certs.Thumbprint(r.Header[v.opts.ClientCertHeader])
	switch {
	case !ok:
		return invalidToken(ReasonCertMissing)
	case x5t != e.bound.x5t:
		return invalidToken(ReasonCertMismatch)
	}
	return nil
}
