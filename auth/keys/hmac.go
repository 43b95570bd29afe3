package keys

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// minHMACSecret is the shortest HMAC secret accepted, in bytes. RFC 7518
// §3.2 requires a key of at least the hash output size: 256 bits for
// HS256, the weakest algorithm the secret enables.
const minHMACSecret = 32

// maxHMACSecrets bounds the secrets of an HMAC secret directory: a few
// are enough to overlap a rotation.
const maxHMACSecrets = 16

// LoadHMACSecret reads the HMAC secrets at path: a file holding one raw
// secret, or a directory holding several, one a file, for rotation with
// overlap (a Kubernetes Secret mounted as a volume is such a directory).
// Exactly one trailing "\n" of a secret is dropped (a "\r" before it
// stays, as do further newlines); an empty secret or one under
// 32 bytes (RFC 7518 §3.2) is an error. The secret of a file has no kid; the
// secrets of a directory are named by their file names, which tokens must
// carry as kid when more than one fits their algorithm. In a
// directory, names starting with "." (Kubernetes' own ..data links) are
// not secrets. The keys verify HS256, HS384 and HS512 only; their Key.Fits
// keeps them away from every other algorithm. [KeyFile.Reload] reads path
// again. Errors name the file, never the secret. m, if not nil, counts the
// keys in plantstore_jwks_keys.
func LoadHMACSecret(path string, m Recorder) (*KeyFile, error) {
	return loadFile(path, true, readHMACSecrets, m)
}

// ReadHMACSecret returns the secret of the HMAC secret file at path, by
// the rules of [LoadHMACSecret], for signing with it ("plantstore token").
// Errors name the file, never the secret.
func ReadHMACSecret(path string) ([]byte, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("read hmac secret file %s: a directory: name the file of the secret to sign with", path)
	}
	keys, _, err := readHMACSecrets(path)
	if err != nil {
		return nil, fmt.Errorf("read hmac secret file %s: %w", path, err)
	}
	return keys[0].Public.([]byte), nil
}

// readHMACSecrets reads the secret file or directory at path.
func readHMACSecrets(path string) ([]Key, [sha256.Size]byte, error) {
	var digest [sha256.Size]byte
	fi, err := os.Stat(path)
	if err != nil {
		return nil, digest, pathCause(err)
	}
	if !fi.IsDir() {
		secret, err := readHMACSecret(path)
		if err != nil {
			return nil, digest, err
		}
		return []Key{{Public: secret}}, sha256.Sum256(secret), nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, digest, pathCause(err)
	}
	var keys []Key
	h := sha256.New()
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		file := filepath.Join(path, name)
		// Stat follows the links a mounted Secret is made of.
		if fi, err := os.Stat(file); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if len(keys) == maxHMACSecrets {
			return nil, digest, fmt.Errorf("more than %d secrets", maxHMACSecrets)
		}
		secret, err := readHMACSecret(file)
		if err != nil {
			return nil, digest, fmt.Errorf("%s: %w", name, err)
		}
		keys = append(keys, Key{ID: name, Public: secret})
		binary.Write(h, binary.BigEndian, [2]uint32{uint32(len(name)), uint32(len(secret))})
		h.Write([]byte(name))
		h.Write(secret)
	}
	if len(keys) == 0 {
		return nil, digest, errors.New("directory holds no secret")
	}
	h.Sum(digest[:0])
	return keys, digest, nil
}

// readHMACSecret reads the one secret of the file at path.
func readHMACSecret(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, pathCause(err)
	}
	defer fh.Close()
	b, err := readLimited(fh, defaultMaxBytes)
	if err != nil {
		return nil, err
	}
	secret := bytes.TrimSuffix(b, []byte("\n"))
	switch {
	case len(secret) == 0:
		return nil, errors.New("secret is empty")
	case len(secret) < minHMACSecret:
		return nil, fmt.Errorf("secret of %d bytes, want at least %d (RFC 7518 §3.2)", len(secret), minHMACSecret)
	}
	return secret, nil
}
