package auth

import (
	"slices"
	"strings"

	"github.com/plantstore/plantstore/observability/setting"
)

// Audit mode: a rule an issuer names in [Config].Audit is counted rather
// than enforced. A token it would refuse is accepted; the refusal it
// would have had is counted in plantstore_auth_audit_total{issuer,reason}
// and named on the access line (audit=<reason>), every time the token
// is used, cached or not, so that an operator sees who would be cut off
// before cutting them off. Nothing else about the response changes.

// auditable are the rules that may be audited, by their setting's key,
// and the reason each refuses with.
var auditable = []struct {
	name   string
	reason Reason
}{
	{"token_types", ReasonTokenType},
	{"clients", ReasonClient},
	{"max_lifetime", ReasonLifetime},
	{"claims", ReasonClaim},
}

// AuditableRules returns the names of the rules an issuer may audit.
func AuditableRules() []string {
	out := make([]string, len(auditable))
	for i, a := range auditable {
		out[i] = a.name
	}
	return out
}

// auditReasons are the reasons an audited rule may count.
func auditReasons() []Reason {
	out := make([]Reason, len(auditable))
	for i, a := range auditable {
		out[i] = a.reason
	}
	return out
}

// checkAudit refuses a name that is no auditable rule's, and drops
// repeats.
func (c *Config) checkAudit() *setting.Error {
	if c.Audit == nil {
		return nil
	}
	names := AuditableRules()
	out := []string{}
	for _, raw := range c.Audit {
		name := strings.TrimSpace(raw)
		if !slices.Contains(names, name) {
			return setting.Errorf("audit", "%q is no rule that can be audited: want some of %s", raw, strings.Join(names, ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	c.Audit = out
	return nil
}

// Audits reports whether the rule named name is audited rather than
// enforced.
func (c Config) Audits(name string) bool {
	return slices.Contains(c.Audit, name)
}

// audited is what a token's audited rules would have refused it with:
// the reasons, in the order the rules ran, and the path of the claim rule
// that would have refused it.
type audited struct {
	reasons []Reason
	claim   string
}

// add records the would-be refusal e.
func (a *audited) add(e *Error) {
	if !slices.Contains(a.reasons, e.Reason) {
		a.reasons = append(a.reasons, e.Reason)
	}
	if a.claim == "" {
		a.claim = e.Claim
	}
}

// String returns the reasons as the access line shows them: joined by
// commas.
func (a audited) String() string {
	var b strings.Builder
	for i, r := range a.reasons {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(string(r))
	}
	return b.String()
}
