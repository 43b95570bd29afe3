package introspect

import "crypto/sha256"

// Waiters returns how many requests wait for the call in flight about
// token, -1 when none is.
func (t *Trust) Waiters(token string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.flights[sha256.Sum256([]byte(token))]
	if !ok {
		return -1
	}
	return int(f.waiters.Load())
}
