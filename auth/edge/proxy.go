// Package edge reads what the edge of trust in front of the service says
// about a request, and decides when to believe it: the -trusted-proxies
// list, whether a request's peer is one of them, the origin a client used
// (X-Forwarded-Proto and X-Forwarded-Host), the client's address (the
// rightmost X-Forwarded-For entry that is not a trusted proxy), and the
// client certificate a gateway that terminates mutual TLS forwards
// (Envoy's X-Forwarded-Client-Cert, or a URL-escaped PEM). It imports the
// standard library only; auth and observability both read requests
// through it.
package edge

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParseTrustedProxies parses the -trusted-proxies value: a comma-separated
// list of CIDR prefixes (10.0.0.0/8, fd00::/8) or bare IP addresses (a
// prefix of one address). Spaces around entries are ignored, a prefix with
// host bits set is masked, and IPv4-mapped IPv6 forms are treated as IPv4.
// An empty list returns nil, which makes [ClientIP] ignore
// X-Forwarded-For. An empty entry, a zone or anything else that does not
// parse is an error naming the entry.
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var out []netip.Prefix
	for item := range strings.SplitSeq(list, ",") {
		s := strings.TrimSpace(item)
		if s == "" {
			return nil, fmt.Errorf("trusted proxies %q: empty entry", list)
		}
		var p netip.Prefix
		if strings.Contains(s, "/") {
			pp, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q: not a CIDR prefix or IP address", s)
			}
			p = pp.Masked()
		} else {
			a, err := netip.ParseAddr(s)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("trusted proxy %q: not a CIDR prefix or IP address", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		out = append(out, p)
	}
	return out, nil
}

// ClientIP returns the address of the client: the peer (remoteAddr without
// its port) unless the peer is a trusted proxy. Then the X-Forwarded-For
// entries (all headers, in order, each a comma list) are walked from the
// right, past trusted proxies, and the first untrusted entry is the client.
// When every entry is trusted the leftmost is; an entry that is not a bare
// IP address stops the walk at the last good one. Empty entries are
// skipped. Nothing it returns is a string that failed to parse as an
// address, except the server-set peer address itself.
func ClientIP(remoteAddr string, xff []string, trusted []netip.Prefix) string {
	host, ok := TrustedPeer(remoteAddr, trusted)
	if !ok || len(xff) == 0 {
		return host
	}
	client := host
	for i := len(xff) - 1; i >= 0; i-- {
		v := xff[i]
		for v != "" {
			var e string
			if j := strings.LastIndexByte(v, ','); j >= 0 {
				e, v = v[j+1:], v[:j]
			} else {
				e, v = v, ""
			}
			e = strings.TrimSpace(e)
			if e == "" {
				continue
			}
			a, err := netip.ParseAddr(e)
			if err != nil || a.Zone() != "" {
				return client
			}
			client = e
			if !isTrusted(a, trusted) {
				return client
			}
		}
	}
	return client
}

// TrustedPeer returns the host of remoteAddr, a peer address as net/http
// sets it (host:port), and reports whether that host is an address within
// trusted: a proxy whose forwarding headers, and any header it alone may
// set (a client certificate it verified), are believed.
func TrustedPeer(remoteAddr string, trusted []netip.Prefix) (host string, ok bool) {
	host = remoteAddr
	if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		host = h
	}
	if len(trusted) == 0 {
		return host, false
	}
	a, err := netip.ParseAddr(host)
	return host, err == nil && isTrusted(a, trusted)
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	a = a.WithZone("").Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Origin returns the scheme and host a client used to reach the service
// with r: those of r itself (https when it came over TLS, its Host), unless
// its peer is within trusted, when X-Forwarded-Proto and X-Forwarded-Host
// (the first value of each, as the proxy nearest the client wrote them)
// stand in for them. The host is lower case, and made only of the
// characters of a host name or address and a port: a host with anything
// else is "invalid.host".
func Origin(r *http.Request, trusted []netip.Prefix) (scheme, host string) {
	scheme, host = "http", r.Host
	if r.TLS != nil {
		scheme = "https"
	}
	if _, ok := TrustedPeer(r.RemoteAddr, trusted); ok {
		if p := firstValue(r.Header.Get("X-Forwarded-Proto")); p == "http" || p == "https" {
			scheme = p
		}
		if h := firstValue(r.Header.Get("X-Forwarded-Host")); plainHost(h) {
			host = h
		}
	}
	if !plainHost(host) {
		host = "invalid.host" // net/http lets some odd bytes through
	}
	return scheme, strings.ToLower(host)
}

// plainHost reports whether h is a host name or address with an optional
// port: letters, digits, ".", "-", ":" and the brackets of an IPv6
// address, nothing that would need quoting anywhere.
func plainHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '-', c == ':', c == '[', c == ']':
		default:
			return false
		}
	}
	return true
}

// firstValue returns the first item of a comma list, trimmed.
func firstValue(v string) string {
	first, _, _ := strings.Cut(v, ",")
	return strings.TrimSpace(first)
}
