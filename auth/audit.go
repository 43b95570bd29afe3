package auth

import (
	"slices"
	"strings"
	"sync"
	"time"

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

// auditCallersMax is the most distinct callers counted for one issuer and
// reason in one window: past it the count stays, so that no number of
// subjects grows the set further.
const auditCallersMax = 10000

// auditWindow is how long the distinct callers are counted before the
// count starts again.
const auditWindow = time.Hour

// auditCallers counts, per issuer label and reason, the distinct callers
// (by the hash of issuer and subject) of the requests that rules in audit
// mode would have refused, in the current window.
type auditCallers struct {
	mu     sync.Mutex
	window int64 // the start of the current window, Unix seconds
	seen   map[auditKey]map[[16]byte]struct{}
}

type auditKey struct {
	issuer string
	reason Reason
}

// add records caller under key at now, and has set report the distinct
// callers of key in the window, and 0 for each key whose window just
// ended; under the lock, so that a count never overwrites a later one.
func (a *auditCallers) add(key auditKey, caller [16]byte, now time.Time, set func(auditKey, int)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w := now.Truncate(auditWindow).Unix(); w != a.window || a.seen == nil {
		for k := range a.seen {
			set(k, 0)
		}
		a.window, a.seen = w, map[auditKey]map[[16]byte]struct{}{}
	}
	callers := a.seen[key]
	if callers == nil {
		callers = map[[16]byte]struct{}{}
		a.seen[key] = callers
	}
	if len(callers) < auditCallersMax {
		callers[caller] = struct{}{}
	}
	set(key, len(callers))
}

// forget drops the sets of the issuer label.
func (a *auditCallers) forget(issuer string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.seen {
		if k.issuer == issuer {
			delete(a.seen, k)
		}
	}
}
