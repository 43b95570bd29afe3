package introspect_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/introspect"
	"github.com/plantstore/plantstore/auth/jws"
)

// BenchmarkCached times a cached request's authentication: of an
// introspected opaque token, and of a JWT of the same claims verified by
// its signature, each alone ("jwt", "introspected"), and the two in turns
// of 1,000 requests ("turns": ns/op of each and their ratio, which the
// load of a shared machine moves less), for docs/performance.md.
func BenchmarkCached(b *testing.B) {
	p := newIDP(b)
	key := authtest.NewKey(b, "ES256")
	claims := valid()
	claims["exp"] = time.Now().Add(time.Hour).Unix()
	opaque := p.issue(map[string]any{"exp": claims["exp"]})
	cfg := baseConfig()
	intro := baseConfig()
	intro.Introspection = auth.Introspection{Tokens: auth.IntrospectOpaque, Endpoint: p.srv.URL, ClientID: p.clientID,
		ClientSecretFile: secretFile(b, p.secret), Cache: time.Hour}
	trust, err := introspect.New(introspect.Config{Issuer: intro.Issuer, Introspection: intro.Introspection}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	// request returns a cached request of the issuer: the verifier and the
	// request, authenticated once.
	request := func(b *testing.B, is auth.Issuer, token string) (*auth.Verifier, *http.Request) {
		v, err := auth.NewVerifier(auth.Options{}, is)
		if err != nil {
			b.Fatal(err)
		}
		r := httptest.NewRequest(http.MethodGet, "/plants", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		if _, err := v.Authenticate(r); err != nil {
			b.Fatal(err)
		}
		return v, r
	}
	jwtIssuer, jwtToken := auth.Issuer{Config: cfg, JWS: jws.New(authtest.KeySet(key))}, authtest.Token(b, key, nil, claims)
	introIssuer := auth.Issuer{Config: intro, Opaque: trust}
	b.Run("turns", func(b *testing.B) {
		vj, rj := request(b, jwtIssuer, jwtToken)
		vi, ri := request(b, introIssuer, opaque)
		var spent [2]time.Duration
		n := 0
		for b.Loop() {
			for i, vr := range [2]struct {
				v *auth.Verifier
				r *http.Request
			}{{vj, rj}, {vi, ri}} {
				start := time.Now()
				for range 1000 {
					if _, err := vr.v.Authenticate(vr.r); err != nil {
						b.Fatal(err)
					}
				}
				spent[i] += time.Since(start)
			}
			n += 1000
		}
		b.ReportMetric(float64(spent[0].Nanoseconds())/float64(n), "jwt-ns/op")
		b.ReportMetric(float64(spent[1].Nanoseconds())/float64(n), "introspected-ns/op")
		b.ReportMetric(float64(spent[1])/float64(spent[0]), "ratio")
	})
	for _, tt := range []struct {
		name   string
		issuer auth.Issuer
		token  string
	}{
		{"jwt", jwtIssuer, jwtToken},
		{"introspected", introIssuer, opaque},
	} {
		b.Run(tt.name, func(b *testing.B) {
			v, r := request(b, tt.issuer, tt.token)
			calls := p.calls.Load()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Authenticate(r); err != nil {
					b.Fatal(err)
				}
			}
			if p.calls.Load() != calls {
				b.Fatal("a cached token was introspected again")
			}
		})
	}
}
