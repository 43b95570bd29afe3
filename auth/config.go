package auth

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/plantstore/plantstore/observability/setting"
)

// DefaultAlgorithms returns the algorithms a [Verifier] allows when a
// Config names none: every JWS signature algorithm golang-jwt implements
// except "none". A key is still only used with its own family.
func DefaultAlgorithms() []string {
	return []string{
		"RS256", "RS384", "RS512",
		"PS256", "PS384", "PS512",
		"ES256", "ES384", "ES512",
		"EdDSA",
		"HS256", "HS384", "HS512",
	}
}

// Config is the verification policy of one issuer: every rule an issuer
// sets, each declared once, here. A field's yaml key is its key in the
// issuers file and in the table of settings (the key a refusal of it
// cites); a file issuer that leaves one out takes the -jwt-* flags' value.
// Its zero value accepts any iss and aud with the default algorithms,
// groups at "groups" and no required scope.
//
// Adding a rule adds a field here, its check to [Config.check], and, for
// a rule on the claims, its [rule] to [Config.rules]; the rule's own file
// says how it checks a token and what a token needs to pass it.
type Config struct {
	// Issuer, when set, is the value the iss claim must equal.
	Issuer string `yaml:"issuer"`
	// Audiences, when set, are the values of which the aud claim (a string
	// or an array) must contain at least one. A blank entry is an error.
	Audiences []string `yaml:"audiences"`
	// Algorithms is the allow-list of JWS alg values; nil or empty means
	// [DefaultAlgorithms].
	Algorithms []string `yaml:"algorithms"`
	// GroupsClaim is the claim holding the caller's groups: a top-level
	// name, or a dotted path into nested objects ("realm_access.roles").
	// A top-level claim whose name contains dots is found by its full name
	// first. Empty means "groups".
	GroupsClaim string `yaml:"groups_claim"`
	// RequiredScope, when set, is a scope the token must carry in its
	// scope or scp claim; without it the request is refused with 403.
	RequiredScope string `yaml:"required_scope"`
	// DPoP is whether the issuer's tokens may or must be bound to a key
	// the client proves it holds (RFC 9449).
	DPoP DPoPMode `yaml:"dpop"`
	// MTLS is whether the issuer's tokens may or must be bound to the
	// client's TLS certificate (RFC 8705 §3), which the gateway forwards
	// ([Options].ClientCertHeader).
	MTLS MTLSMode `yaml:"mtls"`
	// TokenTypes, when set, are the JOSE typ values the issuer's tokens
	// must carry: "at+jwt" (RFC 9068) and "jwt", compared without regard
	// to case and with an optional "application/" prefix. Nil, or the one
	// item "any", takes a token without typ too. Whatever it says, a typ
	// that names another kind of JWT (any "+jwt" type but at+jwt) is
	// refused.
	TokenTypes []string `yaml:"token_types"`
	// Clients, when set, are the clients whose tokens are accepted: the
	// token's client_id (RFC 9068 §2.2) or, without one, its azp (OpenID
	// Connect) must be one of them. A blank entry is an error.
	Clients []string `yaml:"clients"`
	// MaxLifetime, when positive, is the longest lifetime a token may
	// have: exp at most this after iat, or, without iat, after now (with
	// the leeway).
	MaxLifetime time.Duration `yaml:"max_lifetime"`
	// MaxStale, when positive, is how long fetched keys keep verifying
	// without a successful fetch confirming them; 0 keeps the last good
	// keys for as long as fetches fail. Keys read from files are not
	// fetched, and an issuer without fetched keys cannot set it.
	MaxStale time.Duration `yaml:"max_stale"`
	// Introspection, when its Tokens is not off, has the issuer asked
	// whether a token is active (RFC 7662) rather than, or as well as,
	// trusting its signature.
	Introspection Introspection `yaml:"introspection"`
	// Claims are the issuer's own conditions on claims, each of which a
	// token must meet (see [ClaimRule]).
	Claims []ClaimRule `yaml:"claims"`
	// Audit names the rules that are counted rather than enforced (see
	// audit.go): any of token_types, clients, max_lifetime and claims. A
	// token one of them would refuse is accepted, and the refusal counted
	// and logged.
	Audit []string `yaml:"audit"`
}

// check returns c with its defaults filled in (the default algorithms, in
// order and without repeats; groups at "groups"; token types in the form
// they are compared in), or the *setting.Error of the first rule of
// [Verifier.SetIssuers] it breaks, naming its setting.
func (c Config) check() (Config, *setting.Error) {
	for _, check := range []func(*Config) *setting.Error{
		(*Config).checkAlgorithms,
		(*Config).checkAudiences,
		(*Config).checkGroupsClaim,
		(*Config).checkRequiredScope,
		(*Config).checkTokenTypes,
		(*Config).checkClients,
		(*Config).checkMaxLifetime,
		(*Config).checkMaxStale,
		(*Config).checkIntrospection,
		(*Config).checkClaims,
		(*Config).checkAudit,
	} {
		if err := check(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// rules returns the rules on the claims that c sets, in the order they
// run (see [rule]).
func (c Config) rules() []rule {
	var out []rule
	for _, r := range []rule{
		c.lifetimeRule(),
		c.clientsRule(),
		c.claimsRule(),
	} {
		if r.check != nil {
			r.audited = c.Audits(r.name)
			out = append(out, r)
		}
	}
	return out
}

// A rule is a per-issuer rule on a token's claims: a setting of [Config]
// that, when set, refuses the tokens that do not meet it. The rules of an
// issuer run in order on every token it accepts, after the registered
// claims and before the caller is made of them. A cached token is not
// checked again: a rule's answer depends on the claims and the Config
// alone, and a Config that changes retires the issuer's cached tokens.
type rule struct {
	// name is the rule's setting: its key in the table of settings and
	// in the issuers file.
	name string
	// check returns the refusal of claims at now, nil when they pass.
	check func(c Claims, now time.Time, leeway time.Duration) *Error
	// audited tells that the rule is counted, not enforced.
	audited bool
	// pass makes c, the claims of a token issued with an iat and an exp,
	// pass the rule: what a token made for the issuer carries.
	pass func(c Claims)
}

// checkAlgorithms refuses "none" and unknown algorithms, and fills in
// the defaults.
func (c *Config) checkAlgorithms() *setting.Error {
	known := DefaultAlgorithms()
	algs := c.Algorithms
	if len(algs) == 0 {
		algs = known
	}
	clean := make([]string, 0, len(algs))
	for _, a := range algs {
		if strings.EqualFold(a, "none") {
			return setting.Errorf("algorithms", `algorithm "none" is never allowed`)
		}
		if !slices.Contains(known, a) {
			return setting.Errorf("algorithms", "unknown algorithm %q (want some of %s)", a, strings.Join(known, ", "))
		}
		if !slices.Contains(clean, a) {
			clean = append(clean, a)
		}
	}
	c.Algorithms = clean
	return nil
}

// checkAudiences refuses a blank audience.
func (c *Config) checkAudiences() *setting.Error {
	if hasBlank(c.Audiences) {
		return setting.Errorf("audiences", "blank audience: a list of blanks would check nothing")
	}
	c.Audiences = slices.Clone(c.Audiences)
	return nil
}

// hasBlank reports whether list has an item that is empty or white space.
func hasBlank(list []string) bool {
	return slices.ContainsFunc(list, func(s string) bool { return strings.TrimSpace(s) == "" })
}

// checkGroupsClaim refuses a path with an empty element, and fills in
// "groups".
func (c *Config) checkGroupsClaim() *setting.Error {
	if c.GroupsClaim == "" {
		c.GroupsClaim = defaultGroupsClaim
	}
	if _, err := claimPath(c.GroupsClaim); err != nil {
		return &setting.Error{Key: "groups_claim", Err: err}
	}
	return nil
}

// checkRequiredScope refuses a scope that is not one scope token.
func (c *Config) checkRequiredScope() *setting.Error {
	if c.RequiredScope != "" && !isScopeToken(c.RequiredScope) {
		return setting.Errorf("required_scope", "%q is not a single scope token", c.RequiredScope)
	}
	return nil
}

// checkMaxStale refuses a negative duration.
func (c *Config) checkMaxStale() *setting.Error {
	if c.MaxStale < 0 {
		return setting.Errorf("max_stale", "negative duration %s", c.MaxStale)
	}
	return nil
}

// Token returns what a token for subject with groups, issued at now for
// ttl, carries to pass the rules of an issuer of the checked Config c: its
// claims (sub, iss, aud, the groups at the groups claim, the required scope,
// and what each of c's rules asks, such as a client of the list or a
// lifetime within the cap) and its JOSE typ. It is how -dev makes tokens
// that each mean what they say.
func (c Config) Token(subject string, groups []string, now time.Time, ttl time.Duration) (typ string, claims Claims, err error) {
	// Numbers as a token's JSON decodes to, for the rules to read.
	claims = Claims{"iat": float64(now.Unix()), "exp": float64(now.Add(ttl).Unix())}
	if subject != "" {
		claims["sub"] = subject
	}
	if c.Issuer != "" {
		claims["iss"] = c.Issuer
	}
	switch len(c.Audiences) {
	case 0:
	case 1:
		claims["aud"] = c.Audiences[0]
	default:
		claims["aud"] = c.Audiences
	}
	if len(groups) > 0 {
		if err := claims.Set(c.GroupsClaim, groups); err != nil {
			return "", nil, fmt.Errorf("groups claim %w", err)
		}
	}
	if c.RequiredScope != "" {
		claims["scope"] = c.RequiredScope
	}
	for _, r := range c.rules() {
		r.pass(claims)
	}
	return c.mintType(), claims, nil
}
