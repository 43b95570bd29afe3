package dpop

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/plantstore/plantstore/observability/setting"
)

// DefaultNonceLifetime is how long a DPoP server nonce is accepted.
const DefaultNonceLifetime = 5 * time.Minute

// minNonceKey is the shortest key of DPoP server nonces, in bytes: the
// output size of the HMAC-SHA256 that makes them.
const minNonceKey = 32

// minNonceLifetime is the shortest nonce lifetime: a second a step.
const minNonceLifetime = nonceSteps * time.Second

// nonceSteps is how many time steps a nonce lifetime is cut into. A nonce
// names the step it was issued in and is accepted while the clock is in
// that step or the nonceSteps-1 after it: from 3/4 of the lifetime to all
// of it after it was issued. It is accepted one step early too, so that a
// replica whose clock is a little behind the one that issued it agrees.
const nonceSteps = 4

// maxNonceKeyFile bounds the key file read: a key is a few dozen bytes.
const maxNonceKeyFile = 64 << 10

// nonceMACBytes is how much of the HMAC-SHA256 a nonce carries: 128 bits,
// which no one guesses within a lifetime.
const nonceMACBytes = 16

// nonceLen is the length of a nonce: the base64url of its step (8 bytes)
// and its MAC.
var nonceLen = base64.RawURLEncoding.EncodedLen(8 + nonceMACBytes)

// nonceLabel starts the MAC input, so that the key makes nothing else.
const nonceLabel = "plantstore DPoP nonce\x00"

// Nonces issues and checks DPoP server nonces (RFC 9449 §8 and §9). They
// are stateless: a nonce is a time step and an HMAC-SHA256 over it under a
// key every replica reads from the same file, so every replica accepts the
// nonces of every other, and no nonce depends on the caller. A nonce is
// accepted for 3/4 to all of the lifetime after it was issued.
// [Nonces.Reload] reads the key file again; after a new key, nonces of the
// previous one are still accepted for one lifetime. It is safe for
// concurrent use.
type Nonces struct {
	path     string
	lifetime time.Duration
	step     int64 // nanoseconds
	mu       sync.Mutex
	keys     atomic.Pointer[nonceKeys]
}

// nonceKeys is the key nonces are issued with and checked against, and
// the one before it, accepted until prevUntil.
type nonceKeys struct {
	cur, prev *nonceKey
	prevUntil time.Time
	// issued is the nonce of the latest step asked for.
	issued atomic.Pointer[issuedNonce]
}

// nonceKey is one key, with a pool of its keyed MACs.
type nonceKey struct {
	secret []byte
	macs   sync.Pool // of *nonceMAC, keyed with secret
}

// nonceMAC is a keyed HMAC-SHA256 with room for its input and output, so
// that a MAC allocates nothing.
type nonceMAC struct {
	h   hash.Hash
	in  [len(nonceLabel) + 8]byte
	sum [sha256.Size]byte
}

// issuedNonce is the nonce of one step.
type issuedNonce struct {
	step  int64
	value string
}

func newNonceKey(secret []byte) *nonceKey {
	k := &nonceKey{secret: secret}
	k.macs.New = func() any {
		m := &nonceMAC{h: hmac.New(sha256.New, secret)}
		copy(m.in[:], nonceLabel)
		return m
	}
	return k
}

// mac writes into out the nonceMACBytes of the MAC of step.
func (k *nonceKey) mac(step int64, out []byte) {
	m := k.macs.Get().(*nonceMAC)
	m.h.Reset()
	binary.BigEndian.PutUint64(m.in[len(nonceLabel):], uint64(step))
	m.h.Write(m.in[:])
	copy(out, m.h.Sum(m.sum[:0])[:nonceMACBytes])
	k.macs.Put(m)
}

// LoadNonces reads the nonce key at path, a file of at least
// 32 bytes (one trailing "\n" dropped, as for an HMAC secret
// file), and returns the Nonces it makes, accepted for lifetime (0 means
// [DefaultNonceLifetime]). Errors are *[setting.Error]s that name the file,
// never the key.
func LoadNonces(path string, lifetime time.Duration) (*Nonces, error) {
	if lifetime == 0 {
		lifetime = DefaultNonceLifetime
	}
	if lifetime < minNonceLifetime {
		return nil, setting.Errorf("dpop_nonce_lifetime", "%v: want at least %v", lifetime, minNonceLifetime)
	}
	secret, err := readNonceKey(path)
	if err != nil {
		return nil, setting.Errorf("dpop_nonce_key_file", "%v", err)
	}
	n := &Nonces{path: path, lifetime: lifetime, step: int64(lifetime / nonceSteps)}
	n.keys.Store(&nonceKeys{cur: newNonceKey(secret)})
	return n, nil
}

// readNonceKey reads the key file at path.
func readNonceKey(path string) ([]byte, error) {
	fail := func(err error) ([]byte, error) {
		return nil, fmt.Errorf("read dpop nonce key file %s: %w", path, err)
	}
	fh, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the message names the file already
		}
		return fail(err)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxNonceKeyFile+1))
	switch {
	case err != nil:
		return fail(err)
	case len(b) > maxNonceKeyFile:
		return fail(fmt.Errorf("over %d bytes", maxNonceKeyFile))
	}
	secret := bytes.TrimSuffix(b, []byte("\n"))
	if len(secret) < minNonceKey {
		return fail(fmt.Errorf("key of %d bytes, want at least %d", len(secret), minNonceKey))
	}
	return secret, nil
}

// Lifetime returns how long a nonce is accepted.
func (n *Nonces) Lifetime() time.Duration { return n.lifetime }

// Reload reads the key file again at now. A key of the wrong size, or a
// file that cannot be read, is refused and the key in use stays. A new
// key is used from now on, and the nonces of the one it replaces are
// accepted for one lifetime more; changed tells whether the key changed.
func (n *Nonces) Reload(now time.Time) (changed bool, err error) {
	secret, err := readNonceKey(n.path)
	if err != nil {
		return false, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	old := n.keys.Load()
	if bytes.Equal(old.cur.secret, secret) {
		return false, nil
	}
	n.keys.Store(&nonceKeys{cur: newNonceKey(secret), prev: old.cur, prevUntil: now.Add(n.lifetime)})
	return true, nil
}

// ReloadLogged reloads n at now ([Nonces.Reload]) and logs a rotation or
// a refusal; it returns what Reload returned. The log names the file,
// never the key. It is what a watch of the key file (a mounted Secret
// updated, no SIGHUP) and SIGHUP call.
func (n *Nonces) ReloadLogged(log *zap.Logger, now time.Time) (changed bool, err error) {
	changed, err = n.Reload(now)
	switch {
	case err != nil:
		log.Error("DPoP nonce key reload refused; the previous key keeps serving", zap.String("source", n.path), zap.Error(err))
	case changed:
		log.Info("DPoP nonce key rotated; nonces of the previous key are accepted for one lifetime more",
			zap.String("source", n.path), zap.Duration("dpop_nonce_lifetime", n.lifetime))
	}
	return changed, err
}

// stepOf returns the time step of t.
func (n *Nonces) stepOf(t time.Time) int64 { return t.UnixNano() / n.step }

// Issue returns the nonce of now: the same for every caller and every
// replica holding the key file, until the step changes.
func (n *Nonces) Issue(now time.Time) string {
	keys := n.keys.Load()
	step := n.stepOf(now)
	if in := keys.issued.Load(); in != nil && in.step == step {
		return in.value
	}
	var raw [8 + nonceMACBytes]byte
	binary.BigEndian.PutUint64(raw[:8], uint64(step))
	keys.cur.mac(step, raw[8:])
	in := &issuedNonce{step: step, value: base64.RawURLEncoding.EncodeToString(raw[:])}
	keys.issued.Store(in)
	return in.value
}

// valid reports whether nonce, as a proof carries it, is one this
// deployment issued within the lifetime, by the key in use or, for one
// lifetime after a rotation, the one before it.
func (n *Nonces) valid(nonce []byte, now time.Time) bool {
	if len(nonce) != nonceLen {
		return false
	}
	var raw [8 + nonceMACBytes]byte
	if m, err := base64.RawURLEncoding.Strict().Decode(raw[:], nonce); err != nil || m != len(raw) {
		return false
	}
	step := int64(binary.BigEndian.Uint64(raw[:8]))
	if age := n.stepOf(now) - step; age < -1 || age >= nonceSteps {
		return false
	}
	keys := n.keys.Load()
	var want [nonceMACBytes]byte
	keys.cur.mac(step, want[:])
	if hmac.Equal(want[:], raw[8:]) {
		return true
	}
	if keys.prev == nil || !now.Before(keys.prevUntil) {
		return false
	}
	keys.prev.mac(step, want[:])
	return hmac.Equal(want[:], raw[8:])
}

// NonceHeader is the response header that carries the nonce (RFC 9449
// §8.1).
const NonceHeader = "DPoP-Nonce"

// Derive returns a secret of 32 bytes made from the current key for
// another use, named by label (an HMAC-SHA256 of label under the key), so
// that the key file's secret serves that use without ever being used as
// it is: the shared state's keyed hashes take theirs so. It changes when
// the key is rotated.
func (n *Nonces) Derive(label string) []byte {
	m := hmac.New(sha256.New, n.keys.Load().cur.secret)
	m.Write([]byte(label))
	return m.Sum(nil)
}
