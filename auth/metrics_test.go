package auth_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/observability/metricstest"
)

// issuerLabels returns the values of the issuer label over every metric
// of reg, sorted and without repeats.
func issuerLabels(t testing.TB, reg *prometheus.Registry) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "issuer" && !slices.Contains(out, lp.GetValue()) {
					out = append(out, lp.GetValue())
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestIssuerSeriesOnlyForConfiguredIssuers: a metric with an issuer label
// has series for the issuers configured now and "unknown" only. The
// unnamed issuer's ("default") exist once the -jwt-* flags' key sources
// or requests record something, and never for a service of named issuers,
// whose "default" keys gauge would otherwise read 0 forever and page as an
// issuer without keys.
func TestIssuerSeriesOnlyForConfiguredIssuers(t *testing.T) {
	key := authtest.NewKey(t, "ES256")
	other := authtest.NewKey(t, "ES256")
	tests := []struct {
		name      string
		configure func(t *testing.T, m *auth.Metrics)
		want      []string
	}{
		{"nothing configured", func(*testing.T, *auth.Metrics) {}, []string{"unknown"}},
		{"named issuers (an issuers file)", func(t *testing.T, m *auth.Metrics) {
			m.ForIssuer("staff").AddKeys(1)
			m.ForIssuer("customers").Refresh(false)
		}, []string{"customers", "staff", "unknown"}},
		{"a named issuer removed", func(t *testing.T, m *auth.Metrics) {
			m.ForIssuer("staff").AddKeys(1)
			m.ForIssuer("customers")
			m.Forget("customers")
		}, []string{"staff", "unknown"}},
		{"the flags' key file", func(t *testing.T, m *auth.Metrics) {
			if _, err := keys.LoadKeyFile(authtest.WriteJWKS(t, key), m); err != nil {
				t.Fatal(err)
			}
		}, []string{"default", "unknown"}},
		{"the flags' issuer refusing a token", func(t *testing.T, m *auth.Metrics) {
			v := newVerifier(t, auth.Config{}, authtest.KeySet(key))
			r := gin.New()
			r.Use(renderErrors)
			r.GET("/plants", auth.Middleware(v, m), func(c *gin.Context) { c.Status(http.StatusOK) })
			srv := httptest.NewServer(r)
			t.Cleanup(srv.Close)
			if status, _ := dpopRequest(t, "GET", srv.URL+"/plants", "Bearer "+authtest.Token(t, other, nil, authtest.Claims(nil))); status != http.StatusUnauthorized {
				t.Fatalf("a token of another key: %d, want 401", status)
			}
		}, []string{"default", "unknown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := auth.NewMetrics(reg)
			tt.configure(t, m)
			if got := issuerLabels(t, reg); !slices.Equal(got, tt.want) {
				t.Errorf("issuer label values %q, want %q", got, tt.want)
			}
		})
	}
}

// TestUnnamedIssuerSeriesStartAtZero: once the unnamed issuer records one
// thing, all its series exist, so that its keys gauge and its failure
// counters are there before their first change.
func TestUnnamedIssuerSeriesStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := auth.NewMetrics(reg)
	m.Refresh(false)
	for _, tt := range []struct {
		metric string
		labels map[string]string
		want   float64
	}{
		{"plantstore_jwks_keys", map[string]string{"issuer": "default"}, 0},
		{"plantstore_jwks_refreshes_total", map[string]string{"issuer": "default", "result": "failure"}, 1},
		{"plantstore_key_file_reloads_total", map[string]string{"issuer": "default", "result": "success"}, 0},
		{"plantstore_auth_failures_total", map[string]string{"issuer": "default", "reason": "expired"}, 0},
		{"plantstore_auth_audit_total", map[string]string{"issuer": "default", "reason": "claim"}, 0},
		{"plantstore_auth_audit_total", map[string]string{"issuer": "default", "reason": "token_type"}, 0},
	} {
		if got := metricstest.Sum(t, reg, tt.metric, tt.labels); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.metric, tt.labels, got, tt.want)
		}
	}
}

// TestFillGauges reads the fill of the verified-token cache and of the
// DPoP replay cache from the metrics, as requests fill them.
func TestFillGauges(t *testing.T) {
	issuer := authtest.NewKey(t, "ES256")
	srv := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{Leeway: 5 * time.Second})
	// One caller may hold half of it: 4 proofs.
	auth.SetReplayLimits(srv.v, 8)
	gauge := func(name string) float64 { return metricstest.Sum(t, srv.reg, name, nil) }

	if got := gauge("plantstore_token_cache_limit_bytes"); got != auth.DefaultCacheBytes {
		t.Errorf("plantstore_token_cache_limit_bytes = %v, want the default %d", got, auth.DefaultCacheBytes)
	}
	table := gauge("plantstore_token_cache_bytes")
	if table <= 0 || table >= auth.DefaultCacheBytes {
		t.Errorf("plantstore_token_cache_bytes before any request = %v, want its table: above 0, below the limit", table)
	}
	if got := gauge("plantstore_dpop_replay_entries_limit"); got != 8 {
		t.Errorf("plantstore_dpop_replay_entries_limit = %v, want 8", got)
	}

	client := authtest.NewKey(t, "ES256")
	tok := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"cnf": map[string]any{"jkt": client.Thumbprint(t)}}))
	for i := range 3 {
		if status, ch := dpopRequest(t, "GET", srv.url, "DPoP "+tok, authtest.Proof(t, client, "GET", srv.url, tok, nil, nil)); status != http.StatusOK {
			t.Fatalf("DPoP request %d: %d %q", i, status, ch)
		}
	}
	if got := gauge("plantstore_dpop_replay_entries"); got != 3 {
		t.Errorf("plantstore_dpop_replay_entries after 3 proofs = %v, want 3", got)
	}
	if got := gauge("plantstore_token_cache_bytes"); got <= table {
		t.Errorf("plantstore_token_cache_bytes after a verified token = %v, want above the empty table's %v", got, table)
	}

	off := newDPoPServer(t, issuer, auth.DPoPOptional, auth.Options{CacheBytes: -1})
	for _, name := range []string{"plantstore_token_cache_bytes", "plantstore_token_cache_limit_bytes"} {
		if got := metricstest.Sum(t, off.reg, name, nil); got != 0 {
			t.Errorf("with the cache off, %s = %v, want 0", name, got)
		}
	}
}
