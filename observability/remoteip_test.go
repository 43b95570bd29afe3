package observability_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/plantstore/plantstore/auth/edge"
)

// TestRemoteIP: the access line's remote_ip is the client's address as
// the trusted edge reports it.
func TestRemoteIP(t *testing.T) {
	proxies, err := edge.ParseTrustedProxies("10.0.0.0/8, fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		trusted []netip.Prefix
		remote  string
		xff     []string
		want    string
	}{
		{"no trust ignores XFF", nil, "10.1.1.1:5000", []string{"203.0.113.9"}, "10.1.1.1"},
		{"no XFF", proxies, "10.1.1.1:5000", nil, "10.1.1.1"},
		{"untrusted peer ignores XFF", proxies, "198.51.100.7:5000", []string{"203.0.113.9"}, "198.51.100.7"},
		{"trusted peer, one hop", proxies, "10.1.1.1:5000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"spoofed left entry ignored", proxies, "10.1.1.1:5000", []string{"1.2.3.4, 203.0.113.9, 10.2.2.2"}, "203.0.113.9"},
		{"several headers joined in order", proxies, "10.1.1.1:5000", []string{"1.2.3.4, 203.0.113.9", "10.3.3.3", "10.2.2.2"}, "203.0.113.9"},
		{"all trusted gives leftmost", proxies, "10.1.1.1:5000", []string{"10.9.9.9, 10.2.2.2"}, "10.9.9.9"},
		{"malformed stops at last good", proxies, "10.1.1.1:5000", []string{"203.0.113.9, bogus, 10.2.2.2"}, "10.2.2.2"},
		{"malformed rightmost keeps peer", proxies, "10.1.1.1:5000", []string{"203.0.113.9, <script>"}, "10.1.1.1"},
		{"port in entry is malformed", proxies, "10.1.1.1:5000", []string{"203.0.113.9:443"}, "10.1.1.1"},
		{"empty entries skipped", proxies, "10.1.1.1:5000", []string{"203.0.113.9,, "}, "203.0.113.9"},
		{"IPv6 peer and client", proxies, "[fd00::1]:5000", []string{"2001:db8::7"}, "2001:db8::7"},
		{"IPv6 untrusted peer", proxies, "[2001:db8::1]:5000", []string{"203.0.113.9"}, "2001:db8::1"},
		{"mapped trusted peer", proxies, "[::ffff:10.1.1.1]:5000", []string{"203.0.113.9"}, "203.0.113.9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, access, buf := newLogger(t, "info")
			e := newEngine(access, newCapture(), tt.trusted)
			req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/plants", nil)
			req.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				req.Header.Add("X-Forwarded-For", v)
			}
			e.ServeHTTP(httptest.NewRecorder(), req)
			lines := buf.Lines(t)
			if len(lines) != 1 {
				t.Fatalf("got %d log lines, want 1", len(lines))
			}
			if got := lines[0]["remote_ip"]; got != tt.want {
				t.Errorf("remote %s, X-Forwarded-For %q, trusted %v: remote_ip = %v, want %s", tt.remote, tt.xff, tt.trusted, got, tt.want)
			}
		})
	}
}
