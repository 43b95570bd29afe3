package auth

import (
	"bytes"
	"errors"
	"fmt"
	"os"
)

// MinHMACSecret is the shortest HMAC secret accepted, in bytes. RFC 7518
// §3.2 requires a key of at least the hash output size: 256 bits for
// HS256, the weakest algorithm the secret enables.
const MinHMACSecret = 32

// LoadHMACSecret reads an HMAC secret from the file at path and returns a
// key set holding it. The file holds the raw secret; exactly one trailing
// "\n" is dropped (a "\r" before it stays, as do further newlines). An empty
// secret or one under [MinHMACSecret] bytes is an error. The key has no kid
// and verifies HS256, HS384 and HS512 only; its Key.Fits keeps it away from
// every other algorithm. Errors name the file, never the secret.
func LoadHMACSecret(path string) (*KeySet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("load hmac secret file %s: %w", path, err)
	}
	secret := bytes.TrimSuffix(b, []byte("\n"))
	switch {
	case len(secret) == 0:
		return nil, fmt.Errorf("load hmac secret file %s: secret is empty", path)
	case len(secret) < MinHMACSecret:
		return nil, fmt.Errorf("load hmac secret file %s: secret of %d bytes, want at least %d (RFC 7518 §3.2)", path, len(secret), MinHMACSecret)
	}
	return NewKeySet([]Key{{Public: secret}}), nil
}
