package keys

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/plantstore/plantstore/observability/setting"
)

// KeyFile is a key source read from a file: a key file ([LoadKeyFile]) or
// an HMAC secret file or directory ([LoadHMACSecret]). [KeyFile.Reload]
// reads it again, and [KeyFile.Watch] does so whenever it changes. It is
// safe for concurrent use.
type KeyFile struct {
	path string
	hmac bool // an HMAC secret file rather than a key file
	read func(path string) (keys []Key, digest [sha256.Size]byte, err error)
	m    Recorder
	mu   sync.Mutex // serializes Reload
	// digest is the SHA-256 of what the keys were read from, so that a
	// read of the same bytes changes nothing (under mu).
	digest [sha256.Size]byte
	keys   atomic.Pointer[KeySet]
	gen    atomic.Uint64 // see Generation
}

var _ Keys = (*KeyFile)(nil)

// LoadKeyFile reads the key file at path: a JWK Set (RFC 7517) in JSON, or
// one or more PEM "PUBLIC KEY" blocks (PKIX), each named by its RFC 7638
// thumbprint ([Thumbprint]).
//
// A JWKS file follows the rules of a remote JWKS: keys for encryption
// ("use" other than "sig", key_ops without "verify") are left out. Keys a
// remote set would skip as a mistake (symmetric keys, private key material,
// RSA under 2048 bits, an alg the key cannot serve, invalid or unsupported
// keys) make the whole file fail, naming the key, because the operator who
// wrote the file is the one to tell. The same holds for every PEM block.
//
// The error names the file and the problem, never key material. m, if not
// nil, counts the keys in plantstore_jwks_keys.
func LoadKeyFile(path string, m Recorder) (*KeyFile, error) {
	return loadFile(path, false, readKeyFile, m)
}

func loadFile(path string, hmac bool, read func(string) ([]Key, [sha256.Size]byte, error), m Recorder) (*KeyFile, error) {
	keys, digest, err := read(path)
	if err != nil {
		return nil, fmt.Errorf("load %s %s: %w", kindOf(hmac), path, err)
	}
	f := &KeyFile{path: path, hmac: hmac, read: read, m: recorderOf(m), digest: digest}
	f.keys.Store(NewKeySet(keys))
	f.m.AddKeys(len(keys))
	return f, nil
}

// Reload reads the file again and, when it is good and differs from what
// serves, serves its keys from then on and reports true; the same bytes
// change nothing (tokens verified before stay cached). A bad file returns
// an error and the old keys keep serving. Changes and failures count in
// plantstore_key_file_reloads_total.
func (f *KeyFile) Reload() (changed bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys, digest, err := f.read(f.path)
	if err != nil {
		f.m.KeyFileReload(false)
		return false, fmt.Errorf("reload %s %s: %w", kindOf(f.hmac), f.path, err)
	}
	if digest == f.digest {
		return false, nil
	}
	old := f.keys.Swap(NewKeySet(keys))
	f.digest = digest
	// After the swap: a verification that sees the new generation sees
	// the new keys.
	f.gen.Add(1)
	f.m.AddKeys(len(keys) - old.Len())
	f.m.KeyFileReload(true)
	return true, nil
}

// Key returns the key for a token with the given kid and alg, with the
// errors of [KeySet.Lookup].
func (f *KeyFile) Key(_ context.Context, kid, alg string) (Key, error) {
	return f.keys.Load().Lookup(kid, alg)
}

// String names the file: "key file PATH" or "hmac secret file PATH".
func (f *KeyFile) String() string { return kindOf(f.hmac) + " " + f.path }

// kindOf is how messages name a key file, or with hmac an HMAC secret
// file.
func kindOf(hmac bool) string {
	if hmac {
		return "hmac secret file"
	}
	return "key file"
}

// unfit returns the refusal of f when none of its keys fits algs, citing
// f's own setting.
func (f *KeyFile) unfit(algs []string) *setting.Error {
	err := fmt.Errorf("%s has no key for the allowed algorithms %s", f, strings.Join(algs, ","))
	if f.hmac {
		return &setting.Error{Key: "hmac_secret_file", Err: err}
	}
	return &setting.Error{Key: "key_file", Err: err}
}

func readKeyFile(path string) ([]Key, [sha256.Size]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, [sha256.Size]byte{}, pathCause(err)
	}
	defer fh.Close()
	b, err := readLimited(fh, defaultMaxBytes)
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	keys, err := parseKeyFile(b)
	return keys, sha256.Sum256(b), err
}

// pathCause returns the cause of a *os.PathError, whose path the caller's
// message already names, or err itself.
func pathCause(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// parseKeyFile decodes a JWKS document or PEM PUBLIC KEY blocks.
func parseKeyFile(b []byte) ([]Key, error) {
	trimmed := bytes.TrimSpace(b)
	switch {
	case len(trimmed) == 0:
		return nil, errors.New("file is empty")
	case trimmed[0] == '{':
		keys, skipped, err := decodeJWKS(trimmed)
		var bad []string
		for _, s := range skipped {
			if s.Warn {
				bad = append(bad, s.String())
			}
		}
		if len(bad) > 0 {
			return nil, fmt.Errorf("JWKS: %s", strings.Join(bad, "; "))
		}
		if err != nil {
			return nil, fmt.Errorf("JWKS: %w", err)
		}
		return keys, nil
	case bytes.Contains(trimmed, []byte("-----BEGIN ")):
		return parsePEMKeys(trimmed)
	}
	return nil, errors.New("neither a JWKS document nor PEM PUBLIC KEY blocks")
}

func parsePEMKeys(b []byte) ([]Key, error) {
	var keys []Key
	rest := b
	for n := 1; ; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("PEM block %d is %q, want \"PUBLIC KEY\"", n, block.Type)
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: not a valid PKIX public key", n)
		}
		if err := checkPublicKey(pub); err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		kid, err := Thumbprint(pub)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		keys = append(keys, Key{ID: kid, Public: pub})
	}
	if len(keys) == 0 {
		return nil, errors.New("no valid PEM block")
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, fmt.Errorf("data after PEM block %d is not PEM", len(keys))
	}
	return keys, nil
}

// checkPublicKey applies the key rules of a JWKS to a PEM key: a signature
// key type, a named curve, RSA of at least 2048 bits.
func checkPublicKey(pub any) error {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < minRSABits {
			return fmt.Errorf("RSA key of %d bits, want at least %d", bits, minRSABits)
		}
	case *ecdsa.PublicKey:
		switch k.Curve.Params().Name {
		case "P-256", "P-384", "P-521":
		default:
			return fmt.Errorf("EC curve %s not supported", k.Curve.Params().Name)
		}
	case ed25519.PublicKey:
	default:
		return fmt.Errorf("%T cannot verify signatures", pub)
	}
	return nil
}
