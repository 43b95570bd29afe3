package auth

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/plantstore/plantstore/auth/edge"
)

// ResourceMetadataPath is where the protected resource metadata of RFC 9728
// is served, on the API listener.
const ResourceMetadataPath = "/.well-known/oauth-protected-resource"

// ResourceMetadata is the protected resource metadata document (RFC 9728
// §2): what a client needs to know to get a token this service accepts.
type ResourceMetadata struct {
	Resource                      string   `json:"resource"`
	AuthorizationServers          []string `json:"authorization_servers,omitempty"`
	ScopesSupported               []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported        []string `json:"bearer_methods_supported"`
	DPoPSigningAlgValuesSupported []string `json:"dpop_signing_alg_values_supported,omitempty"`
	DPoPBoundAccessTokensRequired bool     `json:"dpop_bound_access_tokens_required"`
	// TLSClientCertificateBoundAccessTokens is true when certificate-bound
	// tokens (RFC 8705) are accepted: a client certificate header is
	// configured and some issuer does not have mTLS off.
	TLSClientCertificateBoundAccessTokens bool `json:"tls_client_certificate_bound_access_tokens,omitempty"`
	// TokenPolicies is an extension member (RFC 9728 §2 allows others;
	// this one is named for this service): for each issuer that enforces
	// one of them, the rules its tokens meet beyond those of RFC 9728's
	// members. Absent when no issuer enforces any.
	TokenPolicies []TokenPolicy `json:"plantstore_token_policies,omitempty"`
}

// A TokenPolicy says which tokens of one authorization server are meant
// for this resource: what [Config] sets in TokenTypes, Clients,
// MaxLifetime, MaxStale and Claims, and which of these rules it enforces
// and which it audits. A member is absent when the rule is off. The
// clients themselves are not published: a client knows its own id.
type TokenPolicy struct {
	// AuthorizationServer is the issuer's iss; absent for an issuer of
	// the flags that names none.
	AuthorizationServer string `json:"authorization_server,omitempty"`
	// TokenTypes are the typ values its tokens must carry ("at+jwt",
	// "jwt").
	TokenTypes []string `json:"token_types,omitempty"`
	// ClientRestricted is true when only some clients' tokens are taken.
	ClientRestricted bool `json:"client_restricted,omitempty"`
	// MaxLifetime is the longest lifetime of a token, in seconds.
	MaxLifetime float64 `json:"max_lifetime,omitempty"`
	// MaxStale is how long, in seconds, fetched keys keep verifying with
	// no successful fetch.
	MaxStale float64 `json:"max_stale,omitempty"`
	// Claims are the paths of the claims its claim rules hold to a
	// condition; the conditions themselves are not published.
	Claims []string `json:"claims,omitempty"`
	// Enforced are the rules, of token_types, clients, max_lifetime and
	// claims, that it sets and enforces; Audited those it sets and only
	// counts: a token they would refuse is accepted.
	Enforced []string `json:"enforced,omitempty"`
	Audited  []string `json:"audited,omitempty"`
}

// Metadata returns the protected resource metadata as a request r sees it:
// the resource is -public-url, or the scheme and host r came with; the
// authorization servers are the configured issuers' iss values; the scopes
// their required scopes; DPoP is described, with the algorithms a proof
// may use, unless every issuer has it off, and required when every issuer
// requires it; certificate-bound tokens are said to be accepted when a
// client certificate header is configured and some issuer does not have
// mTLS off; the token policies are those of the issuers that enforce
// one.
func (v *Verifier) Metadata(r *http.Request) ResourceMetadata {
	md := ResourceMetadata{Resource: v.resource(r), BearerMethodsSupported: []string{"header"}}
	required, off, mtls := true, true, false
	for _, is := range v.issuers.Load().all {
		if is.cfg.Issuer != "" && !slices.Contains(md.AuthorizationServers, is.cfg.Issuer) {
			md.AuthorizationServers = append(md.AuthorizationServers, is.cfg.Issuer)
		}
		if s := is.cfg.RequiredScope; s != "" && !slices.Contains(md.ScopesSupported, s) {
			md.ScopesSupported = append(md.ScopesSupported, s)
		}
		required = required && is.cfg.DPoP == DPoPRequired
		off = off && is.cfg.DPoP == DPoPOff
		mtls = mtls || is.cfg.MTLS != MTLSOff
		if p, ok := is.cfg.policy(); ok {
			md.TokenPolicies = append(md.TokenPolicies, p)
		}
	}
	if !off {
		md.DPoPSigningAlgValuesSupported = slices.Clone(v.opts.DPoPAlgorithms)
	}
	md.DPoPBoundAccessTokensRequired = required
	md.TLSClientCertificateBoundAccessTokens = mtls && v.opts.ClientCertHeader != ""
	return md
}

// PublicOrigin returns the scheme and host of a -public-url, and the path
// the resource is served under without a trailing "/": what the resource
// identifier, its metadata URL, a proof's htu and a page's Link start with.
func PublicOrigin(u *url.URL) (origin, prefix string) {
	return u.Scheme + "://" + u.Host, strings.TrimSuffix(u.EscapedPath(), "/")
}

// origin returns the scheme and host the resource is reached at, and the
// path it is served under without a trailing "/": -public-url's, or,
// without it, those r came to (through trusted proxies only) and "".
func (v *Verifier) origin(r *http.Request) (origin, prefix string) {
	if u := v.opts.PublicURL; u != nil {
		return PublicOrigin(u)
	}
	scheme, host := edge.Origin(r, v.opts.TrustedProxies)
	return scheme + "://" + host, ""
}

// resource returns the resource identifier: -public-url without a
// trailing "/", or the origin r came to.
func (v *Verifier) resource(r *http.Request) string {
	origin, prefix := v.origin(r)
	return origin + prefix
}

// MetadataURL returns the URL of the metadata document for r (RFC 9728
// §3.1): the well-known path between the resource's host and its path.
func (v *Verifier) MetadataURL(r *http.Request) string {
	origin, prefix := v.origin(r)
	return origin + ResourceMetadataPath + prefix
}

// bearerAccepted reports whether some issuer takes bearer tokens.
func (v *Verifier) bearerAccepted() bool {
	for _, is := range v.issuers.Load().all {
		if is.cfg.DPoP != DPoPRequired {
			return true
		}
	}
	return false
}

// policy returns the TokenPolicy of c, and false when it enforces none of
// its rules.
func (c Config) policy() (TokenPolicy, bool) {
	p := TokenPolicy{
		AuthorizationServer: c.Issuer,
		TokenTypes:          c.TokenTypes,
		ClientRestricted:    len(c.Clients) > 0,
		MaxLifetime:         c.MaxLifetime.Seconds(),
		MaxStale:            c.MaxStale.Seconds(),
	}
	for _, r := range c.Claims {
		if !slices.Contains(p.Claims, r.Path) {
			p.Claims = append(p.Claims, r.Path)
		}
	}
	for _, name := range AuditableRules() {
		set := name == "token_types" && len(c.TokenTypes) > 0 || name == "clients" && len(c.Clients) > 0 ||
			name == "max_lifetime" && c.MaxLifetime > 0 || name == "claims" && len(c.Claims) > 0
		switch {
		case !set:
		case c.Audits(name):
			p.Audited = append(p.Audited, name)
		default:
			p.Enforced = append(p.Enforced, name)
		}
	}
	return p, len(p.TokenTypes) > 0 || p.ClientRestricted || p.MaxLifetime > 0 || p.MaxStale > 0 || len(p.Claims) > 0
}
