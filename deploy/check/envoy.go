package check

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ServiceIdleTimeout is how long the service keeps an idle connection
// open (its http.Server IdleTimeout): whoever holds connections to it must
// close them sooner.
const ServiceIdleTimeout = 120 * time.Second

// MaxJWKSCache is the longest a gateway that verifies tokens may cache the
// identity provider's keys: Envoy does not refetch them for an unknown
// kid, so a key must be published that long before it signs.
const MaxJWKSCache = time.Minute

// defaultJWKSCache is Envoy Gateway's remoteJWKS cache when none is set.
const defaultJWKSCache = 5 * time.Minute

// checkEnvoyGateway checks the Envoy Gateway policies of the route. A
// SecurityPolicy that verifies tokens (the service does in any case) must
// trust the service's own issuer and audience, let a request without a
// token through to the service, cache the keys briefly, and copy the
// subject into a header; a BackendTrafficPolicy's rate limit must count by
// that header and only for requests whose token Envoy verified, with
// Envoy's refusals in the service's Error shape. Envoy must close idle
// upstream connections before the service does.
func checkEnvoyGateway(m *manifests, env map[string]string, v *violations) {
	routes := map[string]bool{}
	for _, r := range m.routes {
		routes[r.Name] = true
	}
	subjectHeaders := map[string]bool{}
	for _, sp := range m.securityPols {
		checkTargets("SecurityPolicy "+sp.Name, sp.Spec.TargetRefs, routes, v)
		checkGatewayCORS(sp, env, v)
		jwt := sp.Spec.JWT
		if jwt == nil {
			continue
		}
		if jwt.Optional == nil || !*jwt.Optional {
			v.add("SecurityPolicy %s: jwt.optional must be true: a request without a token must reach the service, which answers it with its own challenge", sp.Name)
		}
		if jwt.FailOpen != nil && *jwt.FailOpen {
			v.add("SecurityPolicy %s: jwt.failOpen lets a token that does not verify through with a subject header the caller chose", sp.Name)
		}
		audiences := strings.Split(env["PLANTSTORE_JWT_AUDIENCE"], ",")
		for _, p := range jwt.Providers {
			if p.RemoteJWKS != nil {
				cache := defaultJWKSCache
				if d := p.RemoteJWKS.CacheDuration; d != nil {
					if c, err := time.ParseDuration(string(*d)); err == nil {
						cache = c
					}
				}
				if cache > MaxJWKSCache {
					v.add("SecurityPolicy %s: provider %s caches the JWKS for %v: Envoy does not refetch it for an unknown kid, so every token signed with a key published less than that ago is refused; set remoteJWKS.cacheDuration to %v at most and have the identity provider publish a key that long before it signs with it", sp.Name, p.Name, cache, MaxJWKSCache)
				}
			}
			if p.Issuer != env["PLANTSTORE_JWT_ISSUER"] {
				v.add("SecurityPolicy %s: provider %s trusts issuer %q, the service PLANTSTORE_JWT_ISSUER=%q", sp.Name, p.Name, p.Issuer, env["PLANTSTORE_JWT_ISSUER"])
			}
			for _, a := range p.Audiences {
				if !slices.Contains(audiences, a) {
					v.add("SecurityPolicy %s: provider %s accepts audience %q, which the service (PLANTSTORE_JWT_AUDIENCE=%q) refuses", sp.Name, p.Name, a, env["PLANTSTORE_JWT_AUDIENCE"])
				}
			}
			for _, c := range p.ClaimToHeaders {
				if c.Claim == "sub" {
					subjectHeaders[strings.ToLower(c.Header)] = true
				}
			}
		}
	}
	for _, bp := range m.trafficPols {
		checkTargets("BackendTrafficPolicy "+bp.Name, bp.Spec.TargetRefs, routes, v)
		rl := bp.Spec.RateLimit
		if rl == nil || rl.Global == nil {
			continue
		}
		for i, rule := range rl.Global.Rules {
			var bySubject, verified bool
			for _, cs := range rule.ClientSelectors {
				for _, h := range cs.Headers {
					name := strings.ToLower(h.Name)
					switch {
					case h.Type != nil && *h.Type == egv1a1.HeaderMatchDistinct && subjectHeaders[name]:
						bySubject = true
					case h.Type != nil && *h.Type == egv1a1.HeaderMatchDistinct:
						v.add("BackendTrafficPolicy %s: rule %d counts by header %s, which no SecurityPolicy sets from a token's sub: any caller could choose its bucket", bp.Name, i, h.Name)
					case name == "authorization" && h.Value != nil && strings.HasPrefix(*h.Value, "^"):
						verified = true
					}
				}
			}
			if !bySubject {
				v.add("BackendTrafficPolicy %s: rule %d is not keyed on the token's subject", bp.Name, i)
			}
			if bySubject && !verified {
				v.add("BackendTrafficPolicy %s: rule %d counts requests whose token Envoy did not extract, and so did not verify: a caller without a token could send a victim's subject header and spend its bucket; match Authorization too", bp.Name, i)
			}
		}
		if !slices.ContainsFunc(bp.Spec.ResponseOverride, func(o *egv1a1.ResponseOverride) bool {
			return o != nil && slices.ContainsFunc(o.Match.StatusCodes, func(s egv1a1.StatusCodeMatch) bool { return s.Value != nil && *s.Value == 429 })
		}) {
			v.add("BackendTrafficPolicy %s: no responseOverride for Envoy's 429: callers would get an empty body without Retry-After instead of the service's Error shape", bp.Name)
		}
	}
	if len(m.securityPols)+len(m.trafficPols) == 0 {
		return // not Envoy Gateway
	}
	idle := time.Hour // Envoy's default
	for _, bp := range m.trafficPols {
		if t := bp.Spec.Timeout; t != nil && t.HTTP != nil && t.HTTP.ConnectionIdleTimeout != nil {
			if d, err := time.ParseDuration(string(*t.HTTP.ConnectionIdleTimeout)); err == nil {
				idle = d
			}
		}
	}
	if idle >= ServiceIdleTimeout {
		v.add("Envoy keeps idle connections to the service for %v, the service closes them after %v: a request Envoy sends on one as the service closes it fails (503, upstream reset); set a BackendTrafficPolicy's timeout.http.connectionIdleTimeout below %v", idle, ServiceIdleTimeout, ServiceIdleTimeout)
	}
}

// corsExposed are the response headers a browser page needs to read: the
// next page, the challenge, the DPoP nonce, the request ID and Retry-After.
var corsExposed = []string{"Link", "WWW-Authenticate", "DPoP-Nonce", "X-Request-ID", "Retry-After"}

// checkGatewayCORS checks the CORS of a SecurityPolicy: never beside the
// service's own (both would send Access-Control-Allow-Origin twice, which
// browsers refuse), never credentials mode, and the headers a page of the
// API needs to send and to read.
func checkGatewayCORS(sp *egv1a1.SecurityPolicy, env map[string]string, v *violations) {
	cors := sp.Spec.CORS
	if cors == nil {
		return
	}
	if env["PLANTSTORE_CORS_ORIGINS"] != "" {
		v.add("SecurityPolicy %s answers CORS at the gateway and PLANTSTORE_CORS_ORIGINS=%q answers it in the service: responses would carry Access-Control-Allow-Origin twice, which browsers refuse; keep one", sp.Name, env["PLANTSTORE_CORS_ORIGINS"])
	}
	if cors.AllowCredentials != nil && *cors.AllowCredentials {
		v.add("SecurityPolicy %s: cors.allowCredentials lets pages send cookies; the token travels in a header, never credentials mode", sp.Name)
	}
	for _, o := range cors.AllowOrigins {
		if strings.Contains(string(o), "*") && o != "*" {
			v.add("SecurityPolicy %s: cors.allowOrigins %q: list exact origins (or * alone)", sp.Name, o)
		}
	}
	for _, h := range []string{"Authorization", "DPoP"} {
		if !slices.ContainsFunc(cors.AllowHeaders, func(a string) bool { return strings.EqualFold(a, h) }) {
			v.add("SecurityPolicy %s: cors.allowHeaders lacks %s: a page could not send its token", sp.Name, h)
		}
	}
	for _, h := range corsExposed {
		if !slices.ContainsFunc(cors.ExposeHeaders, func(e string) bool { return strings.EqualFold(e, h) || e == "*" }) {
			v.add("SecurityPolicy %s: cors.exposeHeaders lacks %s, which a page of the API must read", sp.Name, h)
		}
	}
}

// checkTargets requires a policy to target routes of the manifests.
func checkTargets(owner string, refs []gatewayv1.LocalPolicyTargetReferenceWithSectionName, routes map[string]bool, v *violations) {
	if len(refs) == 0 {
		v.add("%s: no targetRefs", owner)
	}
	for _, r := range refs {
		if r.Kind != "HTTPRoute" || !routes[string(r.Name)] {
			v.add("%s: targets %s %s, which is not an HTTPRoute of the manifests", owner, r.Kind, r.Name)
		}
	}
}

// checkProduction checks what production needs beyond the rest: the image
// pinned by digest, so that what runs is what was tested and a tag moved
// in the registry changes nothing; runbook links into the version that
// runs; and a rate limit per subject for the whole deployment at the
// gateway (when it is Envoy Gateway), with the service's own, per replica,
// behind it.
func checkProduction(m *manifests, main *corev1.Container, env map[string]string, v *violations) {
	if !strings.Contains(main.Image, "@sha256:") {
		v.add("container %s: image %q: production deploys by digest (deploy/release/set-image.sh), not by a tag the registry can move", main.Name, main.Image)
	}
	if tag := imageTag(main.Image); tag != "" {
		for _, r := range m.rules {
			for _, g := range r.Spec.Groups {
				for _, rule := range g.Rules {
					if u := rule.Annotations["runbook_url"]; u != "" && !strings.Contains(u, "/"+tag+"/") {
						v.add("PrometheusRule %s: alert %s: runbook_url %s is not the runbook of the version deployed (%s)", r.Name, rule.Alert, u, tag)
					}
				}
			}
		}
	}
	if env["PLANTSTORE_RATE_LIMIT"] == "" || env["PLANTSTORE_RATE_LIMIT"] == "0" {
		v.add("PLANTSTORE_RATE_LIMIT is off: production keeps the per-replica limit as a backstop to the gateway's")
	}
	_, shared := env["PLANTSTORE_REDIS_URL"]
	atGateway := len(m.routes) > 0 && slices.ContainsFunc(m.trafficPols, func(p *egv1a1.BackendTrafficPolicy) bool {
		return p.Spec.RateLimit != nil && p.Spec.RateLimit.Global != nil && len(p.Spec.RateLimit.Global.Rules) > 0
	})
	if !shared && !atGateway {
		v.add("no rate limit per subject for the whole deployment: without PLANTSTORE_REDIS_URL the service's PLANTSTORE_RATE_LIMIT holds per replica, N times looser with N replicas, and no gateway rate limit counts by the token's subject")
	}
}

// imageTag returns the tag of an image reference, or "".
func imageTag(image string) string {
	ref, _, _ := strings.Cut(image, "@")
	name := ref[strings.LastIndex(ref, "/")+1:]
	if i := strings.LastIndex(name, ":"); i >= 0 {
		return name[i+1:]
	}
	return ""
}
