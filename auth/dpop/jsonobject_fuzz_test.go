package dpop

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzJSONObject holds jsonObject to encoding/json: a document is read as
// an object exactly when json.Unmarshal reads it into a map, and then its
// members, the last of a repeated name winning, are the map's: names as
// encoding/json unescapes them, values byte for byte the raw text it
// keeps; string values read by jsonText are those it decodes.
func FuzzJSONObject(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { "a" : 1 , "b":[1,{"c":"}"}] } `, `{"typ":"dpop+jwt","alg":"ES256","jwk":{"kty":"EC","x":"a\"b"}}`,
		`{"\u0074yp":"x","typ":"y"}`, `{"a":"\ud800"}`, `{"a":"\u00e9\/"}`, "{\"a\xff\":1}", `[1]`, `{"a":1,}`, `{"a":tru}`,
		`{"a":-1.5e3,"b":null,"c":false,"d":true}`, `{"a":"x"} {"b":1}`, `"x"`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var want map[string]json.RawMessage
		wantOK := json.Unmarshal(doc, &want) == nil && want != nil
		o, ok := newJSONObject(doc)
		if ok != wantOK {
			t.Fatalf("newJSONObject(%q) = %t; encoding/json reads an object: %t", doc, ok, wantOK)
		}
		if !ok {
			return
		}
		got := map[string][]byte{}
		n := 0
		for name, value, ok := o.next(); ok; name, value, ok = o.next() {
			if n++; n > len(doc) {
				t.Fatalf("newJSONObject(%q) never ends", doc)
			}
			got[string(jsonName(name))] = value
		}
		if len(got) != len(want) {
			t.Fatalf("newJSONObject(%q) read %d names; encoding/json %d", doc, len(got), len(want))
		}
		for name, w := range want {
			g, ok := got[name]
			if !ok || !bytes.Equal(g, w) {
				t.Fatalf("newJSONObject(%q) member %q = %q; encoding/json %q", doc, name, g, w)
			}
			var s string
			text, isString := jsonText(g)
			if wantString := w[0] == '"' && json.Unmarshal(w, &s) == nil; isString != wantString || isString && string(text) != s {
				t.Fatalf("jsonText(%q) = %q, %t; encoding/json %q, %t", g, text, isString, s, wantString)
			}
		}
	})
}
