package introspect_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/introspect"
	"github.com/plantstore/plantstore/observability/metricstest"
	"github.com/plantstore/plantstore/observability/spantest"
)

// TestObserved: each request for an answer is counted by its result, each
// call timed and made a span, which names the endpoint without its query
// and neither the token nor the secret.
func TestObserved(t *testing.T) {
	p := newIDP(t)
	reg := prometheus.NewRegistry()
	tp, rec := spantest.Recorder(t)
	lim, err := introspect.NewLimits(introspect.Options{Registerer: reg, TracerProvider: tp, MaxRate: 1, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig()
	cfg.Introspection = auth.Introspection{Tokens: auth.IntrospectOpaque, Endpoint: p.srv.URL + "/?tenant=x", ClientID: p.clientID, ClientSecretFile: secretFile(t, p.secret)}
	trust, err := introspect.New(introspect.Config{Name: "staff", Issuer: cfg.Issuer, Introspection: cfg.Introspection}, lim, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(auth.Options{}, auth.Issuer{Name: "staff", Config: cfg, Opaque: trust})
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, v, trust)
	token := p.issue(nil)
	if got := s.get(t, token); got.status != http.StatusOK {
		t.Fatalf("%d %q", got.status, got.challenge)
	}
	// The rate's one call is spent: the next one is not made.
	if got := s.get(t, randomToken()); got.status != http.StatusServiceUnavailable {
		t.Fatalf("over the rate: %d; want 503", got.status)
	}
	byResult := metricstest.ByLabel(t, reg, "plantstore_introspection_requests_total", "result")
	if byResult["active"] != 1 || byResult["limited"] != 1 {
		t.Errorf("requests by result %v; want active 1, limited 1", byResult)
	}
	if n := metricstest.Sum(t, reg, "plantstore_introspection_duration_seconds", map[string]string{"issuer": "staff"}); n <= 0 {
		t.Errorf("duration sum %v; want the call timed", n)
	}
	spans := spantest.Named(rec, "auth.introspect")
	if len(spans) != 1 {
		t.Fatalf("%d auth.introspect spans; want 1 (the call made)", len(spans))
	}
	if got := spantest.Attr(spans[0], "url.full"); got != p.srv.URL+"/" {
		t.Errorf("url.full %q; want the endpoint without its query", got)
	}
	all := fmt.Sprint(spans[0].Attributes(), spans[0].Name(), spans[0].Status())
	for _, leak := range []string{token, p.secret, "tenant"} {
		if strings.Contains(all, leak) {
			t.Errorf("the span holds %q: %s", leak, all)
		}
	}
}
