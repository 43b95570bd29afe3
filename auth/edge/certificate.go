package edge

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"hash/maphash"
	"net/url"
	"strings"
	"sync/atomic"
)

// CertificateThumbprint returns the x5t#S256 of a certificate (RFC 8705
// §3.1): the base64url, unpadded, of the SHA-256 of its DER encoding.
func CertificateThumbprint(der []byte) string {
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// Errors of [ParseClientCertificate].
var (
	ErrNoCertificate = errors.New("no client certificate")
	ErrCertHeader    = errors.New("client certificate header malformed")
)

// ParseClientCertificate returns the client certificate in the values of
// the header a gateway forwards it in, in either form:
//
//   - a URL-escaped PEM certificate (nginx's $ssl_client_escaped_cert,
//     ingress-nginx, Traefik): one value, starting "-----BEGIN";
//   - Envoy's X-Forwarded-Client-Cert: elements separated by commas (the
//     values of several header lines joined in order), each
//     "Key=value;Key=value", a value in double quotes when it holds a
//     comma, a semicolon or an equals sign (a backslash escaping the next
//     character in it). The last element is the one the nearest proxy
//     added, and the only one read; its Cert value (the URL-escaped PEM)
//     is the certificate. Hash is never read: it is a claim about a
//     certificate, not one.
//
// When the PEM holds a chain, the first certificate, the leaf, is the
// client's; the others are not read. The certificate is parsed with
// crypto/x509. It returns [ErrNoCertificate] when there is nothing to
// read, and an error wrapping [ErrCertHeader] for anything that does not
// parse; no error carries the header's text.
func ParseClientCertificate(values []string) (*x509.Certificate, error) {
	escaped, err := escapedPEM(values)
	if err != nil {
		return nil, err
	}
	return parseEscapedPEM(escaped)
}

// escapedPEM returns the URL-escaped PEM of the header values: the value
// itself, or the Cert of the last XFCC element.
func escapedPEM(values []string) (string, error) {
	switch {
	case len(values) == 0:
		return "", ErrNoCertificate
	case len(values) == 1 && strings.HasPrefix(values[0], "-----BEGIN"):
		return values[0], nil
	}
	xfcc := strings.Join(values, ",")
	if strings.TrimSpace(xfcc) == "" {
		return "", ErrNoCertificate
	}
	last, err := lastElement(xfcc)
	if err != nil {
		return "", err
	}
	cert, found := "", false
	for pair := range splitOutsideQuotes(last, ';') {
		key, value, ok := strings.Cut(pair, "=")
		if !ok {
			return "", fmt.Errorf("%w: an XFCC pair without =", ErrCertHeader)
		}
		if !strings.EqualFold(strings.TrimSpace(key), "Cert") {
			continue
		}
		if found {
			return "", fmt.Errorf("%w: two Cert values in one XFCC element", ErrCertHeader)
		}
		if cert, ok = unquote(strings.TrimSpace(value)); !ok {
			return "", fmt.Errorf("%w: a malformed quoted XFCC value", ErrCertHeader)
		}
		found = true
	}
	if !found || cert == "" {
		return "", fmt.Errorf("%w: the last XFCC element has no Cert", ErrNoCertificate)
	}
	return cert, nil
}

// lastElement returns the last comma-separated element of an XFCC value,
// commas in quoted values not counting. A quote left open anywhere makes
// every element's bounds uncertain: the value is then refused.
func lastElement(xfcc string) (string, error) {
	var el string
	if !scanOutsideQuotes(xfcc, ',', func(part string) bool { el = part; return true }) {
		return "", fmt.Errorf("%w: an XFCC quote left open", ErrCertHeader)
	}
	if el = strings.TrimSpace(el); el == "" {
		return "", fmt.Errorf("%w: an empty XFCC element", ErrCertHeader)
	}
	return el, nil
}

// splitOutsideQuotes yields the parts of s between the seps that are not
// inside double quotes; s has its quotes closed.
func splitOutsideQuotes(s string, sep byte) func(func(string) bool) {
	return func(yield func(string) bool) { scanOutsideQuotes(s, sep, yield) }
}

// scanOutsideQuotes calls yield with each part of s between the seps that
// are not inside double quotes (a backslash in quotes escapes the next
// byte), until yield returns false. It reports whether s left no quote or
// escape open, when it read s to its end; a stop by yield reports true.
func scanOutsideQuotes(s string, sep byte, yield func(string) bool) (closed bool) {
	start, quoted, escaped := 0, false, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			if !yield(s[start:i]) {
				return true
			}
			start = i + 1
		}
	}
	yield(s[start:])
	return !quoted && !escaped
}

// unquote returns an XFCC value without its double quotes and escapes; a
// value without quotes is returned as it is, and one with a quote
// anywhere but around it is refused.
func unquote(v string) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return v, !strings.ContainsRune(v, '"')
	}
	inner := v[1 : len(v)-1]
	if !strings.ContainsAny(inner, `"\`) {
		return inner, true
	}
	var b strings.Builder
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		switch {
		case c == '\\' && i+1 < len(inner):
			i++
			b.WriteByte(inner[i])
		case c == '\\', c == '"':
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// parseEscapedPEM returns the first certificate of a URL-escaped PEM
// text. The escaping is that of a URL path ("+" stays "+", which base64
// uses), so that nginx's and Envoy's escapes both read right.
func parseEscapedPEM(escaped string) (*x509.Certificate, error) {
	text, err := url.PathUnescape(escaped)
	if err != nil {
		return nil, fmt.Errorf("%w: not URL-escaped", ErrCertHeader)
	}
	block, _ := pem.Decode([]byte(text))
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: no PEM CERTIFICATE block", ErrCertHeader)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: the certificate does not parse", ErrCertHeader)
	}
	return cert, nil
}

// Sizes of the certificate cache: slots, and the longest escaped PEM it
// keeps as it is (a certificate with a 4096-bit RSA key is about 2.5 KiB
// of escaped PEM); a longer one is kept by its SHA-256. It holds at most
// certCacheSlots * certCacheMaxKey bytes of keys, 1 MiB.
const (
	certCacheSlots  = 128
	certCacheMaxKey = 8 << 10
)

// A CertCache remembers the thumbprints of the certificates recently seen,
// by their escaped PEM, so that the clients of a gateway, each sending
// the same certificate on every request, cost one parse each rather than
// one a request. The thumbprint is a function of the escaped PEM alone,
// so an entry can never answer for another certificate; a certificate
// that does not parse is not remembered. An escaped PEM over
// certCacheMaxKey is remembered by its SHA-256, so that a client with a
// large certificate costs one hash a request, not a parse. It is safe for
// concurrent use.
type CertCache struct {
	seed  maphash.Seed
	slots [certCacheSlots]atomic.Pointer[certMemo]
}

type certMemo struct {
	escaped, x5t string // escaped: the escaped PEM, or a NUL and its SHA-256
}

// NewCertCache returns an empty CertCache.
func NewCertCache() *CertCache { return &CertCache{seed: maphash.MakeSeed()} }

// Thumbprint returns the x5t#S256 of the client certificate in the header
// values (see [ParseClientCertificate]), and false when there is none
// that parses.
func (cc *CertCache) Thumbprint(values []string) (string, bool) {
	escaped, err := escapedPEM(values)
	if err != nil {
		return "", false
	}
	key := escaped
	if len(escaped) > certCacheMaxKey {
		// A NUL and 32 bytes: no escaped PEM that parses is that short.
		sum := sha256.Sum256([]byte(escaped))
		key = "\x00" + string(sum[:])
	}
	slot := &cc.slots[maphash.String(cc.seed, key)%certCacheSlots]
	if m := slot.Load(); m != nil && m.escaped == key {
		return m.x5t, true
	}
	cert, err := parseEscapedPEM(escaped)
	if err != nil {
		return "", false
	}
	if key == escaped {
		key = strings.Clone(escaped)
	}
	m := &certMemo{escaped: key, x5t: CertificateThumbprint(cert.Raw)}
	slot.Store(m)
	return m.x5t, true
}
