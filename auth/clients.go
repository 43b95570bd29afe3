package auth

import (
	"slices"
	"time"

	"github.com/plantstore/plantstore/observability/setting"
)

// The rule of this file, clients, says whether a token was issued to one
// of the issuer's clients (RFC 9068 §2.2): a token the identity provider
// issued to another application of the same tenant is refused even when
// its audience matches.

// checkClients refuses a blank client.
func (c *Config) checkClients() *setting.Error {
	if hasBlank(c.Clients) {
		return setting.Errorf("clients", "blank client: a list of blanks would accept no one")
	}
	c.Clients = slices.Clone(c.Clients)
	return nil
}

// clientsRule is the rule of Clients, when it names some: the token's
// client_id, or without it its azp, is one of them.
func (c Config) clientsRule() rule {
	if len(c.Clients) == 0 {
		return rule{}
	}
	return rule{
		name: "clients",
		check: func(claims Claims, _ time.Time, _ time.Duration) *Error {
			// RFC 9068 §2.2 names the client client_id; OpenID Connect ID
			// tokens and many access tokens say azp. client_id, when
			// there, decides, whatever azp says.
			raw, ok := claims["client_id"]
			if !ok {
				raw, ok = claims["azp"]
			}
			if !ok {
				return invalidToken(ReasonClient)
			}
			id, isString := raw.(string)
			if !isString {
				return invalidToken(ReasonClaims)
			}
			if !slices.Contains(c.Clients, id) {
				return invalidToken(ReasonClient)
			}
			return nil
		},
		pass: func(claims Claims) { claims["client_id"] = c.Clients[0] },
	}
}
