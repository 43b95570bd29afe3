package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/plantstore/plantstore/observability/setting"
)

// The rule of this file, claims, holds a token's claims to the issuer's
// own conditions (an email verified, a tenant, no delegation): each
// [ClaimRule] of the list must hold, or the token is refused with
// [ReasonClaim], the refusal naming the rule's path, never the claim's
// value.

// A ClaimRule is one condition on one claim: its Path and exactly one
// operator.
type ClaimRule struct {
	// Path is the claim: a top-level name, or a dotted path into nested
	// objects ("realm_access.roles"); a top-level claim whose name
	// contains dots is found by its full name first.
	Path string `yaml:"path" json:"path"`
	// Equals is the JSON value the claim must equal: true is not "true",
	// 1 is not "1".
	Equals *any `yaml:"equals" json:"equals,omitempty"`
	// OneOf are the JSON values of which the claim must equal one.
	OneOf []any `yaml:"one_of" json:"one_of,omitempty"`
	// Exists says whether the claim must be there (not null) or absent.
	Exists *bool `yaml:"exists" json:"exists,omitempty"`
	// Prefix is what the claim, a string, or at least one item of it, an
	// array, must start with.
	Prefix *string `yaml:"prefix" json:"prefix,omitempty"`

	path []string // Path, split
}

// A ClaimRuleError is why the claim rule at Index (from 0) of a list was
// refused, so that the file it is written in can point at its line.
type ClaimRuleError struct {
	Index int
	Path  string
	Err   error
}

func (e *ClaimRuleError) Error() string {
	if strings.TrimSpace(e.Path) == "" {
		return fmt.Sprintf("rule %d: %v", e.Index+1, e.Err)
	}
	return fmt.Sprintf("rule %d (path %q): %v", e.Index+1, e.Path, e.Err)
}

func (e *ClaimRuleError) Unwrap() error { return e.Err }

// ParseClaimRules reads a list of claim rules written as JSON (the
// -jwt-claims flag): a JSON array of objects with the keys path, equals,
// one_of, exists and prefix. It refuses any other key and text that is
// not such an array; the rules themselves are checked with the issuer.
func ParseClaimRules(s string) ([]ClaimRule, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var rules []ClaimRule
	if err := dec.Decode(&rules); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("not JSON (at byte %d): want a list such as [{\"path\": \"email_verified\", \"equals\": true}]", se.Offset)
		case errors.As(err, &te):
			return nil, fmt.Errorf("want a list of objects such as [{\"path\": \"email_verified\", \"equals\": true}]: %v", err)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return nil, fmt.Errorf("unknown key %s: want path and one of equals, one_of, exists and prefix", strings.TrimPrefix(err.Error(), "json: unknown field "))
		}
		return nil, fmt.Errorf("not a list of claim rules: %v", err)
	}
	if dec.More() {
		return nil, errors.New("text after the list")
	}
	if rules == nil {
		return []ClaimRule{}, nil
	}
	return rules, nil
}

// String returns the rule as a one-line description: its path and
// operator, never a claim's value (it says the rule's own).
func (r ClaimRule) String() string {
	switch {
	case r.Equals != nil:
		return r.Path + " equals " + jsonText(*r.Equals)
	case r.OneOf != nil:
		return r.Path + " one of " + jsonText(r.OneOf)
	case r.Exists != nil && *r.Exists:
		return r.Path + " exists"
	case r.Exists != nil:
		return r.Path + " absent"
	case r.Prefix != nil:
		return r.Path + " starts with " + jsonText(*r.Prefix)
	}
	return r.Path
}

// jsonText returns v as JSON.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// checkClaims refuses a rule without a path, with an empty path element,
// or without exactly one operator, an empty one_of, and a value that is
// not JSON; it puts the values in the form a token's claims decode to
// (numbers as float64), so that comparing is JSON equality.
func (c *Config) checkClaims() *setting.Error {
	if c.Claims == nil {
		return nil
	}
	out := make([]ClaimRule, len(c.Claims))
	for i, r := range c.Claims {
		bad := func(format string, a ...any) *setting.Error {
			return &setting.Error{Key: "claims", Err: &ClaimRuleError{Index: i, Path: r.Path, Err: fmt.Errorf(format, a...)}}
		}
		if strings.TrimSpace(r.Path) == "" {
			return bad("no path")
		}
		path, err := claimPath(r.Path)
		if err != nil {
			return bad("%v", err)
		}
		var ops []string
		for _, op := range []struct {
			name string
			set  bool
		}{{"equals", r.Equals != nil}, {"one_of", r.OneOf != nil}, {"exists", r.Exists != nil}, {"prefix", r.Prefix != nil}} {
			if op.set {
				ops = append(ops, op.name)
			}
		}
		switch len(ops) {
		case 0:
			return bad("no operator: want one of equals, one_of, exists and prefix (equals null is none: say exists: false)")
		case 1:
		default:
			return bad("two operators (%s): want one per rule: write a rule for each", strings.Join(ops, " and "))
		}
		n := ClaimRule{Path: r.Path, Exists: r.Exists, Prefix: r.Prefix, path: path}
		if r.Equals != nil {
			v, err := normalJSON(*r.Equals)
			if err != nil {
				return bad("equals: %v", err)
			}
			n.Equals = &v
		}
		if r.OneOf != nil {
			if len(r.OneOf) == 0 {
				return bad("one_of is empty: it would refuse every token")
			}
			n.OneOf = make([]any, len(r.OneOf))
			for j, x := range r.OneOf {
				v, err := normalJSON(x)
				if err != nil {
					return bad("one_of: %v", err)
				}
				n.OneOf[j] = v
			}
		}
		if r.Prefix != nil && *r.Prefix == "" {
			return bad("prefix is empty: every string starts with it")
		}
		out[i] = n
	}
	c.Claims = out
	return nil
}

// normalJSON returns v as encoding/json decodes its JSON into an any:
// numbers as float64, objects as map[string]any, arrays as []any; an
// error when v is no JSON value (a YAML mapping with keys that are not
// strings).
func normalJSON(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, errors.New("not a JSON value")
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, errors.New("not a JSON value")
	}
	return out, nil
}

// claimsRule is the rule of Claims, when it names some: each claim rule
// holds.
func (c Config) claimsRule() rule {
	if len(c.Claims) == 0 {
		return rule{}
	}
	rules := c.Claims
	return rule{
		name: "claims",
		check: func(claims Claims, _ time.Time, _ time.Duration) *Error {
			for i := range rules {
				if !rules[i].holds(claims) {
					e := invalidToken(ReasonClaim)
					e.Claim = rules[i].Path
					return e
				}
			}
			return nil
		},
		pass: func(claims Claims) {
			for _, r := range rules {
				var v any
				switch {
				case r.Equals != nil:
					v = *r.Equals
				case r.OneOf != nil:
					v = r.OneOf[0]
				case r.Exists != nil && *r.Exists:
					v = true
				case r.Prefix != nil:
					v = *r.Prefix
				default:
					continue // absent: a token made has no such claim
				}
				_ = claims.Set(r.Path, v)
			}
		},
	}
}

// holds reports whether the claims meet r. A path through a claim that is
// not an object finds nothing there.
func (r *ClaimRule) holds(claims Claims) bool {
	v, err := lookupPath(claims, r.Path, r.path)
	if err != nil {
		v = nil
	}
	switch {
	case r.Exists != nil:
		return (v != nil) == *r.Exists
	case v == nil:
		return false
	case r.Equals != nil:
		return jsonEqual(v, *r.Equals)
	case r.OneOf != nil:
		for _, want := range r.OneOf {
			if jsonEqual(v, want) {
				return true
			}
		}
		return false
	case r.Prefix != nil:
		switch x := v.(type) {
		case string:
			return strings.HasPrefix(x, *r.Prefix)
		case []any:
			for _, item := range x {
				if s, ok := item.(string); ok && strings.HasPrefix(s, *r.Prefix) {
					return true
				}
			}
		}
		return false
	}
	return false
}

// jsonEqual reports whether a and b, values as encoding/json decodes
// them, are the same JSON value: of the same type and equal, objects
// member by member and arrays item by item.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case json.Number:
		f, err := x.Float64()
		y, ok := b.(float64)
		return err == nil && ok && f == y
	}
	return reflect.DeepEqual(a, b)
}
