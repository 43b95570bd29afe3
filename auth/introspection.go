package auth

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/plantstore/plantstore/observability/setting"
)

// The rule of this file, introspection, says whether an issuer is asked
// about its tokens (RFC 7662) rather than, or as well as, trusting them by
// their signature. The asking is a way of trust of its own, beside the
// signature's (package introspect); here are only its settings, which an
// issuer declares like any other.

// DefaultIntrospectionCache is how long a positive answer of the issuer
// is kept when an issuer's Introspection names no Cache.
const DefaultIntrospectionCache = 60 * time.Second

// IntrospectionTokens says which of an issuer's tokens are introspected.
type IntrospectionTokens int

// The values of IntrospectionTokens.
const (
	// IntrospectNone asks the issuer about no token: the default.
	IntrospectNone IntrospectionTokens = iota
	// IntrospectOpaque asks about the tokens that are not a JWS (reference
	// tokens); at most one issuer may take them.
	IntrospectOpaque
	// IntrospectAlways asks about the issuer's JWTs too, so that a token
	// the issuer revoked stops being accepted once its answer expires.
	IntrospectAlways
)

// ParseIntrospectionTokens returns the value named s: off, opaque or
// always.
func ParseIntrospectionTokens(s string) (IntrospectionTokens, error) {
	switch s {
	case "off":
		return IntrospectNone, nil
	case "opaque":
		return IntrospectOpaque, nil
	case "always":
		return IntrospectAlways, nil
	}
	return IntrospectNone, fmt.Errorf("unknown introspection mode %q: want off, opaque or always", s)
}

// UnmarshalText sets m to the value named text, as
// [ParseIntrospectionTokens] reads it.
func (m *IntrospectionTokens) UnmarshalText(text []byte) error {
	v, err := ParseIntrospectionTokens(string(text))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// MarshalText returns the name of m.
func (m IntrospectionTokens) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// String returns the name of m: off, opaque or always.
func (m IntrospectionTokens) String() string {
	switch m {
	case IntrospectOpaque:
		return "opaque"
	case IntrospectAlways:
		return "always"
	}
	return "off"
}

// Introspection is how an issuer is asked whether a token is active (RFC
// 7662), and which of its tokens are: the issuers file's introspection
// block. A refusal of one of its settings cites "introspection_" and the
// setting's key (the key of its row in the table of settings); of Tokens,
// "introspection".
type Introspection struct {
	// Tokens is which tokens are introspected; off, the zero value, turns
	// the rest off.
	Tokens IntrospectionTokens `yaml:"tokens"`
	// Endpoint is the introspection endpoint, an http or https URL; empty
	// takes the introspection_endpoint of the issuer's discovery document.
	Endpoint string `yaml:"endpoint"`
	// ClientID is the client the service authenticates to the endpoint as.
	ClientID string `yaml:"client_id"`
	// ClientSecretFile holds the client's secret (client_secret_basic);
	// PrivateKeyFile its private key (private_key_jwt, RFC 7523): exactly
	// one is set. Each is read at start and whenever it changes.
	ClientSecretFile string `yaml:"client_secret_file"`
	PrivateKeyFile   string `yaml:"private_key_file"`
	// Cache is the longest a positive answer is kept, never past the
	// token's exp; 0 means [DefaultIntrospectionCache].
	Cache time.Duration `yaml:"cache"`
	// JWTResponse asks for signed answers (RFC 9701,
	// application/token-introspection+jwt), verified with the issuer's
	// keys.
	JWTResponse bool `yaml:"jwt_response"`
}

// checkIntrospection refuses an introspection that cannot work: no
// client, neither or both of a secret and a key, an endpoint that is not
// an http or https URL, a negative cache; and fills in the cache's
// default. With Tokens off the rest is not looked at.
func (c *Config) checkIntrospection() *setting.Error {
	in := &c.Introspection
	if in.Tokens == IntrospectNone {
		return nil
	}
	if in.Cache < 0 {
		return setting.Errorf("introspection_cache", "negative duration %s", in.Cache)
	}
	if in.Cache == 0 {
		in.Cache = DefaultIntrospectionCache
	}
	if strings.TrimSpace(in.ClientID) == "" {
		return setting.Errorf("introspection_client_id", "introspection needs the client the service authenticates as")
	}
	switch {
	case in.ClientSecretFile == "" && in.PrivateKeyFile == "":
		return setting.Errorf("introspection_client_secret_file", "introspection needs the client's secret file, or its private key file")
	case in.ClientSecretFile != "" && in.PrivateKeyFile != "":
		return setting.Errorf("introspection_private_key_file", "set the client's secret file or its private key file, not both")
	}
	if in.Endpoint == "" {
		if c.Issuer == "" {
			return setting.Errorf("introspection_endpoint", "no endpoint, and no issuer whose discovery document would name one")
		}
		return nil
	}
	if err := checkEndpoint(in.Endpoint); err != nil {
		return &setting.Error{Key: "introspection_endpoint", Err: err}
	}
	return nil
}

// checkEndpoint refuses what is not an absolute http or https URL without
// user information or fragment.
func checkEndpoint(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an http or https URL")
	}
	if u.User != nil || u.Fragment != "" {
		return errors.New("want a URL without user information or fragment: the client authenticates with its secret or key file")
	}
	return nil
}
