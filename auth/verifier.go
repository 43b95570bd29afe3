package auth

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/plantstore/plantstore/auth/dpop"
	"github.com/plantstore/plantstore/auth/edge"
	"github.com/plantstore/plantstore/observability/setting"
)

// Defaults of [Options].
const (
	DefaultMaxGroups  = 256
	DefaultCacheBytes = 32 << 20
)

// An Issuer is a trusted issuer: the policy its tokens must meet and how
// they are trusted. What trusts the tokens of one issuer (its keys) never
// trusts a token routed to another.
type Issuer struct {
	// Name qualifies the issuer's callers ([Identity.Issuer]): "" for the
	// one unnamed issuer, else 1 to 32 of [a-z0-9-].
	Name string
	// Config is the policy.
	Config Config
	// JWS trusts the issuer's tokens in JWS compact form, to which their
	// iss routes them (or which all go to the unnamed issuer): by their
	// signature with the issuer's keys, see package jws. Nil refuses them
	// as malformed; an issuer has a JWS or an Opaque Trust, or both.
	JWS Trust
	// Opaque, when set, trusts the tokens that are not a JWS: they go to
	// the one issuer whose Opaque is set. With none, such a token is
	// refused as malformed.
	Opaque Trust
}

// Options are the settings a [Verifier] applies to every issuer.
type Options struct {
	// Leeway is the clock skew allowed on exp, nbf and iat.
	Leeway time.Duration
	// MaxGroups is the most groups a token may carry; more is refused with
	// [ReasonTooManyGroups]. 0 or less means [DefaultMaxGroups].
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
	// empty means [dpop.DefaultAlgorithms]. "none" and the HMACs are
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
	Nonces *dpop.Nonces
	// Shared, when set, keeps the rate of each caller and the DPoP proofs
	// used across the replicas of a deployment. It is asked only once this
	// replica's limiter (RateLimit) and replay cache allowed the request,
	// and for a proof once its signature verified; they take over whenever
	// it fails, and keep recording every proof meanwhile.
	Shared SharedState
	// Revocations, when set, are asked about every token that would be
	// accepted, served from the cache or not: a token they name is
	// refused with [ReasonRevoked].
	Revocations Revocations
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
	replays  *dpop.ReplayCache
	// failures are the proofs whose signature failed lately, by caller
	// and by key.
	failures *dpop.Failures
	// certs are the thumbprints of the client certificates seen lately.
	certs *edge.CertCache
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
	// opaque takes the tokens that are not a JWS: the issuer whose Opaque
	// is set, nil for none.
	opaque *issuer
	all    []*issuer
}

// issuer is an [Issuer] ready to verify.
type issuer struct {
	name string
	cfg  Config
	// trusts are the Issuer's JWS and Opaque, which made jws and opaque.
	trusts     [2]Trust
	jws        Authenticator // nil: it takes no JWS
	opaque     Authenticator // nil: it takes no opaque tokens
	rules      []rule        // the rules on the claims cfg sets
	groupsPath []string
	// resource is the resource identifier the metadata publishes when
	// Options.PublicURL is set, which an aud may name in place of one of
	// cfg's Audiences (RFC 8707); "" without PublicURL.
	resource string
	// retired is set when SetIssuers dropped or replaced the issuer: its
	// cached tokens stop counting.
	retired atomic.Bool
}

// NewVerifier returns a Verifier for the given issuers, which must be
// either exactly one unnamed issuer or one or more named ones with
// distinct names and distinct iss values. It returns a *[setting.Error] for
// a negative leeway or DPoPWindow, DPoPAlgorithms with "none",
// an HMAC or an unknown algorithm, a PublicURL that is not an http or
// https URL without user, query or fragment, a ClientCertHeader that is
// not a header name (or names a header read for something else), and for
// issuers that
// [Verifier.SetIssuers] refuses.
func NewVerifier(o Options, issuers ...Issuer) (*Verifier, error) {
	if o.Leeway < 0 {
		return nil, setting.Errorf("leeway", "negative duration %s", o.Leeway)
	}
	if o.MaxGroups <= 0 {
		o.MaxGroups = DefaultMaxGroups
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.DPoPWindow < 0 {
		return nil, setting.Errorf("dpop_window", "negative duration %s", o.DPoPWindow)
	}
	if o.DPoPWindow == 0 {
		o.DPoPWindow = DefaultDPoPWindow
	}
	algs, err := dpop.CheckAlgorithms(o.DPoPAlgorithms)
	if err != nil {
		return nil, err
	}
	o.DPoPAlgorithms = algs
	if u := o.PublicURL; u != nil && (u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "") {
		return nil, setting.Errorf("public_url", "want an http or https URL without user, query or fragment")
	}
	if o.ClientCertHeader, err = checkCertHeader(o.ClientCertHeader); err != nil {
		return nil, err
	}
	v := &Verifier{opts: o, now: time.Now, cache: newTokenCache(o.CacheBytes), replays: dpop.NewReplayCache(dpop.ReplayEntries), failures: dpop.NewFailures(dpop.FailureBudget, dpop.FailurePeriod, dpop.FailureEntries), certs: edge.NewCertCache()}
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
// keeps the issuers it had. An issuer whose name, Config and Trusts are
// those of a current one keeps its cached tokens; the tokens of the others
// stop counting at once.
//
// The rules: at least one issuer; either one unnamed issuer or named ones,
// each name 1 to 32 of [a-z0-9-], unique, and neither of the issuer label
// values [UnnamedIssuerLabel] and [UnknownIssuerLabel]; a named issuer's iss set and
// unique; an iss that is a URL has no user information or query, since
// the resource metadata publishes it; no algorithm "none" or unknown one,
// no blank audience, no groups claim with an empty path element, a
// required scope that is one RFC 6749 scope token; token types among any,
// at+jwt and jwt (any alone), no blank client, no negative MaxLifetime or
// MaxStale; at most one issuer with an Opaque Trust; a JWS or an Opaque Trust; static keys (a key set, a key file, an HMAC
// secret file) of which at least one fits the issuer's algorithms, and,
// with MaxStale, fetched keys whose refresh period (with its jitter) and
// fetch timeout fit within it; MTLS required only with a ClientCertHeader. Each refusal of a setting is a
// *[setting.Error].
func (v *Verifier) SetIssuers(issuers ...Issuer) error {
	checked, err := CheckIssuers(issuers...)
	if err != nil {
		return err
	}
	for _, is := range checked {
		if is.Config.MTLS == MTLSRequired && v.opts.ClientCertHeader == "" {
			return issuerError(is.Name, "mtls", "required refuses every token while no client certificate header is configured")
		}
	}
	old := v.issuers.Load()
	t := &issuerTable{byIss: make(map[string]*issuer, len(checked))}
	var opaqueSaid *issuer
	var always []*issuer
	for _, is := range checked {
		n, err := v.newIssuer(is, old)
		if err != nil {
			return err
		}
		if is.Name == "" {
			t.unnamed = n
		} else {
			t.byIss[is.Config.Issuer] = n
		}
		switch {
		case n.opaque == nil:
		case is.Config.Introspection.Tokens != IntrospectAlways:
			// An issuer whose opaque tokens are its only introspected
			// ones: at most one may say so.
			if opaqueSaid != nil {
				return issuerError(n.name, "introspection", "issuers %s and %s both take opaque tokens; at most one may", opaqueSaid.name, n.name)
			}
			opaqueSaid = n
		default:
			always = append(always, n)
		}
		t.all = append(t.all, n)
	}
	// Opaque tokens go to the issuer that takes them; without one, to
	// the one issuer that introspects always (its JWTs and the rest), and
	// with several of those to none: which one an opaque token is of
	// cannot be told.
	switch {
	case opaqueSaid != nil:
		t.opaque = opaqueSaid
	case len(always) == 1:
		t.opaque = always[0]
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

// CheckIssuers applies the rules of [Verifier.SetIssuers] but those of
// the keys, and returns the issuers with their Configs' defaults filled
// in: what a caller checks before it opens any key source. The rules of
// the list come first (names, each unique, and the unnamed issuer
// alone), then each issuer's own, in order; so the refusal of a setting
// of one issuer names it by its name, unique by then.
func CheckIssuers(issuers ...Issuer) ([]Issuer, error) {
	if len(issuers) == 0 {
		return nil, setting.Errorf("issuers", "no issuer")
	}
	names := make(map[string]bool, len(issuers))
	for _, is := range issuers {
		if is.Name == "" && len(issuers) > 1 {
			return nil, setting.Errorf("name", "the unnamed issuer cannot be combined with others")
		}
		if is.Name != "" {
			if err := CheckIssuerName(is.Name); err != nil {
				return nil, &setting.Error{Key: "name", Err: err}
			}
		}
		if names[is.Name] {
			return nil, setting.Errorf("name", "issuer name %q appears twice", is.Name)
		}
		names[is.Name] = true
	}
	out := make([]Issuer, len(issuers))
	isses := make(map[string]int, len(issuers))
	for i, is := range issuers {
		iss := is.Config.Issuer
		if err := checkIssuerURL(iss); err != nil {
			return nil, &setting.Error{Issuer: is.Name, Key: "issuer", Err: err}
		}
		if is.Name != "" {
			if iss == "" {
				return nil, issuerError(is.Name, "issuer", "no iss value")
			}
			if j, dup := isses[iss]; dup {
				return nil, issuerError(is.Name, "issuer", "iss %q is also that of issuer %s", iss, issuers[j].Name)
			}
			isses[iss] = i
		}
		c, err := is.Config.check()
		if err != nil {
			err.Issuer = is.Name
			return nil, err
		}
		out[i] = Issuer{Name: is.Name, Config: c, JWS: is.JWS, Opaque: is.Opaque}
	}
	return out, nil
}

// issuerError returns the *setting.Error of the setting key of the issuer
// named name ("" for the unnamed one).
func issuerError(name, key, format string, a ...any) *setting.Error {
	e := setting.Errorf(key, format, a...)
	e.Issuer = name
	return e
}

// CheckIssuerName returns why name cannot name an issuer, or nil.
func CheckIssuerName(name string) error {
	if len(name) < 1 || len(name) > 32 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return fmt.Errorf("issuer name %q: want 1 to 32 of a-z, 0-9 and -", name)
	}
	if name == UnnamedIssuerLabel || name == UnknownIssuerLabel {
		return fmt.Errorf("issuer name %q is reserved: the metrics' issuer label names the -jwt-* flags' issuer %q and a request of no issuer %q", name, UnnamedIssuerLabel, UnknownIssuerLabel)
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

// newIssuer returns is, checked by CheckIssuers, ready to verify, or the
// equal issuer of old.
func (v *Verifier) newIssuer(is Issuer, old *issuerTable) (*issuer, error) {
	if is.JWS == nil && is.Opaque == nil {
		if is.Name != "" {
			return nil, fmt.Errorf("issuer %s: no key source", is.Name)
		}
		return nil, errors.New("no key source")
	}
	n := &issuer{name: is.Name, cfg: is.Config, trusts: [2]Trust{is.JWS, is.Opaque}}
	if u := v.opts.PublicURL; u != nil {
		origin, prefix := PublicOrigin(u)
		n.resource = origin + prefix
	}
	// Made every time, so that a Trust checks what it trusts again (a key
	// file read since may have lost the keys of the issuer's algorithms).
	now := func() time.Time { return v.now() }
	var err error
	if is.JWS != nil {
		if n.jws, err = is.JWS.Authenticator(is.Config, now); err != nil {
			return nil, issuerOf(err, is.Name)
		}
	}
	if is.Opaque != nil {
		if n.opaque, err = is.Opaque.Authenticator(is.Config, now); err != nil {
			return nil, issuerOf(err, is.Name)
		}
	}
	if old != nil {
		for _, o := range old.all {
			if o.name == is.Name && o.trusts == n.trusts && reflect.DeepEqual(o.cfg, n.cfg) {
				return o, nil
			}
		}
	}
	// CheckIssuers made the path from a valid claim.
	n.groupsPath, _ = claimPath(is.Config.GroupsClaim)
	n.rules = is.Config.rules()
	return n, nil
}

// issuerOf returns err, naming the issuer when it is the *setting.Error of
// a setting of no issuer yet.
func issuerOf(err error, name string) error {
	var se *setting.Error
	if errors.As(err, &se) && se.Issuer == "" {
		named := *se
		named.Issuer = name
		return &named
	}
	return err
}

// UnlistedResource returns the names of the issuers ("" for the unnamed
// one) whose tokens are refused when their aud is the resource URL the
// metadata publishes: those that name audiences while Options.PublicURL
// is not set. A client that follows the metadata asks its authorization
// server for a token whose aud is that URL (RFC 8707, RFC 9728 §2); with
// PublicURL set it is accepted as one of every issuer's audiences, and
// without it the resource URL is each request's own origin, which no
// audience list can be sure to hold.
func (v *Verifier) UnlistedResource() []string {
	var out []string
	if v.opts.PublicURL != nil {
		return nil
	}
	for _, is := range v.issuers.Load().all {
		if len(is.cfg.Audiences) > 0 {
			out = append(out, is.name)
		}
	}
	return out
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
