package auth

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
)

// maxNumericDate is 9999-12-31T23:59:59Z, the latest NumericDate accepted.
const maxNumericDate = 253402300799

// identity builds the caller from verified claims and applies the checks
// of the caller: sub, the groups (type and count) and scope types, and the
// required scope.
func (v *Verifier) identity(is *issuer, claims Claims) (Identity, *Error) {
	id := Identity{Issuer: is.name}
	switch sub := claims["sub"].(type) {
	case nil:
		return Identity{}, invalidToken(ReasonNoSubject)
	case string:
		if sub == "" {
			return Identity{}, invalidToken(ReasonNoSubject)
		}
		id.Subject = sub
	default:
		return Identity{}, invalidToken(ReasonClaims)
	}

	if groupsOverage(claims) {
		// The caller's groups were left out of the token: served, it
		// would be a caller without groups, who sees only * plants.
		return Identity{}, invalidToken(ReasonGroupsOverage)
	}
	raw, err := lookupPath(claims, is.cfg.GroupsClaim, is.groupsPath)
	if err != nil {
		return Identity{}, invalidToken(ReasonClaims)
	}
	if list, ok := raw.([]any); ok && len(list) > v.opts.MaxGroups {
		// Counted before anything is made of them: no valid token may make
		// a request cost much more than an ordinary one.
		return Identity{}, invalidToken(ReasonTooManyGroups)
	}
	var ok bool
	if id.Groups, ok = appendStrings(nil, raw, false); !ok {
		return Identity{}, invalidToken(ReasonClaims)
	}

	if id.Scopes, ok = appendStrings(nil, claims["scope"], true); !ok {
		return Identity{}, invalidToken(ReasonClaims)
	}
	if id.Scopes, ok = appendStrings(id.Scopes, claims["scp"], true); !ok {
		return Identity{}, invalidToken(ReasonClaims)
	}

	if s := is.cfg.RequiredScope; s != "" && !slices.Contains(id.Scopes, s) {
		return Identity{}, &Error{Status: http.StatusForbidden, Code: "insufficient_scope", Reason: ReasonScope,
			Scope: s, Subject: id.Subject, Issuer: is.name}
	}
	return id, nil
}

// groupsOverage reports whether claims say that the caller's groups were
// left out because there were too many (Microsoft Entra ID's "groups
// overage"): a _claim_names object with a groups member, pointing to where
// the groups could be fetched, or hasgroups true.
func groupsOverage(claims Claims) bool {
	if names, ok := claims["_claim_names"].(map[string]any); ok {
		if _, ok := names["groups"]; ok {
			return true
		}
	}
	return claims["hasgroups"] == true
}

// lookupPath returns the claim named name, or, when there is none, the
// value at path through nested objects. A missing or null value is nil; a
// non-object on the way is an error.
func lookupPath(claims map[string]any, name string, path []string) (any, error) {
	if v, ok := claims[name]; ok || len(path) == 1 {
		return v, nil
	}
	var cur any = claims
	for _, p := range path {
		if cur == nil {
			return nil, nil
		}
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, errors.New("not an object")
		}
		cur = obj[p]
	}
	return cur, nil
}

// defaultGroupsClaim is where the groups are when an issuer names no
// groups claim.
const defaultGroupsClaim = "groups"

// claimPath returns the path of a groups claim: a top-level name, or a
// dotted path into nested objects ("realm_access.roles"); "" is
// defaultGroupsClaim. An empty element ("a..b", "a.") is an error. It is
// the one reader of a claim path, for verifying ([lookupPath]) and for
// making tokens ([Claims.Set]).
func claimPath(claim string) ([]string, error) {
	if claim == "" {
		claim = defaultGroupsClaim
	}
	path := strings.Split(claim, ".")
	if slices.Contains(path, "") {
		return nil, fmt.Errorf("%q has an empty path element", claim)
	}
	return path, nil
}

// Set puts v at the claim named claim, a claim path as an issuer's groups
// claim is (a top-level name, or a dotted path into nested objects, ""
// for "groups"), making the objects on the way: how a token made for an
// issuer carries what the issuer reads there. It returns an error for a
// path with an empty element, or one that goes through a claim that is
// not an object.
func (c Claims) Set(claim string, v any) error {
	path, err := claimPath(claim)
	if err != nil {
		return err
	}
	cur := c
	for _, p := range path[:len(path)-1] {
		next, ok := cur[p].(map[string]any)
		if !ok {
			if _, taken := cur[p]; taken {
				return fmt.Errorf("%q: %q is already a claim that is not an object", strings.Join(path, "."), p)
			}
			next = map[string]any{}
			cur[p] = next
		}
		cur = next
	}
	cur[path[len(path)-1]] = v
	return nil
}

// appendStrings appends to dst the strings of v, a string or an array of
// strings, skipping empty and repeated values; split divides a string (not
// the items of an array, which are taken whole) at the space character
// U+0020 only (RFC 6749 §3.3 scope lists). It reports false when v has
// another type. Past a few values, repeats are found with a map: comparing
// each of 256 groups (or of the thousands of words an 8 KiB scope can
// hold) with all before it cost more than verifying the token.
func appendStrings(dst []string, v any, split bool) ([]string, bool) {
	n := len(dst)
	switch x := v.(type) {
	case []any:
		n += len(x)
	case string:
		if split {
			n += strings.Count(x, " ") + 1
		}
	}
	var seen map[string]struct{}
	if n > 8 {
		seen = make(map[string]struct{}, n)
		for _, s := range dst {
			seen[s] = struct{}{}
		}
	}
	add := func(s string) {
		if s == "" {
			return
		}
		if seen != nil {
			if _, dup := seen[s]; dup {
				return
			}
			seen[s] = struct{}{}
		} else if slices.Contains(dst, s) {
			return
		}
		dst = append(dst, s)
	}
	switch x := v.(type) {
	case nil:
	case string:
		if !split {
			add(x)
			break
		}
		for f := range strings.SplitSeq(x, " ") {
			add(f)
		}
	case []any:
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return dst, false
			}
			add(s)
		}
	default:
		return dst, false
	}
	return dst, true
}

// Claims are the claims of a token as its issuer vouches for them: the
// members of its JSON payload (or of the issuer's answer about it) as
// encoding/json decodes them into an any, numbers as float64.
type Claims map[string]any

// registered applies the rules of RFC 7519 on the registered claims of a
// token at now, the same whatever vouched for them: exp required, and
// exp, nbf and iat NumericDates from 0 to 253402300799 held to the leeway
// (iat never in the future); iss equal to the issuer's when it names one;
// aud (a string or an array of strings) holding one of the issuer's
// audiences, or the resource URL of Options.PublicURL, when it names some. It returns "" when every rule holds, else
// the reason of the first that fails in this order: a type or range
// (ReasonClaims), exp past, exp missing, iss missing, aud missing or
// empty, nbf or iat in the future, iss not the issuer's, no audience of
// the issuer's.
func (is *issuer) registered(c Claims, now time.Time, leeway time.Duration) Reason {
	var malformed, expired, noExp, early, noIss, badIss, noAud, badAud bool
	switch exp, ok, err := c.date("exp"); {
	case err != nil:
		malformed = true
	case !ok:
		noExp = true
	case !now.Before(exp.Add(leeway)):
		expired = true
	}
	for _, name := range [...]string{"nbf", "iat"} {
		switch t, ok, err := c.date(name); {
		case err != nil:
			malformed = true
		case ok && now.Before(t.Add(-leeway)):
			early = true
		}
	}
	if auds := is.cfg.Audiences; len(auds) > 0 {
		// A string or an array of strings; any other value is no
		// audience at all.
		n, blank, match := 0, false, false
		switch aud := c["aud"].(type) {
		case string:
			n, blank, match = 1, aud == "", is.audience(aud)
		case []any:
			n = len(aud)
			for _, a := range aud {
				s, ok := a.(string)
				if !ok {
					malformed = true
					break
				}
				blank = blank || n == 1 && s == ""
				match = match || is.audience(s)
			}
		}
		switch {
		case n == 0 || n == 1 && blank:
			noAud = true
		case !match:
			badAud = true
		}
	}
	if want := is.cfg.Issuer; want != "" {
		raw, present := c["iss"]
		switch iss, ok := raw.(string); {
		case !present, ok && iss == "":
			noIss = true
		case !ok:
			malformed = true
		case iss != want:
			badIss = true
		}
	}
	switch {
	case malformed:
		return ReasonClaims
	case expired:
		return ReasonExpired
	case noExp:
		return ReasonMissingExp
	case noIss:
		return ReasonIssuer
	case noAud:
		return ReasonAudience
	case early:
		return ReasonNotYetValid
	case badIss:
		return ReasonIssuer
	case badAud:
		return ReasonAudience
	}
	return ""
}

// audience reports whether aud is one of the issuer's audiences, or the
// resource URL of -public-url, which clients that follow the resource
// metadata ask for (RFC 8707 §2).
func (is *issuer) audience(aud string) bool {
	return slices.Contains(is.cfg.Audiences, aud) || is.resource != "" && aud == is.resource
}

// errNumericDate: a time claim is not a number from 0 to 253402300799.
var errNumericDate = errors.New("numeric date out of range")

// date returns the NumericDate claim name, and false when it is absent;
// an error wrapping errNumericDate when it is not a number from 0 to year
// 9999, so that no overflow ever turns a far-future nbf or iat into the
// past.
func (c Claims) date(name string) (time.Time, bool, error) {
	raw, ok := c[name]
	if !ok {
		return time.Time{}, false, nil
	}
	f, ok := raw.(float64)
	if !ok || !(f >= 0 && f <= maxNumericDate) {
		return time.Time{}, false, fmt.Errorf("%w: %s", errNumericDate, name)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true, nil
}

// times returns exp, nbf and iat of verified claims in Unix nanoseconds
// (nbf and iat math.MinInt64 when absent). Verified claims hold them in
// range, and year 9999 fits an int64 of nanoseconds only up to 2262, so a
// later date is held at the end of the range: "never" for exp.
func (c Claims) times() (exp, nbf, iat int64) {
	nanos := func(name string) int64 {
		d, ok, err := c.date(name)
		if err != nil || !ok {
			return math.MinInt64
		}
		if d.After(time.Unix(0, math.MaxInt64)) {
			return math.MaxInt64
		}
		return d.UnixNano()
	}
	return nanos("exp"), nanos("nbf"), nanos("iat")
}

// isScopeToken reports whether s is one RFC 6749 scope-token, which also
// makes it safe inside a quoted-string of the challenge.
func isScopeToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return s != ""
}
