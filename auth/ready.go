package auth

// KeyStatus is one issuer's part of readiness: whether its Authenticators
// can accept tokens (for keys: whether it has keys to verify with).
type KeyStatus struct {
	// Issuer is the issuer's name, empty for the unnamed issuer of the
	// -jwt-* flags.
	Issuer string
	// Err is nil when the issuer has usable keys, and otherwise says why
	// not (no first fetch yet, keys past MaxStale). It names no secret.
	Err error
}

// KeysReady returns the readiness of each issuer's keys, one KeyStatus per
// issuer configured now, in the order of the configuration. [Verifier.Ready]
// is its errors joined.
func (v *Verifier) KeysReady() []KeyStatus {
	now := v.now()
	all := v.issuers.Load().all
	out := make([]KeyStatus, 0, len(all))
	for _, is := range all {
		var err error
		for _, a := range [...]Authenticator{is.jws, is.opaque} {
			if a != nil && err == nil {
				err = a.Ready(now)
			}
		}
		out = append(out, KeyStatus{Issuer: is.name, Err: err})
	}
	return out
}
