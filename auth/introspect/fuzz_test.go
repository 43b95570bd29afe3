package introspect

import (
	"encoding/json"
	"testing"
)

// FuzzAnswer: whatever an introspection endpoint answers, a token counts
// as active only when the answer is a JSON object whose active member is
// the JSON true, about this token, and not of a refresh or ID token; the
// claims it yields carry neither active nor the token itself, and an iss.
func FuzzAnswer(f *testing.F) {
	const token = "opaque-token-1"
	for _, s := range []string{
		`{"active":true,"sub":"alice","exp":4102444800}`,
		`{"active":"true","sub":"alice"}`,
		`{"sub":"alice"}`,
		`{"active":1}`,
		`{"active":false}`,
		`{"active":true,"token":"another"}`,
		`{"active":true,"token":"opaque-token-1","iss":"https://other.example"}`,
		`{"active":true,"token_type":"refresh_token"}`,
		`{"active":true,"token_type":"urn:ietf:params:oauth:token-type:id_token"}`,
		`{"active":true,"token_type":7}`,
		`{"active":true,"active":false}`,
		`[true]`, `null`, `"active"`, ``,
	} {
		f.Add([]byte(s))
	}
	tr := &Trust{issuer: "https://idp.example"}
	f.Fuzz(func(t *testing.T, body []byte) {
		claims, refusal, err := tr.answer(body, token)
		if err != nil || refusal != nil {
			if claims != nil {
				t.Fatalf("refused (%v, %v) with claims %v", refusal, err, claims)
			}
			return
		}
		var raw map[string]json.RawMessage
		if json.Unmarshal(body, &raw) != nil {
			t.Fatalf("accepted an answer that is not a JSON object: %q", body)
		}
		var active any
		if json.Unmarshal(raw["active"], &active) != nil || active != true {
			t.Fatalf("accepted an answer whose active is %s", raw["active"])
		}
		if tok, ok := raw["token"]; ok {
			var s string
			if json.Unmarshal(tok, &s) != nil || s != token {
				t.Fatalf("accepted an answer about another token: %s", tok)
			}
		}
		if tt, ok := claims["token_type"].(string); ok && notAccessToken(tt) {
			t.Fatalf("accepted a token of type %q", tt)
		}
		if _, ok := claims["active"]; ok {
			t.Fatal("the claims keep active")
		}
		if _, ok := claims["token"]; ok {
			t.Fatal("the claims keep the token")
		}
		if _, ok := claims["iss"]; !ok {
			t.Fatal("the claims have no iss")
		}
	})
}
