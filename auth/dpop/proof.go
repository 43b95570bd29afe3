package dpop

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// maxProof bounds a DPoP header: a proof is a few hundred bytes, its jwk
// included; an RSA key of 4096 bits makes it about 2 KiB.
const maxProof = 4 << 10

// maxJTI bounds the jti of a proof; RFC 9449 §4.2 asks for 96 bits of
// randomness, which any client fits in far less.
const maxJTI = 256

// RSA proof keys are 2048 to 4096 bits: under that a key is weak (RFC 7518
// §3.3, as for the issuers' keys), over it a signature costs more to
// verify than the service lets a caller spend.
const (
	minProofRSABytes = 2048 / 8
	maxProofRSABytes = 4096 / 8
)

// A Request is what a proof is checked against: the request that carries
// it and the token it presents.
type Request struct {
	// Method and URI are the htm and htu the proof must name: the
	// request's method, and its URL as [TargetURI] makes it.
	Method, URI string
	// ATH is the proof's ath for the access token ([AccessTokenHash]).
	ATH string
	// JKT is the token's cnf.jkt: the RFC 7638 thumbprint of the key the
	// proof must be signed with.
	JKT string
	// Algorithms are those a proof may be signed with (see
	// [CheckAlgorithms]).
	Algorithms []string
	// Now is the time of the request; the proof's iat must be within
	// Window before it, Leeway either side.
	Now            time.Time
	Window, Leeway time.Duration
	// Nonces are the server nonces a proof must carry; nil for none.
	Nonces *Nonces
}

// A Proof is a DPoP proof that passed every check but its signature and
// whether its jti was used before, which the caller's replay cache
// answers.
type Proof struct {
	alg    string
	key    any    // the public key of its jwk
	signed string // the signing input: the header and claims segments
	sig    []byte
	jti    string
	iat    time.Time
	nonce  []byte // its nonce claim as written; nil when absent
}

// maxProofMembers bounds the members of a proof's header, of its jwk and
// of its claims: a proof needs about five in each, and what each costs to
// read (a name that must be unescaped) stays small times this.
const maxProofMembers = 32

// Parse runs every check of a DPoP proof (RFC 9449 §4.3) that costs no
// signature, cheapest first, so that a proof that cannot pass costs little
// whoever sends it, and returns the Problem of the first that fails (and
// a nil *Proof), else the proof:
//
//  1. the size (at most 4 KiB) and the form: three base64url segments, a
//     header and claims that are JSON objects of at most 32 members
//     (names compared exactly, a repeated one read as the last);
//  2. the header: typ dpop+jwt, an alg of req.algs, no crit (no extension
//     is understood, RFC 7515 §4.1.11);
//  3. the jwk's shape, on its text alone: a public key (no private or
//     symmetric member, no certificate), of alg's family and curve, RSA of
//     2048 to 4096 bits;
//  4. its RFC 7638 thumbprint against req.jkt, which refuses any key but
//     the one the token is bound to ([WrongKey]) before anything is
//     made of it;
//  5. the key itself (an EC point on its curve);
//  6. the claims: a jti of 1 to 256 bytes, htm, htu, ath, iat within the
//     window and leeway;
//  7. the signature's length for alg;
//  8. with server nonces, the nonce: a string this deployment issued
//     within the nonce lifetime ([NeedsNonce]). It
//     comes last, so that a proof wrong in anything else is refused for
//     that, which a new nonce would not mend, while a proof whose nonce
//     alone is missing or stale (a standard client's first request, or
//     one after a pause) is answered with the nonce to retry with; and it
//     comes before admission, so that such a proof neither spends the
//     caller's rate nor records its jti, which the retry does not reuse
//     anyway but a client may.
//
// What is left is the replay of the jti and the signature, which the
// caller checks in that order: the signature last, and only for a proof
// whose jti its replay cache would take.
func Parse(s string, req *Request) (*Proof, Problem) {
	if len(s) > maxProof {
		return nil, Invalid
	}
	hseg, rest, ok1 := strings.Cut(s, ".")
	cseg, sseg, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.IndexByte(sseg, '.') >= 0 {
		return nil, Invalid
	}
	var h proofHeader
	if !h.read(hseg) || h.crit {
		return nil, Invalid
	}
	if typ, ok := jsonText(h.typ); !ok || !bytes.EqualFold(typ, []byte("dpop+jwt")) {
		return nil, Invalid
	}
	algText, _ := jsonText(h.alg)
	i := slices.Index(req.Algorithms, string(algText))
	if i < 0 {
		return nil, Invalid
	}
	alg := req.Algorithms[i]
	var k proofJWK
	if !k.read(h.jwk, alg) {
		return nil, Invalid
	}
	if !k.thumbprintIs(req.JKT) {
		return nil, WrongKey
	}
	p := &Proof{alg: alg, signed: s[:len(hseg)+1+len(cseg)]}
	var ok bool
	if p.key, ok = k.public(); !ok {
		return nil, Invalid
	}
	if prob := p.readClaims(cseg, req); prob != 0 {
		return nil, prob
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(sseg)
	if err != nil || len(sig) != k.sigSize() {
		return nil, Invalid
	}
	p.sig = sig
	if req.Nonces != nil {
		text, ok := jsonText(p.nonce)
		if !ok || !req.Nonces.valid(text, req.Now) {
			return nil, NeedsNonce
		}
	}
	return p, 0
}

// proofHeader is the members of a proof's header that are read, as
// written.
type proofHeader struct {
	typ, alg, jwk []byte
	crit          bool
}

// read reads the header segment seg into h, and reports whether it is a
// JSON object of at most maxProofMembers members.
func (h *proofHeader) read(seg string) bool {
	o, ok := decodeSegment(seg)
	if !ok {
		return false
	}
	n := 0
	for name, value, ok := o.next(); ok; name, value, ok = o.next() {
		if n++; n > maxProofMembers {
			return false
		}
		switch string(jsonName(name)) {
		case "typ":
			h.typ = value
		case "alg":
			h.alg = value
		case "jwk":
			h.jwk = value
		case "crit":
			h.crit = true
		}
	}
	return true
}

// readClaims reads and checks the claims segment of p.
func (p *Proof) readClaims(seg string, req *Request) Problem {
	o, ok := decodeSegment(seg)
	if !ok {
		return Invalid
	}
	var jti, htm, htu, ath, iat, nonce []byte
	n := 0
	for name, value, ok := o.next(); ok; name, value, ok = o.next() {
		if n++; n > maxProofMembers {
			return Invalid
		}
		switch string(jsonName(name)) {
		case "jti":
			jti = value
		case "htm":
			htm = value
		case "htu":
			htu = value
		case "ath":
			ath = value
		case "iat":
			iat = value
		case "nonce":
			nonce = value
		}
	}
	id, ok := jsonText(jti)
	if !ok || len(id) == 0 || len(id) > maxJTI {
		return Invalid
	}
	if m, _ := jsonText(htm); string(m) != req.Method {
		return WrongTarget
	}
	// The common case, the URL exactly as the service names it, needs no
	// parsing.
	if u, _ := jsonText(htu); string(u) != req.URI {
		if n, ok := normalizeHTU(string(u)); !ok || n != req.URI {
			return WrongTarget
		}
	}
	if a, _ := jsonText(ath); string(a) != req.ATH {
		return WrongToken
	}
	// The NumericDate rule of the token's claims, iat required.
	t, ok := numericDate(iat)
	if !ok {
		return Invalid
	}
	if t.Before(req.Now.Add(-req.Window-req.Leeway)) || t.After(req.Now.Add(req.Leeway)) {
		return OutOfWindow
	}
	p.jti, p.iat, p.nonce = string(id), t, nonce
	return 0
}

// JTI returns the proof's jti, which makes it one of a kind for its key.
func (p *Proof) JTI() string { return p.jti }

// IssuedAt returns the proof's iat.
func (p *Proof) IssuedAt() time.Time { return p.iat }

// Verify reports whether p's signature is its key's over its header and
// claims: ECDSA here (the signature is r and s, each the size of the
// curve, RFC 7518 §3.4), every other alg by golang-jwt's implementation.
func (p *Proof) Verify() bool {
	if pub, ok := p.key.(*ecdsa.PublicKey); ok {
		var digest []byte
		switch p.alg {
		case "ES256":
			sum := sha256.Sum256([]byte(p.signed))
			digest = sum[:]
		case "ES384":
			sum := sha512.Sum384([]byte(p.signed))
			digest = sum[:]
		case "ES512":
			sum := sha512.Sum512([]byte(p.signed))
			digest = sum[:]
		default:
			return false
		}
		half := len(p.sig) / 2
		return ecdsa.VerifyASN1(pub, digest, ecdsaDER(p.sig[:half], p.sig[half:]))
	}
	return proofMethod(p.alg).Verify(p.signed, p.sig, p.key) == nil
}

// ecdsaDER returns the ASN.1 DER of the ECDSA signature r, s (SEC 1
// §C.8, ECDSA-Sig-Value: a SEQUENCE of two INTEGERs), r and s given as
// unsigned big-endian integers of at most 66 bytes (P-521), which is what
// crypto/ecdsa verifies; ecdsa.Verify would make the same of them through
// two big.Int values.
func ecdsaDER(r, s []byte) []byte {
	integer := func(b, v []byte) []byte {
		if len(v) == 0 {
			v = []byte{0}
		}
		for len(v) > 1 && v[0] == 0 {
			v = v[1:]
		}
		n := len(v)
		if v[0]&0x80 != 0 {
			n++ // a leading 0 keeps it positive
		}
		b = append(b, 0x02, byte(n))
		if n > len(v) {
			b = append(b, 0)
		}
		return append(b, v...)
	}
	body := integer(integer(make([]byte, 0, 2*(3+66)), r), s)
	der := make([]byte, 0, 3+len(body))
	der = append(der, 0x30)
	if len(body) >= 0x80 {
		der = append(der, 0x81) // one byte of length follows: at most 138
	}
	return append(append(der, byte(len(body))), body...)
}

// proofMethod returns golang-jwt's method of a proof alg, one of
// [DefaultAlgorithms].
func proofMethod(alg string) jwt.SigningMethod {
	switch alg {
	case "ES256":
		return jwt.SigningMethodES256
	case "ES384":
		return jwt.SigningMethodES384
	case "ES512":
		return jwt.SigningMethodES512
	case "EdDSA", "Ed25519":
		return jwt.SigningMethodEdDSA
	case "PS256":
		return jwt.SigningMethodPS256
	case "PS384":
		return jwt.SigningMethodPS384
	case "PS512":
		return jwt.SigningMethodPS512
	case "RS256":
		return jwt.SigningMethodRS256
	case "RS384":
		return jwt.SigningMethodRS384
	case "RS512":
		return jwt.SigningMethodRS512
	}
	return jwt.SigningMethodNone // verifies nothing
}

// decodeSegment decodes a JWS segment, canonical base64url without
// padding, and returns the reader of the JSON object it holds.
func decodeSegment(seg string) (jsonObject, bool) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(seg)
	if err != nil {
		return jsonObject{}, false
	}
	return newJSONObject(b)
}

// maxNumericDate is 9999-12-31T23:59:59Z, the latest NumericDate a proof
// may carry, as a token may.
const maxNumericDate = 253402300799

// numericDate returns the time a NumericDate holds: a JSON number from 0
// to 253402300799 (year 9999), fractions of a second kept.
func numericDate(raw []byte) (time.Time, bool) {
	// The value was checked by the decoder of its object: starting so, it
	// is a JSON number, which ParseFloat reads as encoding/json does.
	if len(raw) == 0 || raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return time.Time{}, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || !(f >= 0 && f <= maxNumericDate) {
		return time.Time{}, false
	}
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9)), true
}

// proofJWK is the public key of a proof's jwk header, as its text says:
// the members of RFC 7638 that make its thumbprint, each checked to be
// the canonical base64url of a value of the right size, and their bytes.
type proofJWK struct {
	kty   string
	crv   []byte
	curve elliptic.Curve // of an EC key
	// x and y (EC, OKP), or n and e (RSA), as written and decoded.
	a, b       []byte
	aRaw, bRaw []byte
	e          int // an RSA key's exponent
}

// proofCurve returns the curve of an ES alg, and its JWK name.
func proofCurve(alg string) (elliptic.Curve, string) {
	switch alg {
	case "ES256":
		return elliptic.P256(), "P-256"
	case "ES384":
		return elliptic.P384(), "P-384"
	case "ES512":
		return elliptic.P521(), "P-521"
	}
	return nil, ""
}

// read reads the jwk header of a proof signed by alg into k, and reports
// whether it is a public key of alg's family this service verifies proofs
// with. Its other members may say what the key is for: use, when present,
// is "sig", key_ops holds "verify", alg is the proof's alg, kid is a
// string; unknown members are ignored (RFC 7517 §4), but it may not hold
// private or symmetric key material (RFC 7518 §6.2.2, §6.3.2, §6.4) nor
// certificates, which a key the client made itself has no use for. Member
// names are compared exactly, and one written in another case than a
// member of RFC 7517 and 7518 refuses the key, as in a JWKS.
func (k *proofJWK) read(raw []byte, alg string) bool {
	o, ok := innerObject(raw)
	if !ok {
		return false
	}
	var kty, crv, x, y, n, e, use, kalg, kid, ops []byte
	count := 0
	for rawName, value, ok := o.next(); ok; rawName, value, ok = o.next() {
		if count++; count > maxProofMembers {
			return false
		}
		name := jsonName(rawName)
		switch string(name) {
		case "kty":
			kty = value
		case "crv":
			crv = value
		case "x":
			x = value
		case "y":
			y = value
		case "n":
			n = value
		case "e":
			e = value
		case "use":
			use = value
		case "alg":
			kalg = value
		case "kid":
			kid = value
		case "key_ops":
			ops = value
		case "d", "p", "q", "dp", "dq", "qi", "oth", "k", "x5u", "x5c", "x5t", "x5t#S256":
			return false
		default:
			if jwkMemberInOtherCase(name) {
				return false
			}
		}
	}
	if !proofJWKUse(use, kalg, kid, ops, alg) {
		return false
	}
	t, _ := jsonText(kty)
	var ok1, ok2 bool
	switch {
	case string(t) == "EC" && strings.HasPrefix(alg, "ES"):
		var name string
		k.kty = "EC"
		k.curve, name = proofCurve(alg)
		if k.crv, ok = jsonText(crv); !ok || string(k.crv) != name {
			return false
		}
		size := (k.curve.Params().BitSize + 7) / 8
		k.a, k.aRaw, ok1 = decodeMember(x, size, size)
		k.b, k.bRaw, ok2 = decodeMember(y, size, size)
	case string(t) == "OKP" && edDSA(alg):
		k.kty = "OKP"
		if k.crv, ok = jsonText(crv); !ok || string(k.crv) != "Ed25519" {
			return false
		}
		k.a, k.aRaw, ok1 = decodeMember(x, ed25519.PublicKeySize, ed25519.PublicKeySize)
		ok2 = true
	case string(t) == "RSA" && (strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")):
		k.kty = "RSA"
		k.a, k.aRaw, ok1 = decodeMember(n, minProofRSABytes, maxProofRSABytes)
		k.b, k.bRaw, ok2 = decodeMember(e, 1, 4)
		ok2 = ok1 && ok2 && k.rsaSane()
	default:
		return false
	}
	return ok1 && ok2
}

// decodeMember returns the text of a JWK member holding the base64url of
// min to max bytes, and those bytes; false unless it is a string of
// canonical base64url without padding of that length.
func decodeMember(raw []byte, min, max int) (text, value []byte, ok bool) {
	text, ok = jsonText(raw)
	if !ok || len(text) > base64.RawURLEncoding.EncodedLen(max) {
		return nil, nil, false
	}
	value = make([]byte, base64.RawURLEncoding.DecodedLen(len(text)))
	n, err := base64.RawURLEncoding.Strict().Decode(value, text)
	// The decoder skips CR and LF: every character must have been decoded,
	// or one key would have a thumbprint per way of breaking its lines.
	if err != nil || n < min || n > max || base64.RawURLEncoding.EncodedLen(n) != len(text) {
		return nil, nil, false
	}
	return text, value[:n], true
}

// jwkMembers are the member names of a JWK (RFC 7517 §4, RFC 7518 §6).
var jwkMembers = []string{"kty", "use", "key_ops", "alg", "kid", "x5u", "x5c", "x5t", "x5t#S256",
	"crv", "x", "y", "d", "n", "e", "p", "q", "dp", "dq", "qi", "oth", "r", "t", "k"}

// jwkMemberInOtherCase reports whether name is a member of RFC 7517 and
// 7518 in another case, as strings.EqualFold finds them: JWK member names
// are case-sensitive, so such a name refuses the key, as it refuses a key
// of a JWKS (auth/keys).
func jwkMemberInOtherCase(name []byte) bool {
	// Unicode folds two non-ASCII letters into ASCII ones (U+017F to s,
	// U+212A to k), so a name of up to 3 bytes a letter may fold into one
	// of 8.
	if len(name) > 3*8 {
		return false
	}
	for _, reg := range jwkMembers {
		if string(name) != reg && strings.EqualFold(string(name), reg) {
			return true
		}
	}
	return false
}

// edDSA reports whether alg names EdDSA over Ed25519: EdDSA, or Ed25519,
// its fully-specified name (RFC 9864).
func edDSA(alg string) bool { return alg == "EdDSA" || alg == "Ed25519" }

// rsaSane reports whether the n and e of an RSA key are unsigned integers
// in as few octets as they take (RFC 7518 §2), n of 2048 bits or more
// (decoding bounded it to 4096), e 65537, the exponent every RSA key is
// made with: a larger one makes a signature that no one made costlier to
// refuse; it sets k.e.
func (k *proofJWK) rsaSane() bool {
	n, e := k.aRaw, k.bRaw
	if n[0] == 0 || e[0] == 0 || len(n) == minProofRSABytes && n[0] < 0x80 {
		return false
	}
	var v uint64
	for _, c := range e {
		v = v<<8 | uint64(c)
	}
	if v != 65537 {
		return false
	}
	k.e = int(v)
	return true
}

// proofJWKUse reports whether the members of a proof's jwk that say what
// the key is for (each nil when absent) allow it to sign alg.
func proofJWKUse(use, kalg, kid, ops []byte, alg string) bool {
	if use != nil {
		if u, ok := jsonText(use); !ok || string(u) != "sig" {
			return false
		}
	}
	if kalg != nil {
		if a, ok := jsonText(kalg); !ok || string(a) != alg && !(edDSA(string(a)) && edDSA(alg)) {
			return false
		}
	}
	if kid != nil {
		if _, ok := jsonText(kid); !ok {
			return false
		}
	}
	if ops != nil {
		var list []string
		if json.Unmarshal(ops, &list) != nil || !slices.Contains(list, "verify") {
			return false
		}
		for _, op := range list {
			switch op {
			case "sign", "verify", "encrypt", "decrypt", "wrapKey", "unwrapKey", "deriveKey", "deriveBits":
			default:
				return false
			}
		}
	}
	return true
}

// thumbprintIs reports whether the RFC 7638 thumbprint of k is jkt: the
// SHA-256 of its required members in lexicographic order, which, checked
// canonical as they are, are the members as written. It is keys.Thumbprint
// of the key they make.
func (k *proofJWK) thumbprintIs(jkt string) bool {
	// Room for the longest: an RSA key of 4096 bits, on the stack.
	var buf [768]byte
	b := buf[:0]
	switch k.kty {
	case "EC":
		b = append(b, `{"crv":"`...)
		b = append(b, k.crv...)
		b = append(b, `","kty":"EC","x":"`...)
		b = append(b, k.a...)
		b = append(b, `","y":"`...)
		b = append(b, k.b...)
	case "OKP":
		b = append(b, `{"crv":"Ed25519","kty":"OKP","x":"`...)
		b = append(b, k.a...)
	case "RSA":
		b = append(b, `{"e":"`...)
		b = append(b, k.b...)
		b = append(b, `","kty":"RSA","n":"`...)
		b = append(b, k.a...)
	}
	b = append(b, `"}`...)
	sum := sha256.Sum256(b)
	var enc [43]byte
	base64.RawURLEncoding.Encode(enc[:], sum[:])
	return string(enc[:]) == jkt
}

// public returns the crypto key of k, and false for an EC point that is
// not on its curve.
func (k *proofJWK) public() (any, bool) {
	switch k.kty {
	case "EC":
		point := make([]byte, 0, 1+len(k.aRaw)+len(k.bRaw))
		point = append(append(append(point, 4), k.aRaw...), k.bRaw...)
		pub, err := ecdsa.ParseUncompressedPublicKey(k.curve, point)
		return pub, err == nil
	case "OKP":
		return ed25519.PublicKey(k.aRaw), true
	case "RSA":
		return &rsa.PublicKey{N: new(big.Int).SetBytes(k.aRaw), E: k.e}, true
	}
	return nil, false
}

// sigSize returns the length of a signature by k (RFC 7518 §3.4, §3.3 and
// §3.5, RFC 8037 §3.1).
func (k *proofJWK) sigSize() int {
	switch k.kty {
	case "EC":
		return 2 * len(k.aRaw)
	case "OKP":
		return ed25519.SignatureSize
	}
	return len(k.aRaw)
}
