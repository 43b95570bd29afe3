package observability_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/plantstore/plantstore/observability"
)

func TestReadyzVerbose(t *testing.T) {
	ok := func(context.Context) error { return nil }
	fail := func(msg string) func(context.Context) error {
		return func(context.Context) error { return errors.New(msg) }
	}
	checks := func(cs ...observability.Check) func() []observability.Check {
		return func() []observability.Check { return cs }
	}
	tests := []struct {
		name       string
		opts       observability.AdminOptions
		query      string
		wantStatus int
		wantBody   string
	}{
		{"all pass", observability.AdminOptions{Checks: checks(
			observability.Check{Name: "issuer:staff", Run: ok},
			observability.Check{Name: "store", Run: ok},
			observability.Check{Name: "draining", Run: ok})},
			"verbose", 200, "[+]issuer:staff ok\n[+]store ok\n[+]draining ok\nreadyz check passed\n"},
		{"one fails, every check runs", observability.AdminOptions{Checks: checks(
			observability.Check{Name: "issuer:staff", Run: ok},
			observability.Check{Name: "store", Run: fail("snapshot not loaded")},
			observability.Check{Name: "draining", Run: fail("shutting down")})},
			"verbose", 503, "[+]issuer:staff ok\n[-]store snapshot not loaded\n[-]draining shutting down\nreadyz check failed\n"},
		{"an advisory failure passes and says so", observability.AdminOptions{Checks: checks(
			observability.Check{Name: "store", Run: ok},
			observability.Check{Name: "redis", Run: fail("unavailable"), Advisory: true})},
			"verbose", 200, "[+]store ok\n[-]redis unavailable\nreadyz check passed\n"},
		{"an advisory check that passes says so too", observability.AdminOptions{Checks: checks(
			observability.Check{Name: "redis", Run: ok, Advisory: true})},
			"verbose=1", 200, "[+]redis ok\nreadyz check passed\n"},
		{"a reason of several lines stays on one", observability.AdminOptions{Checks: checks(
			observability.Check{Name: "keys", Run: fail("issuer a: no keys\nissuer b: no keys")})},
			"verbose", 503, "[-]keys issuer a: no keys; issuer b: no keys\nreadyz check failed\n"},
		{"an empty reason", observability.AdminOptions{Checks: checks(
			observability.Check{Name: "store", Run: fail("")})},
			"verbose", 503, "[-]store failed\nreadyz check failed\n"},
		{"no checks: Ready as one", observability.AdminOptions{Ready: fail("keys: none yet")},
			"verbose", 503, "[-]ready keys: none yet\nreadyz check failed\n"},
		{"nothing to check", observability.AdminOptions{}, "verbose", 200, "readyz check passed\n"},
		{"without verbose: the plain answer", observability.AdminOptions{Ready: fail("store: down"), Checks: checks(
			observability.Check{Name: "store", Run: fail("down")})},
			"", 503, "store: down"},
		{"another parameter is not verbose", observability.AdminOptions{Ready: ok, Checks: checks(
			observability.Check{Name: "store", Run: ok})},
			"verbosity=1", 200, "ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, observability.AdminHandler(tt.opts))
			resp, body := do(t, newRequest(t, http.MethodGet, srv.URL+"/readyz?"+tt.query))
			if resp.StatusCode != tt.wantStatus || body != tt.wantBody {
				t.Errorf("GET /readyz?%s = %d %q; want %d %q", tt.query, resp.StatusCode, body, tt.wantStatus, tt.wantBody)
			}
			if ra := resp.Header.Get("Retry-After"); (resp.StatusCode == 503) != (ra == "5") {
				t.Errorf("GET /readyz?%s = %d with Retry-After %q; want 5 exactly on 503", tt.query, resp.StatusCode, ra)
			}
		})
	}
}

// TestReadyzVerboseBounded checks that the verbose checks run under the
// deadline the plain /readyz has.
func TestReadyzVerboseBounded(t *testing.T) {
	var hasDeadline bool
	srv := startServer(t, observability.AdminHandler(observability.AdminOptions{Checks: func() []observability.Check {
		return []observability.Check{{Name: "store", Run: func(ctx context.Context) error {
			_, hasDeadline = ctx.Deadline()
			return nil
		}}}
	}}))
	if resp, body := do(t, newRequest(t, http.MethodGet, srv.URL+"/readyz?verbose")); resp.StatusCode != 200 {
		t.Fatalf("GET /readyz?verbose = %d %q, want 200", resp.StatusCode, body)
	}
	if !hasDeadline {
		t.Error("a verbose check ran without a deadline, want a bounded context")
	}
}

func TestLivezIsHealthz(t *testing.T) {
	srv := startServer(t, observability.AdminHandler(observability.AdminOptions{Ready: func(context.Context) error { return errors.New("not ready") }}))
	for _, path := range []string{"/livez", "/healthz"} {
		resp, body := do(t, newRequest(t, http.MethodGet, srv.URL+path))
		if resp.StatusCode != 200 || body != "ok" {
			t.Errorf("GET %s = %d %q; want 200 ok whatever readiness says", path, resp.StatusCode, body)
		}
	}
}
