package observability

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// ParseTrustedProxies parses the -trusted-proxies value: a comma-separated
// list of CIDR prefixes (10.0.0.0/8, fd00::/8) or bare IP addresses (a
// prefix of one address). Spaces around entries are ignored, a prefix with
// host bits set is masked, and IPv4-mapped IPv6 forms are treated as IPv4.
// An empty list returns nil, which makes [Middleware] ignore
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

// clientIP returns the address of the client: the peer (remoteAddr without
// its port) unless the peer is a trusted proxy. Then the X-Forwarded-For
// entries (all headers, in order, each a comma list) are walked from the
// right, past trusted proxies, and the first untrusted entry is the client.
// When every entry is trusted the leftmost is; an entry that is not a bare
// IP address stops the walk at the last good one. Empty entries are
// skipped. Nothing it returns is a string that failed to parse as an
// address, except the server-set peer address itself.
func clientIP(remoteAddr string, xff []string, trusted []netip.Prefix) string {
	host := remoteAddr
	if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		host = h
	}
	if len(trusted) == 0 || len(xff) == 0 {
		return host
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !isTrusted(peer, trusted) {
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

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	a = a.WithZone("").Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
