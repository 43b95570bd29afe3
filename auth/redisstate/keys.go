package redisstate

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/plantstore/plantstore/observability/setting"
)

// Keys in Redis are keyed hashes: the HMAC-SHA256, under the deployment's
// secret ([Options.Secret]), of what the key is of (a caller's, or a
// proof's, fixed-size hash), truncated to 16 bytes. Whoever reads Redis
// without the secret cannot confirm a guessed subject. A new secret makes
// new keys: the rate of each caller and its share of the store start
// again, and the proofs recorded under the previous secret are still
// looked up for one proof life, so that none can be replayed at another
// replica across the rotation (by the replicas that ran before it: one
// started since knows the new secret only).

// keyer makes the keys of a State, under the secret its source gives now
// and, for a proof life after a rotation, the previous one.
type keyer struct {
	source func() []byte // nil: no secret, the plain hashes
	mu     sync.Mutex
	cur    []byte // the secret last seen
	prev   []byte // the one before it, looked up until prevUntil
	until  time.Time
}

// newKeyer returns the keyer of source, with the secret it gives now.
func newKeyer(source func() []byte) *keyer {
	k := &keyer{source: source}
	if source != nil {
		k.cur = source()
	}
	return k
}

// secrets returns the secret of now and the previous one while a proof
// recorded under it may live (life after the rotation was seen), else nil.
func (k *keyer) secrets(now time.Time, life time.Duration) (cur, prev []byte) {
	if k.source == nil {
		return nil, nil
	}
	s := k.source()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cur != nil && !bytes.Equal(s, k.cur) {
		k.prev, k.until = k.cur, now.Add(max(life, time.Second))
	}
	k.cur = s
	if k.prev != nil && now.After(k.until) {
		k.prev = nil
	}
	return k.cur, k.prev
}

// key returns prefix, kind and the hex of h keyed under secret (h itself
// without one).
func key(secret []byte, kind string, h [16]byte) string {
	if secret == nil {
		return prefix + kind + ":" + hex.EncodeToString(h[:])
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(kind))
	m.Write(h[:])
	return prefix + kind + ":" + hex.EncodeToString(m.Sum(nil)[:16])
}

// minSecret is the shortest secret a key file may hold.
const minSecret = 32

// maxKeyFile bounds what is read of a key file.
const maxKeyFile = 4 << 10

// KeyFile is the secret of -redis-key-file: read at start, again at each
// [KeyFile.Reload] (SIGHUP, or a watch of the file). It is safe for
// concurrent use.
type KeyFile struct {
	path   string
	secret atomic.Pointer[[]byte]
}

// LoadKeyFile reads the secret at path: at least 32 bytes, one trailing
// "\n" dropped. Its errors are *[setting.Error]s of redis_key_file that
// name the file, never the secret.
func LoadKeyFile(path string) (*KeyFile, error) {
	s, err := readKeyFile(path)
	if err != nil {
		return nil, &setting.Error{Key: "redis_key_file", Err: err}
	}
	f := &KeyFile{path: path}
	f.secret.Store(&s)
	return f, nil
}

// Secret returns the secret in use: an [Options.Secret].
func (f *KeyFile) Secret() []byte { return *f.secret.Load() }

// Reload reads the file again; a file that cannot be read, or holds too
// short a secret, is refused (logged) and the secret in use stays.
func (f *KeyFile) Reload(log *zap.Logger) {
	s, err := readKeyFile(f.path)
	switch {
	case err != nil:
		log.Error("Redis key file reload refused; the previous secret keeps serving", zap.String("source", f.path), zap.Error(err))
	case !bytes.Equal(s, f.Secret()):
		f.secret.Store(&s)
		log.Info("Redis key file rotated: new keys in Redis; proofs recorded under the previous secret are still refused for their life",
			zap.String("source", f.path))
	}
}

func readKeyFile(path string) ([]byte, error) {
	fail := func(err error) ([]byte, error) {
		return nil, fmt.Errorf("read redis key file %s: %w", path, err)
	}
	fh, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fail(err)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxKeyFile+1))
	switch {
	case err != nil:
		return fail(err)
	case len(b) > maxKeyFile:
		return fail(fmt.Errorf("over %d bytes", maxKeyFile))
	}
	s := bytes.TrimSuffix(b, []byte("\n"))
	if len(s) < minSecret {
		return fail(fmt.Errorf("secret of %d bytes, want at least %d", len(s), minSecret))
	}
	return s, nil
}
