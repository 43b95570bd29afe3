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
// caller's proof by sending a forged one with its jti:
//
//   - Admit, after every check of the token and every check of a proof
//     that costs no signature, and before the proof's signature: it takes
//     one request from the caller's rate (refusing with a
//     *[RateLimitError]) and refuses a proof whose jti was used
//     ([ReasonDPoPReplay]) or that there is no room to remember
//     ([ReasonDPoPQuota]);
//   - Settle, for a request with a proof that Admit let through, once its
//     signature is checked: a proof that verified is remembered as used
//     until it expires, unless another request used it in the meantime
//     ([ReasonDPoPReplay]) or the room went ([ReasonDPoPQuota]); one that
//     did not verify leaves nothing behind.
//
// A bearer request goes through Admit only, and only when the rate is
// limited. The [Verifier]'s own Admitter keeps this replica's state; with
// Options.Shared, the state the replicas share ([SharedState]) answers
// Admit in one round trip (the rate, then the proof recorded), and Settle
// needs it only to forget a proof that did not verify. Implementations
// are safe for concurrent use.
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
	// Now is the time of the request, by the Verifier's clock.
	Now time.Time
	// ID tells this request's admission of a proof from any other's of
	// the same proof, so that undoing what it recorded ([SharedState]
	// Forget) never undoes another's.
	ID uint64
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
// used anywhere. A [Verifier] given one asks it first and keeps its own
// limiter and replay cache as well, so that whenever the shared state
// fails the replica still gives the guarantee of one replica.
// Implementations are safe for concurrent use.
type SharedState interface {
	// Admit takes one request from the caller's shared rate, when the
	// state limits rates, and, for a proof (a.DPoP), records it as used
	// unless it was already, all in one round trip; a caller over its rate
	// records nothing. An error means the state could not answer: the
	// Verifier then admits with this replica's state alone.
	Admit(ctx context.Context, a Admission) (SharedVerdict, error)
	// Forget undoes what Admit recorded for the proof of a, when a's
	// signature did not verify, so that a forged proof never spends the
	// jti of the one that will; a proof another request recorded stays.
	Forget(ctx context.Context, a Admission) error
}

// SharedVerdict is a [SharedState]'s answer to Admit.
type SharedVerdict struct {
	// Limited is set when the caller is over its rate, with RetryAfter
	// the time until it may send again.
	Limited    bool
	RetryAfter time.Duration
	// Replay is set when the proof was used before.
	Replay bool
}

// sharedAdmitter is the [Admitter] of a replica with a [SharedState]: the
// shared state decides the rate and the replay of proofs across replicas,
// and this replica's state answers alone whenever the shared one fails.
// This replica's replay cache checks and records every proof in every
// case, so that a proof used here is refused here even right after the
// shared state stopped answering, or lost what it held.
type sharedAdmitter struct {
	local  *localAdmitter
	shared SharedState
}

var _ Admitter = (*sharedAdmitter)(nil)

// Admit asks the shared state, then this replica's replay cache; when the
// shared state fails, this replica's limiter and cache decide.
func (s *sharedAdmitter) Admit(ctx context.Context, a Admission) error {
	v, err := s.shared.Admit(ctx, a)
	if err != nil {
		return s.local.Admit(ctx, a)
	}
	switch {
	case v.Limited:
		return &RateLimitError{RetryAfter: v.RetryAfter}
	case !a.DPoP:
		return nil
	case v.Replay:
		return proofRefusal(dpop.Replayed, 0)
	}
	return refusal(s.local.replays.Check(a.use()))
}

// Settle records a verified proof in this replica's cache, and has the
// shared state forget a proof that did not verify.
func (s *sharedAdmitter) Settle(ctx context.Context, a Admission, verified bool) error {
	if !a.DPoP {
		return nil
	}
	if !verified {
		// Whether or not the shared state recorded it, Forget removes only
		// this request's record; an error leaves the record to expire.
		_ = s.shared.Forget(ctx, a)
		return nil
	}
	return s.local.Settle(ctx, a, true)
}
