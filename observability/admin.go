package observability

import (
	"context"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyTimeout bounds one readiness check, so probes that pile up while a
// dependency hangs do not pile up goroutines too.
const readyTimeout = 5 * time.Second

// AdminOptions configures [AdminHandler].
type AdminOptions struct {
	// Registry is served at /metrics.
	Registry *prometheus.Registry
	// Ready reports whether the service can take traffic; a nil error, or
	// a nil Ready, means it can. The error's text is the 503 body, so it
	// must not carry secrets.
	Ready func(ctx context.Context) error
	// Checks returns the parts of readiness, one line each of
	// /readyz?verbose, in their order; it is called on every such
	// request, so the list may follow the configuration (issuers come
	// and go). Ready must fail exactly when a check that is not advisory
	// does. When nil, /readyz?verbose shows Ready as one check, "ready".
	Checks func() []Check
	// Docs is served at /docs and under /docs/ (the API reference page
	// and its assets); when nil those paths are 404.
	Docs http.Handler
	// OpenAPI is served at /openapi.json; when nil that path is 404.
	OpenAPI []byte
	// Pprof serves the net/http/pprof handlers under /debug/pprof/.
	Pprof bool
}

// AdminHandler returns the handler of the admin listener:
//
//   - /metrics: the registry in the Prometheus text format, or in
//     OpenMetrics (with the exemplars of the request duration histogram)
//     to a scraper whose Accept header asks for it;
//   - /healthz, and /livez (its name in the Kubernetes convention): 200
//     "ok" while the process serves at all;
//   - /readyz: 200 "ready" when Ready returns nil, else 503 with the
//     error's text and Retry-After: 5; with the query parameter verbose,
//     one line per check instead, as the Kubernetes API server prints
//     them (see [Check]), with the same status;
//   - /docs and /docs/...: Docs, when set;
//   - /openapi.json: the OpenAPI document as application/json;
//   - /debug/pprof/ and its profiles, only when Pprof is set.
//
// Any other path is 404. The handlers are registered on a mux of their own,
// never on http.DefaultServeMux.
func AdminHandler(o AdminOptions) http.Handler {
	mux := http.NewServeMux()
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: true}))
	live := func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok")
	}
	mux.HandleFunc("/healthz", live)
	mux.HandleFunc("/livez", live)
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if _, verbose := r.URL.Query()["verbose"]; verbose {
			ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
			defer cancel()
			writeVerbose(ctx, w, o.checks())
			return
		}
		if o.Ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
			err := o.Ready(ctx)
			cancel()
			if err != nil {
				w.Header().Set("Retry-After", "5")
				writeText(w, http.StatusServiceUnavailable, err.Error())
				return
			}
		}
		writeText(w, http.StatusOK, "ready")
	})
	if o.OpenAPI != nil {
		mux.HandleFunc("/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(o.OpenAPI)
		})
	}
	if o.Docs != nil {
		mux.Handle("/docs", o.Docs)
		mux.Handle("/docs/", o.Docs)
	}
	if o.Pprof {
		// Index also serves the named profiles (heap, goroutine, …).
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// checks returns the checks of /readyz?verbose.
func (o AdminOptions) checks() []Check {
	switch {
	case o.Checks != nil:
		return o.Checks()
	case o.Ready != nil:
		return []Check{{Name: "ready", Run: o.Ready}}
	}
	return nil
}

// writeText writes a short plain-text probe answer that no cache keeps.
func writeText(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}
