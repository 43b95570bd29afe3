package keys

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/MicahParks/jwkset"
)

const (
	// defaultMaxBytes is the largest JWKS, discovery or key file document
	// accepted when no other limit is configured.
	defaultMaxBytes int64 = 1 << 20
	// minRSABits is the smallest RSA modulus accepted for a verification
	// key (RFC 7518 §3.3 requires 2048 bits or more).
	minRSABits = 2048
)

var (
	errTooLarge    = errors.New("document too large")
	errNoUsableKey = errors.New("no usable key")
)

// skippedKey says why one member of a JWKS "keys" array was left out. It
// names the key by position and kid only, never by its material.
type skippedKey struct {
	Index  int
	KID    string
	Reason string
	// Warn is set for keys that look like a mistake of the publisher (as
	// opposed to keys that are simply meant for something else, such as
	// encryption).
	Warn bool
}

func (s skippedKey) String() string {
	return fmt.Sprintf("key %d (kid %q): %s", s.Index, s.KID, s.Reason)
}

// readLimited reads all of r, refusing more than max bytes with errTooLarge.
func readLimited(r io.Reader, max int64) ([]byte, error) {
	if max <= 0 {
		max = defaultMaxBytes
	}
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: over %d bytes", errTooLarge, max)
	}
	return b, nil
}

// jsonError describes a JSON decoding error by position and type only:
// encoding/json's own messages quote parts of the input, which may be key
// material.
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("not valid JSON (at byte %d)", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return fmt.Errorf("JSON member %q has the wrong type", typ.Field)
		}
		return fmt.Errorf("JSON value of the wrong type (at byte %d)", typ.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("not valid JSON (truncated)")
	}
	return errors.New("not valid JSON")
}

// decodeJWKS reads a JWK Set document (RFC 7517 §5) and returns the keys
// that can verify signatures. It refuses a document that is not JSON, has no
// "keys" array or yields no usable key; single keys that cannot be used are
// skipped and reported.
//
// jwkset converts each JWK into a crypto key and validates it (points on
// the curve, x5c matching the key, registered kty/use/key_ops). The rules of
// this service come on top: keys for encryption, symmetric keys (an HMAC
// secret comes only from the secret file), keys carrying private material,
// keys whose alg their type cannot serve and RSA keys under [minRSABits]
// are skipped.
func decodeJWKS(doc []byte) ([]Key, []skippedKey, error) {
	var set struct {
		Keys *[]json.RawMessage `json:"keys"`
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	if err := dec.Decode(&set); err != nil {
		return nil, nil, jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("not valid JSON (data after the document)")
	}
	if set.Keys == nil {
		return nil, nil, errors.New(`no "keys" array`)
	}
	var keys []Key
	var skipped []skippedKey
	for i, raw := range *set.Keys {
		k, skip := decodeJWK(raw)
		if skip != nil {
			skip.Index = i
			skipped = append(skipped, *skip)
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, skipped, fmt.Errorf("%w among %d keys", errNoUsableKey, len(*set.Keys))
	}
	return keys, skipped, nil
}

// decodeJWK converts one member of a "keys" array, or says why it is
// skipped.
func decodeJWK(raw json.RawMessage) (Key, *skippedKey) {
	// encoding/json matches member names without regard to case, JWK
	// member names are case-sensitive (RFC 7517 §4): "USE" must not stand
	// in for, or override, "use".
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return Key{}, &skippedKey{Reason: "not a JWK: " + jsonError(err).Error(), Warn: true}
	}
	for name := range members {
		if reg, ok := otherCase(name); ok {
			return Key{}, &skippedKey{Reason: fmt.Sprintf("member %q is %q in another case", name, reg), Warn: true}
		}
	}
	var m jwkset.JWKMarshal
	if err := json.Unmarshal(raw, &m); err != nil {
		return Key{}, &skippedKey{Reason: "not a JWK: " + jsonError(err).Error(), Warn: true}
	}
	skip := func(warn bool, format string, args ...any) (Key, *skippedKey) {
		return Key{}, &skippedKey{KID: m.KID, Reason: fmt.Sprintf(format, args...), Warn: warn}
	}
	if m.USE != "" && m.USE != jwkset.UseSig {
		return skip(false, "use is %q, not sig", m.USE)
	}
	if len(m.KEYOPS) > 0 && !slices.Contains(m.KEYOPS, jwkset.KeyOpsVerify) {
		return skip(false, "key_ops has no verify")
	}
	if m.KTY == jwkset.KtyOct {
		// Never let a published set smuggle in an HMAC secret: that would
		// let anyone who can read the set mint tokens.
		return skip(true, "symmetric (oct) keys are not accepted from a JWKS")
	}
	if m.D != "" || m.P != "" || m.Q != "" || m.DP != "" || m.DQ != "" || m.QI != "" || len(m.OTH) > 0 || m.K != "" {
		return skip(true, "carries private key material")
	}
	// Private: false makes jwkset build public keys only. GetX5U stays nil so
	// an x5u member never causes a request; x5u is not used to find keys.
	jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{SkipX5UScheme: true})
	if err != nil {
		if errors.Is(err, jwkset.ErrUnsupportedKey) {
			return skip(true, "unsupported key type %q", m.KTY)
		}
		return skip(true, "invalid %s key: %s", m.KTY, jwksetReason(err))
	}
	k := Key{ID: m.KID, Algorithm: string(m.ALG)}
	switch pub := jwk.Key().(type) {
	case *rsa.PublicKey:
		if bits := pub.N.BitLen(); bits < minRSABits {
			return skip(true, "RSA key of %d bits, want at least %d", bits, minRSABits)
		}
		if pub.E < 3 || pub.E%2 == 0 {
			return skip(true, "RSA public exponent out of range")
		}
		k.Public = pub
	case *ecdsa.PublicKey:
		k.Public = pub
	case ed25519.PublicKey:
		k.Public = pub
	default:
		return skip(true, "%s key with curve %q cannot verify signatures", m.KTY, m.CRV)
	}
	if k.Algorithm != "" && (!asymmetricJWSAlg(k.Algorithm) || !k.Fits(k.Algorithm)) {
		return skip(true, "alg %q does not fit a %s signature key", k.Algorithm, m.KTY)
	}
	return k, nil
}

// jwkMembers are the JWK member names jwkset decodes (RFC 7517 §4, RFC 7518
// §6).
var jwkMembers = []string{"kty", "use", "key_ops", "alg", "kid", "x5u", "x5c", "x5t", "x5t#S256",
	"crv", "x", "y", "d", "n", "e", "p", "q", "dp", "dq", "qi", "oth", "r", "t", "k"}

// otherCase returns the member of RFC 7517 and 7518 that name is written
// in another case of, as strings.EqualFold finds them, and false when it
// is none. JWK member names are case-sensitive: such a name must neither
// stand in for the member nor pass as another one, so it refuses the key.
func otherCase(name string) (string, bool) {
	// Unicode folds two non-ASCII letters into ASCII ones (U+017F to s,
	// U+212A to k), so a name of up to 3 bytes a letter may fold into one
	// of 8.
	if len(name) > 3*8 {
		return "", false
	}
	for _, reg := range jwkMembers {
		if name != reg && strings.EqualFold(name, reg) {
			return reg, true
		}
	}
	return "", false
}

// asymmetricJWSAlg reports whether alg is a public-key JWS algorithm this
// service verifies, Ed25519 included as EdDSA (see EdDSA). Key.Fits goes by
// prefix, which would also let an RSA key pinned to an encryption alg such
// as "RSA-OAEP" through.
func asymmetricJWSAlg(alg string) bool {
	switch alg {
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512":
		return true
	}
	return edDSA(alg)
}

// jwksetReason keeps the first part of a jwkset error chain that names the
// problem class, so messages stay short and free of key material.
func jwksetReason(err error) string {
	for _, sentinel := range []error{jwkset.ErrInvalidKey, jwkset.ErrKeyUnmarshalParameter, jwkset.ErrX509Mismatch, jwkset.ErrJWKValidation, jwkset.ErrPadding} {
		if errors.Is(err, sentinel) {
			return sentinel.Error()
		}
	}
	return "cannot be decoded"
}
