package auth

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Defaults of [Options].
const (
	DefaultMaxGroups  = 256
	DefaultCacheBytes = 32 << 20
)

// Config is the verification policy of one issuer. Its zero value accepts
// any iss and aud with the default algorithms, groups at "groups" and no
// required scope.
type Config struct {
	// Issuer, when set, is the value the iss claim must equal.
	Issuer string
	// Audiences, when set, are the values of which the aud claim (a string
	// or an array) must contain at least one. A blank entry is an error.
	Audiences []string
	// Algorithms is the allow-list of JWS alg values; nil or empty means
	// [DefaultAlgorithms].
	Algorithms []string
	// GroupsClaim is the claim holding the caller's groups: a top-level
	// name, or a dotted path into nested objects ("realm_access.roles").
	// A top-level claim whose name contains dots is found by its full name
	// first. Empty means "groups".
	GroupsClaim string
	// RequiredScope, when set, is a scope the token must carry in its
	// scope or scp claim; without it the request is refused with 403.
	RequiredScope string
	// DPoP is whether the issuer's tokens may or must be bound to a key
	// the client proves it holds (RFC 9449).
	DPoP DPoPMode
	// MTLS is whether the issuer's tokens may or must be bound to the
	// client's TLS certificate (RFC 8705 §3), which the gateway forwards
	// ([Options].ClientCertHeader).
	MTLS MTLSMode
	// TokenTypes, when set, are the JOSE typ values the issuer's tokens
	// must carry: "at+jwt" (RFC 9068) and "jwt", compared without regard
	// to case and with an optional "application/" prefix. Nil, or the one
	// item "any", takes a token without typ too. Whatever it says, a typ
	// that names another kind of JWT (any "+jwt" type but at+jwt) is
	// refused.
	TokenTypes []string
	// Clients, when set, are the clients whose tokens are accepted: the
	// token's client_id (RFC 9068 §2.2) or, without one, its azp (OpenID
	// Connect) must be one of them. A blank entry is an error.
	Clients []string
	// MaxLifetime, when positive, is the longest lifetime a token may
	// have: exp at most this after iat, or, without iat, after now (with
	// the leeway).
	MaxLifetime time.Duration
	// MaxStale, when positive, is how long fetched keys keep verifying
	// without a successful fetch confirming them; 0 keeps the last good
	// keys for as long as fetches fail. Keys read from files are not
	// fetched, and an issuer without fetched keys cannot set it.
	MaxStale time.Duration
}

// An Issuer is a trusted issuer: the policy its tokens must meet and the
// keys that verify them. Keys of one issuer never verify a token routed to
// another.
type Issuer struct {
	// Name qualifies the issuer's callers ([Identity.Issuer]): "" for the
	// one unnamed issuer, else 1 to 32 of [a-z0-9-].
	Name string
	// Config is the policy.
	Config Config
	// Keys finds the verification keys.
	Keys Keys
}

// Options are the settings a [Verifier] applies to every issuer.
type Options struct {
	// Leeway is the clock skew allowed on exp, nbf and iat.
	Leeway time.Duration
	// MaxGroups is the most groups a token may carry; more is refused with
	// [ReasonTooManyGroups]. 0 means [DefaultMaxGroups].
	MaxGroups int
	// CacheBytes bounds the memory of the verified-token cache, everything
	// it holds counted. 0 means [DefaultCacheBytes]; a negative value turns
	// the cache off.
	CacheBytes int64
	// DPoPWindow is how old a DPoP proof may be, by its iat; 0 means
	// [DefaultDPoPWindow].
	DPoPWindow time.Duration
	// DPoPAlgorithms are the algorithms a DPoP proof may be signed with,
	// which the DPoP challenge and the resource metadata list; nil or
	// empty means [DefaultDPoPAlgorithms]. "none" and the HMACs are
	// refused.
	DPoPAlgorithms []string
	// PublicURL is the URL callers reach the service at (the gateway's),
	// which DPoP proofs name and the resource metadata describes. Nil means
	// the scheme and host of each request, as TrustedProxies report them.
	PublicURL *url.URL
	// TrustedProxies are the peers whose X-Forwarded-Proto and
	// X-Forwarded-Host are believed when PublicURL is nil.
	TrustedProxies []netip.Prefix
	// ClientCertHeader, when set, is the request header a gateway that
	// terminates mutual TLS forwards the client certificate in (RFC 8705
	// §3, see [ParseClientCertificate]), read on requests from
	// TrustedProxies only. Empty means none: every certificate-bound token
	// is refused ([ReasonCertBound]).
	ClientCertHeader string
	// RateLimit, when set, limits the requests of each caller (issuer and
	// subject) that pass every check but the rate: refused with a
	// *[RateLimitError] (429). A DPoP request is counted before its proof's
	// signature is verified and its jti recorded (see [Admitter]).
	RateLimit *RateLimit
	// Nonces, when set, are the DPoP server nonces (RFC 9449 §9) every
	// proof must carry: one it lacks, or a stale or forged one, is refused
	// with use_dpop_nonce ([ReasonDPoPNonce]), and [Middleware] sets the
	// current one on every response to a DPoP request.
	Nonces *Nonces
	// Shared, when set, keeps the rate of each caller and the DPoP proofs
	// used across the replicas of a deployment; this replica's limiter
	// (RateLimit) and replay cache take over whenever it fails, and keep
	// recording every proof meanwhile.
	Shared SharedState
}

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

// Verifier checks credentials against its issuers. It is safe for
// concurrent use.
type Verifier struct {
	opts    Options
	issuers atomic.Pointer[issuerTable]
	cache   *tokenCache
	// admitter applies the rate limit and the replay rule of DPoP proofs,
	// with this replica's limiter and replay cache, and Options.Shared
	// when it is set.
	admitter Admitter
	replays  *replayCache
	// certs are the thumbprints of the client certificates seen lately.
	certs *certCache
	// now is the clock of every time check; tests replace it.
	now func() time.Time
}

// issuerTable is the set of issuers a Verifier routes to. It is replaced
// whole by [Verifier.SetIssuers].
type issuerTable struct {
	// unnamed takes every token when it is set: the -jwt-* flags' issuer.
	unnamed *issuer
	// byIss routes a token by its exact iss when there is no unnamed one.
	byIss map[string]*issuer
	all   []*issuer
}

// issuer is an [Issuer] ready to verify.
type issuer struct {
	name       string
	cfg        Config
	keys       Keys
	parser     *jwt.Parser
	groupsPath []string
	// lookup finds keys: keys, with its fetched parts held to MaxStale.
	lookup Keys
	// fetched are the parts of keys that fetch their keys, when MaxStale
	// bounds how old their last confirmation may be; nil otherwise.
	fetched []*JWKS
	// gen is the generation of keys, or nil when keys does not count its
	// changes (then its tokens are never cached).
	gen func() uint64
	// retired is set when SetIssuers dropped or replaced the issuer: its
	// cached tokens stop counting.
	retired atomic.Bool
}

// NewVerifier returns a Verifier for the given issuers, which must be
// either exactly one unnamed issuer or one or more named ones with
// distinct names and distinct iss values. It returns a *[ConfigError] for
// a negative leeway, MaxGroups or DPoPWindow, DPoPAlgorithms with "none",
// an HMAC or an unknown algorithm, a PublicURL that is not an http or
// https URL without user, query or fragment, a ClientCertHeader that is
// not a header name (or names a header read for something else), and for
// issuers that
// [Verifier.SetIssuers] refuses.
func NewVerifier(o Options, issuers ...Issuer) (*Verifier, error) {
	if o.Leeway < 0 {
		return nil, configErr("", settingLeeway, "negative duration %s", o.Leeway)
	}
	if o.MaxGroups < 0 {
		return nil, configErr("", settingMaxGroups, "negative number %d", o.MaxGroups)
	}
	if o.MaxGroups == 0 {
		o.MaxGroups = DefaultMaxGroups
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.DPoPWindow < 0 {
		return nil, configErr("", settingDPoPWindow, "negative duration %s", o.DPoPWindow)
	}
	if o.DPoPWindow == 0 {
		o.DPoPWindow = DefaultDPoPWindow
	}
	algs, err := checkDPoPAlgorithms(o.DPoPAlgorithms)
	if err != nil {
		return nil, err
	}
	o.DPoPAlgorithms = algs
	if u := o.PublicURL; u != nil && (u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "") {
		return nil, configErr("", settingPublicURL, "want an http or https URL without user, query or fragment")
	}
	if o.ClientCertHeader, err = checkCertHeader(o.ClientCertHeader); err != nil {
		return nil, err
	}
	v := &Verifier{opts: o, now: time.Now, cache: newTokenCache(o.CacheBytes), replays: newReplayCache(replayCacheEntries), certs: newCertCache()}
	v.admitter = newLocalAdmitter(o.RateLimit, v.replays)
	if o.Shared != nil {
		v.admitter = &sharedAdmitter{local: v.admitter.(*localAdmitter), shared: o.Shared}
	}
	if err := v.SetIssuers(issuers...); err != nil {
		return nil, err
	}
	return v, nil
}

// SetIssuers makes v verify against issuers from now on; on an error v
// keeps the issuers it had. An issuer whose name, Config and Keys are those
// of a current one keeps its cached tokens; the tokens of the others stop
// counting at once.
//
// The rules: at least one issuer; either one unnamed issuer or named ones,
// each name 1 to 32 of [a-z0-9-], unique, and neither of the issuer label
// values [IssuerDefault] and [IssuerUnknown]; a named issuer's iss set and
// unique; an iss that is a URL has no user information or query, since
// the resource metadata publishes it; no algorithm "none" or unknown one,
// no blank audience, no groups claim with an empty path element, a
// required scope that is one RFC 6749 scope token; token types among any,
// at+jwt and jwt (any alone), no blank client, no negative MaxLifetime or
// MaxStale; Keys not nil, static keys (a key set, a key file, an HMAC
// secret file) of which at least one fits the issuer's algorithms, and,
// with MaxStale, fetched keys whose refresh period (with its jitter) and
// fetch timeout fit within it; MTLS required only with a ClientCertHeader. Each refusal of a setting is a
// *[ConfigError].
func (v *Verifier) SetIssuers(issuers ...Issuer) error {
	checked, err := checkIssuers(issuers...)
	if err != nil {
		return err
	}
	for i, is := range checked {
		if is.Config.MTLS == MTLSRequired && v.opts.ClientCertHeader == "" {
			e := configErr(is.Name, settingMTLS, "required refuses every token while no client certificate header is configured")
			e.index = i + 1
			return e
		}
	}
	old := v.issuers.Load()
	t := &issuerTable{byIss: make(map[string]*issuer, len(checked))}
	for i, is := range checked {
		n, err := v.newIssuer(is, old)
		if err != nil {
			if ce, ok := err.(*ConfigError); ok {
				ce.index = i + 1
			}
			return err
		}
		if is.Name == "" {
			t.unnamed = n
		} else {
			t.byIss[is.Config.Issuer] = n
		}
		t.all = append(t.all, n)
	}
	v.issuers.Store(t)
	if old != nil {
		for _, o := range old.all {
			if !slices.Contains(t.all, o) {
				o.retired.Store(true)
			}
		}
	}
	return nil
}

// checkIssuers applies the rules of [Verifier.SetIssuers] but those of
// the keys, and returns the issuers with their Configs' defaults filled
// in. Its *ConfigError values carry the position of the issuer at fault,
// which the issuers file maps to its lines; the file applies these rules
// before it opens any key source.
func checkIssuers(issuers ...Issuer) ([]Issuer, error) {
	if len(issuers) == 0 {
		return nil, configErr("", settingIssuers, "no issuer")
	}
	at := func(i int, e *ConfigError) error {
		e.index = i + 1
		return e
	}
	out := make([]Issuer, len(issuers))
	names, isses := make(map[string]int, len(issuers)), make(map[string]int, len(issuers))
	for i, is := range issuers {
		if is.Name == "" && len(issuers) > 1 {
			return nil, at(i, configErr("", settingName, "the unnamed issuer cannot be combined with others"))
		}
		if is.Name != "" {
			if err := checkIssuerName(is.Name); err != nil {
				return nil, at(i, &ConfigError{Field: string(settingName), Err: err})
			}
		}
		if j, dup := names[is.Name]; dup {
			e := configErr("", settingName, "issuer name %q appears twice", is.Name)
			e.first = j + 1
			return nil, at(i, e)
		}
		names[is.Name] = i
		iss := is.Config.Issuer
		if err := checkIssuerURL(iss); err != nil {
			return nil, at(i, &ConfigError{Issuer: is.Name, Field: string(settingIssuer), Err: err})
		}
		if is.Name != "" {
			if iss == "" {
				return nil, at(i, configErr(is.Name, settingIssuer, "no iss value"))
			}
			if j, dup := isses[iss]; dup {
				return nil, at(i, configErr(is.Name, settingIssuer, "iss %q is also that of issuer %s", iss, issuers[j].Name))
			}
			isses[iss] = i
		}
		c, err := is.Config.check()
		if err != nil {
			ce := err.(*ConfigError)
			ce.Issuer = is.Name
			return nil, at(i, ce)
		}
		out[i] = Issuer{Name: is.Name, Config: c, Keys: is.Keys}
	}
	return out, nil
}

// checkIssuerName returns why name cannot name an issuer, or nil.
func checkIssuerName(name string) error {
	if len(name) < 1 || len(name) > 32 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return fmt.Errorf("issuer name %q: want 1 to 32 of a-z, 0-9 and -", name)
	}
	if name == IssuerDefault || name == IssuerUnknown {
		return fmt.Errorf("issuer name %q is reserved: the metrics' issuer label names the -jwt-* flags' issuer %q and a request of no issuer %q", name, IssuerDefault, IssuerUnknown)
	}
	return nil
}

// checkIssuerURL returns an error when iss is a URL (it has a scheme) with
// user information or a query: RFC 9728 metadata publishes it; or when it
// is the URL of a discovery document rather than the issuer's, which no
// token names and under which discovery would look for a document that
// does not exist.
func checkIssuerURL(iss string) error {
	u, err := url.Parse(iss)
	if err != nil || u.Scheme == "" {
		return nil // not a URL: any string may be an iss
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery {
		return errors.New("want a URL without user information or query: the resource metadata publishes it")
	}
	if issuer, ok := issuerOfDocument(u); ok {
		return fmt.Errorf("this is the URL of the issuer's discovery document, not the issuer: use %s (the document's \"issuer\"); discovery finds the document from it", issuer)
	}
	return nil
}

// wellKnown are the paths of the discovery documents: OpenID Connect's,
// appended to the issuer, and RFC 8414's, inserted before the issuer's
// path (or, as some servers do, appended).
var wellKnown = []string{"/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"}

// issuerOfDocument returns the issuer whose discovery document u names,
// when it names one.
func issuerOfDocument(u *url.URL) (string, bool) {
	path := strings.TrimSuffix(u.Path, "/")
	for _, wk := range wellKnown {
		rest, inserted := strings.CutPrefix(path, wk+"/")
		before, appended := strings.CutSuffix(path, wk)
		switch {
		case appended:
			path = before
		case inserted && wk == wellKnown[1]:
			path = "/" + rest
		default:
			continue
		}
		issuer := *u
		issuer.Path, issuer.RawPath, issuer.Fragment = path, "", ""
		return issuer.String(), true
	}
	return "", false
}

// newIssuer returns is, checked by checkIssuers, ready to verify, or the
// equal issuer of old.
func (v *Verifier) newIssuer(is Issuer, old *issuerTable) (*issuer, error) {
	if is.Keys == nil {
		if is.Name != "" {
			return nil, fmt.Errorf("issuer %s: no key source", is.Name)
		}
		return nil, errors.New("no key source")
	}
	cfg := is.Config
	if err := checkStatic(is.Keys, cfg.Algorithms); err != nil {
		err.Issuer = is.Name
		return nil, err
	}
	if old != nil {
		for _, o := range old.all {
			if o.name == is.Name && o.keys == is.Keys && sameConfig(o.cfg, cfg) {
				return o, nil
			}
		}
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(cfg.Algorithms),
		jwt.WithLeeway(v.opts.Leeway),
		jwt.WithExpirationRequired(),
		// golang-jwt checks iat only on request; with it, an iat later than
		// now plus leeway fails with ErrTokenUsedBeforeIssued.
		jwt.WithIssuedAt(),
		// Canonical base64 only, so one token has one encoding.
		jwt.WithStrictDecoding(),
		jwt.WithTimeFunc(func() time.Time { return v.now() }),
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if len(cfg.Audiences) > 0 {
		// WithAudience passes when aud contains any one of them.
		opts = append(opts, jwt.WithAudience(cfg.Audiences...))
	}
	// check made the path from a valid claim.
	path, _ := claimPath(cfg.GroupsClaim)
	n := &issuer{
		name:       is.Name,
		cfg:        cfg,
		keys:       is.Keys,
		parser:     jwt.NewParser(opts...),
		groupsPath: path,
		lookup:     is.Keys,
	}
	if gen, ok := generationOf(is.Keys); ok {
		n.gen = gen
	}
	n.holdFresh(v)
	return n, nil
}

// check returns c with its defaults filled in (the default algorithms, in
// order and without repeats; groups at "groups"), or the *ConfigError of
// the rule of [Verifier.SetIssuers] it breaks.
func (c Config) check() (Config, error) {
	known := DefaultAlgorithms()
	algs := c.Algorithms
	if len(algs) == 0 {
		algs = known
	}
	clean := make([]string, 0, len(algs))
	for _, a := range algs {
		if strings.EqualFold(a, "none") {
			return c, configErr("", settingAlgorithms, `algorithm "none" is never allowed`)
		}
		if !slices.Contains(known, a) {
			return c, configErr("", settingAlgorithms, "unknown algorithm %q (want some of %s)", a, strings.Join(known, ", "))
		}
		if !slices.Contains(clean, a) {
			clean = append(clean, a)
		}
	}
	c.Algorithms = clean
	for _, a := range c.Audiences {
		if strings.TrimSpace(a) == "" {
			return c, configErr("", settingAudiences, "blank audience: a list of blanks would check nothing")
		}
	}
	c.Audiences = slices.Clone(c.Audiences)
	if c.GroupsClaim == "" {
		c.GroupsClaim = defaultGroupsClaim
	}
	if _, err := claimPath(c.GroupsClaim); err != nil {
		return c, &ConfigError{Field: string(settingGroupsClaim), Err: err}
	}
	if c.RequiredScope != "" && !isScopeToken(c.RequiredScope) {
		return c, configErr("", settingRequiredScope, "%q is not a single scope token", c.RequiredScope)
	}
	return c.checkIntended()
}

func sameConfig(a, b Config) bool {
	return a.Issuer == b.Issuer && slices.Equal(a.Audiences, b.Audiences) &&
		slices.Equal(a.Algorithms, b.Algorithms) && a.GroupsClaim == b.GroupsClaim &&
		a.RequiredScope == b.RequiredScope && a.DPoP == b.DPoP && a.MTLS == b.MTLS &&
		slices.Equal(a.TokenTypes, b.TokenTypes) && slices.Equal(a.Clients, b.Clients) &&
		a.MaxLifetime == b.MaxLifetime && a.MaxStale == b.MaxStale
}

// Ready returns nil when every issuer has usable keys, and otherwise an
// error naming each issuer that has none, with the cause. It is the keys'
// part of readiness: a source that fetches its keys (a JWKS) is not ready
// until a first fetch yielded a usable set, and stays ready on the last
// good set when later fetches fail.
//
// With MaxStale, fetched keys that no fetch confirmed for longer than that
// are none: the issuer is named as having no usable keys until a fetch
// succeeds again.
func (v *Verifier) Ready() error {
	var errs []error
	for _, s := range v.KeysReady() {
		err := s.Err
		if err != nil {
			if s.Issuer != "" {
				err = fmt.Errorf("issuer %s: %w", s.Issuer, err)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// keysReady returns the first error of the parts of k that say whether
// they are ready.
func keysReady(k Keys) error {
	if m, ok := k.(multiKeys); ok {
		for _, part := range m {
			if err := keysReady(part); err != nil {
				return err
			}
		}
		return nil
	}
	if r, ok := k.(interface{ Ready() error }); ok {
		return r.Ready()
	}
	return nil
}
