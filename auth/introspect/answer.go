package introspect

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"slices"
	"strings"

	"github.com/golang-jwt/jwt/v5"

	"github.com/plantstore/plantstore/auth/keys"
)

// jwtAnswerType is the media type of a signed answer (RFC 9701 §4), which
// the request asks for in Accept when the issuer signs its answers.
const jwtAnswerType = "application/token-introspection+jwt"

// verifyAnswer returns the answer a signed one (RFC 9701) carries, its
// token_introspection member, once it verified: of the media type; a JWS
// whose typ is token-introspection+jwt, whose alg is one of the issuer's,
// with no crit, signed by one of the issuer's keys; whose iss is the
// issuer and whose aud names this client. An unsigned answer is refused.
func (t *Trust) verifyAnswer(ctx context.Context, contentType string, body []byte) ([]byte, error) {
	if mt, _, _ := mime.ParseMediaType(contentType); mt != jwtAnswerType {
		return nil, errors.New("the answer is not signed (" + jwtAnswerType + " asked for)")
	}
	parser := jwt.NewParser(jwt.WithValidMethods(t.algorithms), jwt.WithoutClaimsValidation(), jwt.WithStrictDecoding())
	tok, err := parser.ParseWithClaims(strings.TrimSpace(string(body)), jwt.MapClaims{}, func(tok *jwt.Token) (any, error) {
		if _, ok := tok.Header["crit"]; ok {
			return nil, errors.New("crit header")
		}
		typ, _ := tok.Header["typ"].(string)
		if strings.TrimPrefix(strings.ToLower(typ), "application/") != "token-introspection+jwt" {
			return nil, errors.New("typ is not token-introspection+jwt")
		}
		kid, _ := tok.Header["kid"].(string)
		if raw, ok := tok.Header["kid"]; ok {
			if _, isString := raw.(string); !isString {
				return nil, errors.New("kid is not a string")
			}
		}
		alg := tok.Method.Alg()
		k, err := t.keys.Key(ctx, kid, alg)
		if err != nil {
			return nil, err
		}
		if !k.Fits(alg) {
			return nil, keys.ErrKeyMismatch
		}
		return k.Public, nil
	})
	if err != nil {
		return nil, errors.New("the signed answer does not verify: " + err.Error())
	}
	claims := tok.Claims.(jwt.MapClaims)
	if iss, _ := claims["iss"].(string); t.issuer == "" || iss != t.issuer {
		return nil, errors.New("the signed answer is not the issuer's")
	}
	var auds []string
	switch aud := claims["aud"].(type) {
	case string:
		auds = []string{aud}
	case []any:
		for _, a := range aud {
			if s, ok := a.(string); ok {
				auds = append(auds, s)
			}
		}
	}
	if !slices.Contains(auds, t.cfg.ClientID) {
		return nil, errors.New("the signed answer is for another client")
	}
	inner, ok := claims["token_introspection"].(map[string]any)
	if !ok {
		return nil, errors.New("the signed answer has no token_introspection object")
	}
	return json.Marshal(inner)
}
