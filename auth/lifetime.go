package auth

import (
	"time"

	"github.com/plantstore/plantstore/observability/setting"
)

// The rule of this file, max_lifetime, says whether a token was issued
// for no longer than the issuer allows, so that a token that leaks stops
// being good soon.

// checkMaxLifetime refuses a negative duration.
func (c *Config) checkMaxLifetime() *setting.Error {
	if c.MaxLifetime < 0 {
		return setting.Errorf("max_lifetime", "negative duration %s", c.MaxLifetime)
	}
	return nil
}

// lifetimeRule is the rule of MaxLifetime, when it is positive: exp at
// most that after iat, or, without iat, after now (with the leeway).
func (c Config) lifetimeRule() rule {
	limit := c.MaxLifetime
	if limit <= 0 {
		return rule{}
	}
	return rule{
		name: "max_lifetime",
		check: func(claims Claims, now time.Time, leeway time.Duration) *Error {
			// exp is there and in range: registered checked it. iat, when
			// present, is a NumericDate not in the future.
			exp, _, _ := claims.date("exp")
			iat, withIat, _ := claims.date("iat")
			if withIat && exp.Sub(iat) > limit || !withIat && exp.Sub(now) > limit+leeway {
				return invalidToken(ReasonLifetime)
			}
			return nil
		},
		pass: func(claims Claims) {
			exp, _, _ := claims.date("exp")
			iat, _, _ := claims.date("iat")
			if exp.Sub(iat) > limit {
				claims["exp"] = float64(iat.Add(limit).Unix())
			}
		},
	}
}
