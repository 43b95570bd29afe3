package revoke

import (
	"time"

	"github.com/plantstore/plantstore/auth"
)

// A Set is the revocations in force, ready for a lookup: a map per kind,
// keyed by issuer and what is revoked. It is immutable.
type Set struct {
	subs, clients map[key]cutoff
	issuers       map[string]cutoff
	tokens        map[key]int64 // jti: until, Unix nanoseconds, leeway added
	counts        [4]int        // by kind, in the order of Kinds
}

// key is what a revocation of an issuer names.
type key struct{ issuer, value string }

// cutoff is a before cutoff: a token whose iat falls in the second of sec
// or earlier is refused, until expires (Unix nanoseconds).
type cutoff struct {
	sec     int64
	expires int64
}

// Retention says how long an entry of an issuer must stay: no token issued
// before its cutoff can still be valid after cutoff + retention.
type Retention func(issuer string) time.Duration

// NewSet returns the set of entries at now: those that expired (a cutoff
// older than the retention of its issuer, a jti past its until and the
// leeway) are left out, and of several entries for the same subject,
// client or issuer the latest cutoff holds. Entries must pass
// [Entry.Check].
func NewSet(entries []Entry, retention Retention, leeway time.Duration, now time.Time) *Set {
	s := &Set{subs: map[key]cutoff{}, clients: map[key]cutoff{}, issuers: map[string]cutoff{}, tokens: map[key]int64{}}
	t := now.UnixNano()
	for _, e := range entries {
		if e.Kind() == KindToken {
			until := e.Until.Add(leeway).UnixNano()
			k := key{e.Issuer, e.JTI}
			if until > t && until > s.tokens[k] {
				s.tokens[k] = until
			}
			continue
		}
		c := cutoff{sec: e.Before.Unix(), expires: e.Before.Add(retention(e.Issuer) + leeway).UnixNano()}
		if c.expires <= t {
			continue
		}
		switch e.Kind() {
		case KindSubject:
			s.subs[key{e.Issuer, e.Sub}] = later(s.subs[key{e.Issuer, e.Sub}], c)
		case KindClient:
			s.clients[key{e.Issuer, e.Client}] = later(s.clients[key{e.Issuer, e.Client}], c)
		case KindIssuer:
			s.issuers[e.Issuer] = later(s.issuers[e.Issuer], c)
		}
	}
	s.counts = [4]int{len(s.subs), len(s.clients), len(s.issuers), len(s.tokens)}
	return s
}

// later returns the cutoff of a and b that refuses more, expiring at the
// later of their times.
func later(a, b cutoff) cutoff {
	return cutoff{sec: max(a.sec, b.sec), expires: max(a.expires, b.expires)}
}

// Len returns the number of revocations in s of each kind, in the order of
// [Kinds].
func (s *Set) Len() [4]int { return s.counts }

// Revoked reports whether s revokes t at now: t's jti is revoked, or a
// cutoff for its subject, its client or its issuer falls in the second of
// its iat or later (a token without iat is refused by any cutoff).
func (s *Set) Revoked(t auth.Revocable, now time.Time) bool {
	n := now.UnixNano()
	if t.ID != "" {
		if until, ok := s.tokens[key{t.Issuer, t.ID}]; ok && n < until {
			return true
		}
	}
	iat := t.IssuedAt
	if c, ok := s.issuers[t.Issuer]; ok && c.refuses(iat, n) {
		return true
	}
	if c, ok := s.subs[key{t.Issuer, t.Subject}]; ok && c.refuses(iat, n) {
		return true
	}
	if t.Client != "" {
		if c, ok := s.clients[key{t.Issuer, t.Client}]; ok && c.refuses(iat, n) {
			return true
		}
	}
	return false
}

// refuses reports whether c, at now (Unix nanoseconds), refuses a token
// issued at iat (Unix nanoseconds, auth.NoIssuedAt for none). The cutoff
// is rounded to its second, so that a token issued in that second, whose
// iat a provider truncates to it, is refused.
func (c cutoff) refuses(iat, now int64) bool {
	if now >= c.expires {
		return false
	}
	return iat == auth.NoIssuedAt || floorDiv(iat, int64(time.Second)) <= c.sec
}

// floorDiv returns a/b rounded down.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
