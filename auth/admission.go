package auth

import (
	"context"
	"crypto/sha256"
	"hash/maphash"
	"time"

	"github.com/plantstore/plantstore/auth/dpop"
)

// An Admitter keeps the state that admits a request once its credential
// is known to be good: the rate of each caller, and the DPoP proofs
// already used. A [Verifier] asks it in two steps, so that no caller can
// make the service verify signatures past its rate, nor spend another
// caller's proof by sending a forged one with its jti, nor write to the
// shared state past what this replica allows it:
//
//   - Admit, after every check of the token and every check of a proof
//     that costs no signature, and before the proof's signature: it takes
//     one request from the caller's rate on this replica (refusing with a
//     *[RateLimitError]) and refuses a proof whose jti this replica saw
//     ([ReasonDPoPReplay]) or that there is no room to remember: the
//     caller's or the client key's share of this replica's replay cache
//     is full ([ReasonDPoPQuota]). It writes nothing to a [SharedState].
//     A bearer request is admitted there and then: with a SharedState,
//     its shared rate is taken once this replica's allowed it.
//   - Settle, for a request with a proof that Admit let through, once its
//     signature is checked: a proof that verified is recorded as used,
//     in the shared state first (one round trip: the shared rate, the
//     replay across replicas and the caller's share of the shared store),
//     then in this replica's cache, unless another request used it in the
//     meantime ([ReasonDPoPReplay]) or the room went ([ReasonDPoPQuota]);
//     one that did not verify leaves nothing behind, anywhere, and costs
//     no round trip.
//
// A bearer request goes through Admit only, and only when the rate is
// limited. Implementations are safe for concurrent use.
type Admitter interface {
	Admit(ctx context.Context, a Admission) error
	Settle(ctx context.Context, a Admission, verified bool) error
}

// An Admission is one request as an [Admitter] sees it: fixed-size hashes
// that name no caller, key or proof readably, and the times that matter.
type Admission struct {
	// Caller is the hash of the caller's issuer and subject (see
	// [CallerKey]).
	Caller [16]byte
	// DPoP tells whether the request carries a proof; Client, Proof and
	// Expires are its.
	DPoP bool
	// Client is the hash of the proof's key (its thumbprint, the token's
	// cnf.jkt, see [dpop.ClientKey]), Proof that of the key and the
	// proof's jti ([dpop.ProofKey]): the same jti from another key is
	// another proof.
	Client, Proof [16]byte
	// Expires is when the proof stops being accepted (its iat, the window
	// and twice the leeway), after which it needs no remembering.
	Expires time.Time
	// Life is the longest any proof the Verifier accepts can need
	// remembering (its window and three times the leeway, since iat may
	// be a leeway ahead): Expires is never further than Life after Now.
	Life time.Duration
	// Now is the time of the request, by the Verifier's clock.
	Now time.Time
}

// CallerKey returns the hash of a caller that an [Admission] carries and
// rates are kept by: of the issuer's name ("" for the unnamed issuer) and
// the subject, the same on every replica. An issuer name holds no NUL, so
// two callers never share a key by where the one ends and the other
// begins.
func CallerKey(issuer, subject string) [16]byte {
	return hash16("plantstore caller\x00" + issuer + "\x00" + subject)
}

func hash16(s string) [16]byte {
	sum := sha256.Sum256([]byte(s))
	return [16]byte(sum[:16])
}

// localAdmitter is the [Admitter] of one replica: an optional [RateLimit]
// and a replay cache.
type localAdmitter struct {
	limit   *RateLimit // nil: no limit
	replays *dpop.ReplayCache
	// seed keys the rate limiter's buckets with a hash an outsider cannot
	// predict.
	seed maphash.Seed
}

var _ Admitter = (*localAdmitter)(nil)

func newLocalAdmitter(limit *RateLimit, replays *dpop.ReplayCache) *localAdmitter {
	return &localAdmitter{limit: limit, replays: replays, seed: maphash.MakeSeed()}
}

// Admit takes a request from the caller's bucket, then looks the proof up
// without recording it.
func (l *localAdmitter) Admit(_ context.Context, a Admission) error {
	if l.limit != nil {
		if err := l.limit.Allow(maphash.Comparable(l.seed, a.Caller)); err != nil {
			return err
		}
	}
	if a.DPoP {
		return refusal(l.replays.Check(a.use()))
	}
	return nil
}

// Settle records a verified proof.
func (l *localAdmitter) Settle(_ context.Context, a Admission, verified bool) error {
	if !verified || !a.DPoP {
		return nil
	}
	return refusal(l.replays.Add(a.use()))
}

// use is the proof of a as a replay cache sees it.
func (a Admission) use() dpop.Use {
	return dpop.Use{Proof: a.Proof, Caller: a.Caller, Client: a.Client, Expires: a.Expires, Now: a.Now}
}

// refusal returns the refusal of a replay cache's answer, as an error:
// nil for a fresh proof.
func refusal(p dpop.Problem, wait time.Duration) error {
	if p == 0 {
		return nil
	}
	return proofRefusal(p, wait)
}

// SharedState is state that the replicas of a deployment share (see the
// auth/redisstate package): the rate of each caller and the DPoP proofs
// used anywhere. A [Verifier] given one asks it once this replica's own
// limiter and replay cache allowed the request, and keeps them as well, so
// that whenever the shared state fails the replica still gives the
// guarantee of one replica. Implementations are safe for concurrent use.
type SharedState interface {
	// Admit takes one request from the caller's shared rate, when the
	// state limits rates, and, for a proof (a.DPoP) whose signature
	// verified, records it as used unless it was already or the caller
	// holds its whole share of the shared store, all in one round trip at
	// most; a caller over its rate records nothing. An error means the
	// state could not answer: the Verifier then admits with this
	// replica's state alone.
	Admit(ctx context.Context, a Admission) (SharedVerdict, error)
}

// SharedVerdict is a [SharedState]'s answer to Admit.
type SharedVerdict struct {
	// Limited is set when the caller is over its rate, with RetryAfter
	// the time until it may send again.
	Limited    bool
	RetryAfter time.Duration
	// Replay is set when the proof was used before.
	Replay bool
	// Full is set when the caller holds its whole share of the shared
	// store, with RetryAfter the time until some of it expires.
	Full bool
}

// sharedAdmitter is the [Admitter] of a replica with a [SharedState]:
// this replica's limiter and replay cache first, then the shared state,
// which decides the rate and the replay of proofs across replicas; this
// replica's state answers alone whenever the shared one fails. This
// replica's replay cache checks and records every proof in every case, so
// that a proof used here is refused here even right after the shared
// state stopped answering, or lost what it held.
type sharedAdmitter struct {
	local  *localAdmitter
	shared SharedState
}

var _ Admitter = (*sharedAdmitter)(nil)

// Admit asks this replica's limiter and replay cache, then, for a bearer
// request, the shared rate.
func (s *sharedAdmitter) Admit(ctx context.Context, a Admission) error {
	if err := s.local.Admit(ctx, a); err != nil || a.DPoP {
		return err
	}
	v, err := s.shared.Admit(ctx, a)
	if err == nil && v.Limited {
		return &RateLimitError{RetryAfter: v.RetryAfter}
	}
	return nil
}

// Settle records a verified proof in the shared state, then in this
// replica's cache; a proof that did not verify goes nowhere.
func (s *sharedAdmitter) Settle(ctx context.Context, a Admission, verified bool) error {
	if !a.DPoP || !verified {
		return nil
	}
	v, err := s.shared.Admit(ctx, a)
	if err == nil {
		switch {
		case v.Limited:
			return &RateLimitError{RetryAfter: v.RetryAfter}
		case v.Replay:
			return proofRefusal(dpop.Replayed, 0)
		case v.Full:
			return proofRefusal(dpop.Full, v.RetryAfter)
		}
	}
	return s.local.Settle(ctx, a, true)
}
