package api

import (
	"strings"
	"testing"
)

// TestNewCORS checks which origin lists are taken: exact origins as
// browsers serialize them, or "*" alone.
func TestNewCORS(t *testing.T) {
	tests := []struct {
		name    string
		origins []string
		wantErr string // "" for none
	}{
		{"one https origin", []string{"https://app.example.com"}, ""},
		{"several, with ports", []string{"https://app.example.com", "http://127.0.0.1:8081", "http://localhost:3000"}, ""},
		{"IPv6 host", []string{"http://[::1]:8080"}, ""},
		{"xn-- host", []string{"https://xn--bcher-kva.example"}, ""},
		{"any", []string{"*"}, ""},
		{"none", nil, "no origin"},
		{"* with others", []string{"*", "https://a.example"}, `"*" allows every origin`},
		{"trailing slash", []string{"https://a.example/"}, "no path"},
		{"path", []string{"https://a.example/app"}, "no path"},
		{"query", []string{"https://a.example?x"}, "no query"},
		{"empty query", []string{"https://a.example?"}, "no query"},
		{"fragment", []string{"https://a.example#x"}, "no query or fragment"},
		{"user info", []string{"https://u@a.example"}, "no user information"},
		{"no scheme", []string{"a.example"}, "want scheme://host"},
		{"no host", []string{"https://"}, "no host"},
		{"upper-case scheme", []string{"HTTPS://a.example"}, "scheme in lower case"},
		{"upper-case host", []string{"https://A.example"}, "host in lower case"},
		{"not ASCII", []string{"https://bücher.example"}, "xn--"},
		{"default https port", []string{"https://a.example:443"}, "default port 443"},
		{"default http port", []string{"http://a.example:80"}, "default port 80"},
		{"empty port", []string{"https://a.example:"}, "port from 1 to 65535"},
		{"port zero", []string{"https://a.example:0"}, "port from 1 to 65535"},
		{"port with a leading zero", []string{"https://a.example:08080"}, "port from 1 to 65535"},
		{"port too large", []string{"https://a.example:65536"}, "port from 1 to 65535"},
		{"null", []string{"null"}, "want scheme://host"},
		{"IPv4 in brackets", []string{"http://[127.0.0.1]"}, "want scheme://host"},
		{"not an address in brackets", []string{"http://[::g]"}, "want scheme://host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewCORS(tt.origins)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("NewCORS(%q) = %v; want no error", tt.origins, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("NewCORS(%q) = %v; want an error containing %q", tt.origins, err, tt.wantErr)
			case err == nil && p.String() != strings.Join(tt.origins, ","):
				t.Errorf("NewCORS(%q).String() = %q", tt.origins, p.String())
			}
		})
	}
}

// TestAllowHeaders checks the Access-Control-Allow-Headers of a preflight
// for what its Access-Control-Request-Headers asks.
func TestAllowHeaders(t *testing.T) {
	all := "Authorization, DPoP, traceparent, tracestate, X-Request-ID"
	tests := []struct {
		name  string
		asked []string
		want  string
	}{
		{"header absent", nil, all},
		{"header empty", []string{""}, all},
		{"only blanks and commas", []string{" , ,"}, all},
		{"one, as browsers send it", []string{"authorization"}, "Authorization"},
		{"several, any order and case", []string{"x-request-id,AUTHORIZATION, traceparent"}, "Authorization, traceparent, X-Request-ID"},
		{"split over two header lines", []string{"dpop", "tracestate"}, "DPoP, tracestate"},
		{"asked twice", []string{"authorization,authorization"}, "Authorization"},
		{"one not allowed among them", []string{"authorization,x-custom"}, "Authorization"},
		{"only others", []string{"x-custom, content-type"}, ""},
		{"every one", []string{"authorization,dpop,traceparent,tracestate,x-request-id"}, all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := allowHeaders(tt.asked); got != tt.want {
				t.Errorf("allowHeaders(%q) = %q; want %q", tt.asked, got, tt.want)
			}
		})
	}
}
