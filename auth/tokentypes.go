package auth

import (
	"slices"
	"strings"

	"github.com/plantstore/plantstore/observability/setting"
)

// The rule of this file, token_types, says whether a token is of a type
// that is an access token (RFC 8725 §3.11, RFC 9068 §2.1). A JOSE typ is
// read by the JWS authenticator, which asks [Config.AcceptsType].

// Token types an issuer may require ([Config.TokenTypes]), as typ values
// are compared: lower case, without "application/".
const (
	typeAny = "any"    // every access-token type, and no typ at all
	typeAT  = "at+jwt" // RFC 9068 §2.1
	typeJWT = "jwt"    // RFC 7519 §5.1
)

// normalType returns typ, a JOSE typ value, as it is compared: in lower
// case, without the "application/" prefix RFC 7515 §4.1.9 lets a writer
// add.
func normalType(typ string) string {
	t := strings.ToLower(typ)
	if rest, ok := strings.CutPrefix(t, "application/"); ok {
		return rest
	}
	return t
}

// otherJWT reports whether t, a normalType, names a kind of JWT that is not
// an access token: a DPoP proof (dpop+jwt), a security event (secevent+jwt),
// a logout token (logout+jwt), a client assertion, an ID token of a
// profile that types them; any "+jwt" type but at+jwt.
func otherJWT(t string) bool {
	return strings.HasSuffix(t, "+jwt") && t != typeAT
}

// mintType returns the typ a token made for an issuer of c carries to be
// accepted: "at+jwt", or "JWT" when c's TokenTypes take only that.
func (c Config) mintType() string {
	for _, t := range c.TokenTypes {
		if n := normalType(strings.TrimSpace(t)); n == typeAT || n == typeAny {
			return "at+jwt"
		}
	}
	if len(c.TokenTypes) > 0 {
		return "JWT"
	}
	return "at+jwt"
}

// checkTokenTypes puts TokenTypes in normalType form, nil for any,
// without repeats, and refuses a type that is no access token's, or any
// beside others.
func (c *Config) checkTokenTypes() *setting.Error {
	var types []string
	anyType := false
	for _, raw := range c.TokenTypes {
		switch t := normalType(strings.TrimSpace(raw)); {
		case t == typeAny:
			anyType = true
		case t == typeAT || t == typeJWT:
			if !slices.Contains(types, t) {
				types = append(types, t)
			}
		case otherJWT(t):
			return setting.Errorf("token_types", "%q names another kind of JWT than an access token, which is always refused", raw)
		default:
			return setting.Errorf("token_types", "unknown token type %q: want any, or at+jwt and jwt", raw)
		}
	}
	if anyType && len(types) > 0 {
		return setting.Errorf("token_types", "any already takes %s: list any alone, or the types", strings.Join(types, " and "))
	}
	c.TokenTypes = types
	return nil
}

// AcceptsType reports whether an issuer of the checked Config c takes a
// token whose JOSE header has the typ typ, present telling whether it has
// one (RFC 8725 §3.11): a typ that names another kind of JWT is refused
// in every mode, and so is any typ that is not an access-token type ("JWT"
// or "at+jwt"); with TokenTypes set, the typ must be one of them.
func (c Config) AcceptsType(typ string, present bool) bool {
	if !present {
		return len(c.TokenTypes) == 0 || c.Audits("token_types")
	}
	t := normalType(typ)
	if t != typeAT && t != typeJWT {
		// A JWE, a DPoP proof, a security event or logout token, a
		// "JOSE" object: not an access token, whoever signed it.
		return false
	}
	return len(c.TokenTypes) == 0 || c.Audits("token_types") || slices.Contains(c.TokenTypes, t)
}

// ListsType reports whether a token with the typ typ (present telling
// whether it has one), which [Config.AcceptsType] accepts, is of one of
// c's TokenTypes: false only when token_types is audited and would have
// refused it.
func (c Config) ListsType(typ string, present bool) bool {
	if len(c.TokenTypes) == 0 {
		return true
	}
	return present && slices.Contains(c.TokenTypes, normalType(typ))
}
