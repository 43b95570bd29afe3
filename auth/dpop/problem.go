package dpop

// A Problem is why a DPoP proof is refused: the closed set the caller
// maps to its own refusals (the auth package to its reasons and RFC 9449
// error codes). The zero value is no problem.
type Problem uint8

// The problems of a proof, in the order of the checks that find them.
const (
	// Invalid is a proof that is not a valid DPoP proof JWT: its form,
	// header, key, jti, iat type or signature.
	Invalid Problem = iota + 1
	// WrongKey is a proof whose key is not the one the token is bound to.
	WrongKey
	// WrongTarget is a proof whose htm or htu is not the request's.
	WrongTarget
	// WrongToken is a proof whose ath is not the hash of the token it
	// comes with.
	WrongToken
	// OutOfWindow is a proof whose iat is outside the window.
	OutOfWindow
	// NeedsNonce is a proof without a server nonce, or with a stale or
	// forged one: the client is to retry with the nonce it is given.
	NeedsNonce
	// Replayed is a proof used before within its window.
	Replayed
	// Full is a proof the replay cache has no room to remember, for now.
	Full
)

// Problems returns every Problem, in a fixed order.
func Problems() []Problem {
	return []Problem{Invalid, WrongKey, WrongTarget, WrongToken, OutOfWindow, NeedsNonce, Replayed, Full}
}

// String returns the problem's name, for messages.
func (p Problem) String() string {
	switch p {
	case 0:
		return "none"
	case Invalid:
		return "invalid"
	case WrongKey:
		return "wrong key"
	case WrongTarget:
		return "wrong target"
	case WrongToken:
		return "wrong token"
	case OutOfWindow:
		return "out of window"
	case NeedsNonce:
		return "needs nonce"
	case Replayed:
		return "replayed"
	case Full:
		return "full"
	}
	return "unknown"
}
