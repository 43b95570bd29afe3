package revoke

import (
	"time"

	"github.com/plantstore/plantstore/auth"
)

// A Set is the revocations in force, ready for a lookup: per issuer, a
// map per kind keyed by what is revoked, so that a lookup hashes the
// issuer once and each of the token's values once. It is immutable.
type Set struct {
	issuers map[string]*issuerSet
	counts  [4]int // by kind, in the order of Kinds
}

// issuerSet is the revocations of one issuer.
type issuerSet struct {
	subs, clients map[string]cutoff
	all           *cutoff          // nil: no cutoff for the whole issuer
	tokens        map[string]int64 // jti: until, Unix nanoseconds, leeway added
}

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
	s := &Set{issuers: map[string]*issuerSet{}}
	of := func(issuer string) *issuerSet {
		is := s.issuers[issuer]
		if is == nil {
			is = &issuerSet{subs: map[string]cutoff{}, clients: map[string]cutoff{}, tokens: map[string]int64{}}
			s.issuers[issuer] = is
		}
		return is
	}
	t := now.UnixNano()
	for _, e := range entries {
		if e.Kind() == KindToken {
			until := e.Until.Add(leeway).UnixNano()
			if until <= t {
				continue
			}
			if is := of(e.Issuer); until > is.tokens[e.JTI] {
				is.tokens[e.JTI] = until
			}
			continue
		}
		c := cutoff{sec: e.Before.Unix(), expires: e.Before.Add(retention(e.Issuer) + leeway).UnixNano()}
		if c.expires <= t {
			continue
		}
		is := of(e.Issuer)
		switch e.Kind() {
		case KindSubject:
			is.subs[e.Sub] = later(is.subs[e.Sub], c)
		case KindClient:
			is.clients[e.Client] = later(is.clients[e.Client], c)
		case KindIssuer:
			var have cutoff
			if is.all != nil {
				have = *is.all
			}
			l := later(have, c)
			is.all = &l
		}
	}
	for _, is := range s.issuers {
		s.counts[0] += len(is.subs)
		s.counts[1] += len(is.clients)
		if is.all != nil {
			s.counts[2]++
		}
		s.counts[3] += len(is.tokens)
	}
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
	is := s.issuers[t.Issuer]
	if is == nil {
		return false
	}
	n := now.UnixNano()
	if t.ID != "" && len(is.tokens) > 0 {
		if until, ok := is.tokens[t.ID]; ok && n < until {
			return true
		}
	}
	iat := t.IssuedAt
	if is.all != nil && is.all.refuses(iat, n) {
		return true
	}
	if c, ok := is.subs[t.Subject]; ok && c.refuses(iat, n) {
		return true
	}
	if t.Client != "" && len(is.clients) > 0 {
		if c, ok := is.clients[t.Client]; ok && c.refuses(iat, n) {
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
