package auth

import "slices"

// SetReplayLimits gives v a DPoP replay cache of size entries, at most
// quota of them for one proof key, so that tests can fill it.
func SetReplayLimits(v *Verifier, size, quota int) { v.replays = newReplayCache(size, quota) }

// Issuers returns the issuers v verifies against, with their Configs'
// defaults filled in.
func (v *Verifier) Issuers() []Issuer {
	t := v.issuers.Load()
	out := make([]Issuer, 0, len(t.all))
	for _, is := range t.all {
		c := is.cfg
		c.Algorithms = slices.Clone(c.Algorithms)
		c.Audiences = slices.Clone(c.Audiences)
		out = append(out, Issuer{Name: is.name, Config: c, Keys: is.keys})
	}
	return out
}
