package auth

import (
	"net/http"
	"time"

	"github.com/plantstore/plantstore/auth/dpop"
)

// DPoPMode is how an issuer's tokens are sender-constrained (RFC 9449).
// The zero value is DPoPOptional.
type DPoPMode = BindingMode

// The DPoP modes.
const (
	// DPoPOptional accepts bearer tokens, and DPoP-bound tokens (cnf.jkt)
	// with a valid proof.
	DPoPOptional = BindingOptional
	// DPoPOff accepts bearer tokens only; a bound token is refused.
	DPoPOff = BindingOff
	// DPoPRequired accepts DPoP-bound tokens with a valid proof only.
	DPoPRequired = BindingRequired
)

// DefaultDPoPWindow is how old a DPoP proof may be, by its iat.
const DefaultDPoPWindow = 60 * time.Second

// dpopError returns the 401 invalid_dpop_proof refusal for r.
func dpopError(r Reason) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: "invalid_dpop_proof", Reason: r, DPoP: true}
}

// dpopTokenError returns the 401 invalid_token refusal for r, under the
// DPoP scheme.
func dpopTokenError(r Reason) *Error {
	e := invalidToken(r)
	e.DPoP = true
	return e
}

// bind applies the binding of the token e to a request r that presented
// it under the scheme of c (RFC 8705 §3, RFC 9449 §7), then admits the
// request ([Admitter]). It is where the rule of [bindingOf] is enforced,
// every time, cached token or not: a token bound to a certificate needs
// that certificate ([Verifier.bindCert]), a token bound to a key the DPoP
// scheme and a valid proof ([Verifier.bindProof]), a token bound both
// ways both, the certificate first since it costs no signature; an
// unbound token the Bearer scheme, where the issuer's modes allow it. A
// bearer request is admitted only when the rate is limited, so that it
// costs nothing otherwise.
func (v *Verifier) bind(r *http.Request, c credential, e *cacheEntry) error {
	if e.bound.cert() || e.iss.cfg.MTLS == MTLSRequired {
		if err := v.bindCert(r, c, e); err != nil {
			return err
		}
	}
	mode := e.iss.cfg.DPoP
	bound := e.bound.dpop()
	switch {
	case bound && mode == DPoPOff:
		return invalidToken(ReasonDPoPBound)
	case bound && !c.dpop:
		// RFC 9449 §7.2: a bound token presented as a bearer token.
		return invalidToken(ReasonDPoPBound)
	case !bound && c.dpop:
		return dpopTokenError(ReasonDPoPUnbound)
	case !bound && mode == DPoPRequired:
		return dpopTokenError(ReasonDPoPRequired)
	case !bound && v.opts.RateLimit == nil:
		return nil
	case !bound:
		return v.admitter.Admit(r.Context(), Admission{Caller: e.caller, Now: v.now()})
	}
	return v.bindProof(r, c, e)
}

// bindProof checks the one DPoP proof of r for the bound token e, in the
// order that makes a caller pay for what it asks of the service: the
// checks that cost no signature ([dpop.Parse]), then the budget of
// failed signatures of the caller and the key ([dpop.Failures]: once
// either spent it, a proof is refused with [ReasonDPoPBlocked], 429, until
// its period ends, with no signature work), then admission by this
// replica, which takes one request from the caller's rate and refuses a
// proof already used or that the caller's or key's share of the replay
// cache has no room for, then the signature, and only when it verified is
// the proof recorded: in the shared state, when there is one (one round
// trip), then in this replica's cache. A caller over its rate so never
// gets a signature verified, a proof that does not verify never spends
// the jti of the one that will and costs no round trip, and nothing is
// written to the shared state that this replica would refuse.
func (v *Verifier) bindProof(r *http.Request, c credential, e *cacheEntry) error {
	proofs := r.Header.Values("DPoP")
	if len(proofs) != 1 {
		return dpopError(ReasonDPoPMissing)
	}
	now := v.now()
	p, prob := dpop.Parse(proofs[0], &dpop.Request{
		Method: r.Method, URI: v.resourceURI(r), ATH: e.ath, JKT: e.bound.jkt,
		Algorithms: v.opts.DPoPAlgorithms, Now: now, Window: v.opts.DPoPWindow, Leeway: v.opts.Leeway,
		Nonces: v.opts.Nonces,
	})
	if prob != 0 {
		return proofRefusal(prob, 0)
	}
	if blocked, wait := v.failures.Blocked(e.caller, e.client, now); blocked {
		return &Error{Status: http.StatusTooManyRequests, Reason: ReasonDPoPBlocked, DPoP: true, RetryAfter: wait}
	}
	a := Admission{
		Caller: e.caller, DPoP: true, Client: e.client, Proof: dpop.ProofKey(e.client, p.JTI()),
		Expires: p.IssuedAt().Add(v.opts.DPoPWindow + 2*v.opts.Leeway), Life: v.opts.DPoPWindow + 3*v.opts.Leeway, Now: now,
	}
	ctx := r.Context()
	if err := v.admitter.Admit(ctx, a); err != nil {
		return err
	}
	verified := p.Verify()
	settled := v.admitter.Settle(ctx, a, verified)
	if !verified {
		v.failures.Fail(e.caller, e.client, now)
		return proofRefusal(dpop.Invalid, 0)
	}
	return settled
}

// proofRefusal returns the refusal of a proof with the problem p (not 0):
// 401 invalid_dpop_proof with the problem's reason; 401 use_dpop_nonce
// for a proof without a good server nonce (RFC 9449 §9), with its own
// reason, apart from those that signal an attack; 429 for a proof the
// replay cache has no room for (a proof this replica could not remember
// could be replayed, so it is refused as a rate the client can wait out,
// wait the time until there may be room).
func proofRefusal(p dpop.Problem, wait time.Duration) *Error {
	switch p {
	case dpop.WrongKey:
		return dpopError(ReasonDPoPKey)
	case dpop.WrongTarget:
		return dpopError(ReasonDPoPTarget)
	case dpop.WrongToken:
		return dpopError(ReasonDPoPAth)
	case dpop.OutOfWindow:
		return dpopError(ReasonDPoPIat)
	case dpop.NeedsNonce:
		return &Error{Status: http.StatusUnauthorized, Code: "use_dpop_nonce", Reason: ReasonDPoPNonce, DPoP: true}
	case dpop.Replayed:
		return dpopError(ReasonDPoPReplay)
	case dpop.Full:
		return &Error{Status: http.StatusTooManyRequests, Reason: ReasonDPoPQuota, DPoP: true, RetryAfter: wait}
	}
	return dpopError(ReasonDPoPInvalid)
}

// resourceURI returns the htu a proof for r must carry: the resource's
// origin and path prefix ([Verifier.origin]) with r's path, normalized.
func (v *Verifier) resourceURI(r *http.Request) string {
	origin, prefix := v.origin(r)
	return dpop.TargetURI(origin, prefix+r.URL.EscapedPath())
}
