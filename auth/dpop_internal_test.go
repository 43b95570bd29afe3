package auth

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth/dpop"
)

// TestProofRefusals holds the mapping of dpop's problems to refusals to
// the closed set of reasons: every problem a proof can have is a refusal
// of the DPoP scheme with a reason of its own, so that the challenge, the
// metric and the access line tell them apart.
func TestProofRefusals(t *testing.T) {
	seen := map[Reason]dpop.Problem{}
	for _, p := range dpop.Problems() {
		e := proofRefusal(p, time.Second)
		switch {
		case !slices.Contains(Reasons(), e.Reason):
			t.Errorf("problem %v is refused with %q, which is no Reason", p, e.Reason)
		case !e.DPoP:
			t.Errorf("problem %v is refused with %q under the Bearer scheme; want DPoP", p, e.Reason)
		case e.HTTPStatus() != http.StatusUnauthorized && e.HTTPStatus() != http.StatusTooManyRequests:
			t.Errorf("problem %v is refused with status %d", p, e.HTTPStatus())
		}
		if q, dup := seen[e.Reason]; dup {
			t.Errorf("problems %v and %v are both refused with %q", q, p, e.Reason)
		}
		seen[e.Reason] = p
	}
	if e := proofRefusal(dpop.NeedsNonce, 0); e.Code != "use_dpop_nonce" {
		t.Errorf("a proof without a good nonce is refused with code %q; want use_dpop_nonce", e.Code)
	}
	if e := proofRefusal(dpop.Full, 7*time.Second); e.RetryAfter != 7*time.Second {
		t.Errorf("a proof without room is refused with Retry-After %v; want the wait", e.RetryAfter)
	}
}
