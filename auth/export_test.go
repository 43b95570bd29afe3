package auth

// SetReplayLimits gives v a DPoP replay cache of size entries, at most
// quota of them for one proof key, so that tests can fill it.
func SetReplayLimits(v *Verifier, size, quota int) { v.replays = newReplayCache(size, quota) }
