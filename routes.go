package main

import (
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/api"
)

// maxHeaderBytes is the request header budget. api.HeaderLimit answers
// 431 in the Error shape at this size; net/http's own limit (this plus its
// 4 KiB slack) is the backstop for what never reaches a handler.
const maxHeaderBytes = 16 << 10

// newAPIOptions gathers what the API handler is built from: the log,
// metrics and tracing, the verifier (which applies -rate-limit), and the
// store.
func newAPIOptions(cfg serveConfig, log *zap.Logger, reg prometheus.Registerer, access *observability.AccessLog, tracing *observability.Tracing, keys verification, cat catalog) apiOptions {
	return apiOptions{
		log: log, reg: reg, access: access, tracing: tracing,
		verifier: keys.verifier, authMetrics: keys.metrics, store: cat.store,
		trustedProxies: cfg.TrustedProxies, writeTimeout: cfg.WriteTimeout,
		linkBase: linkBase(cfg.PublicURL), cors: cfg.CORS,
		events: keys.events, eventsPath: cfg.SSFPath,
	}
}

// linkBase is what the Link header of a page puts before "/plants":
// -public-url without its trailing "/", or "" (a relative link) without it.
// The URL was checked with the verifier's options.
func linkBase(publicURL string) string {
	u, err := url.Parse(publicURL)
	if publicURL == "" || err != nil {
		return ""
	}
	origin, prefix := auth.PublicOrigin(u)
	return origin + prefix
}

// apiOptions is what the API handler is built from.
type apiOptions struct {
	log            *zap.Logger
	reg            prometheus.Registerer
	access         *observability.AccessLog
	tracing        *observability.Tracing
	verifier       *auth.Verifier
	authMetrics    *auth.Metrics
	store          plants.Store
	trustedProxies []netip.Prefix
	writeTimeout   time.Duration
	linkBase       string    // before "/plants" in Link headers
	cors           *api.CORS // nil: no CORS
	// events, when set, takes the security events POSTed to eventsPath.
	events     http.Handler
	eventsPath string
}

// newAPIHandler is the whole API surface: the middleware order, the
// routes, and the 404 and 405 answers.
func newAPIHandler(o apiOptions) http.Handler {
	e := gin.New()
	// Every other path is 404 with no redirects, another method is 405,
	// and X-Forwarded-For counts only through -trusted-proxies.
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.RemoveExtraSlash = false
	e.HandleMethodNotAllowed = true
	e.ForwardedByClientIP = false
	// Request ID, metrics and the access line around everything; then the
	// error renderer, which recovers panics; then the CORS headers; then
	// the header limit.
	e.Use(
		observability.Middleware(o.access, observability.NewHTTPMetrics(o.reg), o.trustedProxies, o.tracing),
		api.RenderErrors(o.log),
	)
	// With -cors-origins, every answer (refusals and 404 too) tells the
	// browser whether the page may read it.
	if o.cors != nil {
		e.Use(o.cors.Headers())
	}
	e.Use(api.HeaderLimit(maxHeaderBytes))
	// The verifier applies -rate-limit too: a DPoP request is counted
	// before its proof's signature is verified.
	route := []gin.HandlerFunc{auth.Middleware(o.verifier, o.authMetrics), api.ListHandler(o.store, api.NewMetrics(o.reg), o.writeTimeout, o.linkBase)}
	e.GET("/plants", route...)
	e.HEAD("/plants", route...)
	// A preflight needs no credential (the browser sends the token only
	// once the preflight allowed it) and is never an auth failure.
	if o.cors != nil {
		e.OPTIONS("/plants", o.cors.Preflight)
	}
	// RFC 8935 push of Security Event Tokens: the SET is the credential,
	// checked by the receiver; no access token is taken there.
	if o.events != nil {
		e.POST(o.eventsPath, gin.WrapH(o.events))
	}
	// RFC 9728: what a client needs to get a token; no credential needed.
	e.GET(auth.ResourceMetadataPath, auth.MetadataHandler(o.verifier))
	e.HEAD(auth.ResourceMetadataPath, auth.MetadataHandler(o.verifier))
	e.NoRoute(api.NotFound)
	// gin reaches NoMethod only for a path that a route matched with
	// another method: one of the routes, named from the path. The
	// security events' path takes POST only.
	e.NoMethod(func(c *gin.Context) {
		route := "/plants"
		switch p := c.Request.URL.Path; {
		case p == auth.ResourceMetadataPath:
			route = auth.ResourceMetadataPath
		case o.events != nil && p == o.eventsPath:
			route = o.eventsPath
			c.Header("Allow", "POST")
		}
		observability.Annotate(c).SetRoute(route)
	}, api.MethodNotAllowed)
	return e
}
