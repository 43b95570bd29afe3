package dpop

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// jsonObject reads the members of a JSON object one by one, in place: the
// names and values it returns are slices of the document, so that reading
// an object of many members costs no allocation per member (a DPoP proof's
// header and claims, which any caller may fill to their 4 KiB with
// members). encoding/json checks the document first; what is left here
// is to find where each member starts and ends, in a document known to be
// valid.
type jsonObject struct {
	b []byte
	i int // where the next member, or the closing brace, starts
}

// newJSONObject returns the reader of b, and false unless b is valid JSON
// (encoding/json's json.Valid) holding an object.
func newJSONObject(b []byte) (jsonObject, bool) {
	if !json.Valid(b) {
		return jsonObject{}, false
	}
	return innerObject(b[skipSpace(b, 0):])
}

// innerObject returns the reader of raw, a value of a valid JSON
// document, and false unless it is an object.
func innerObject(raw []byte) (jsonObject, bool) {
	if len(raw) == 0 || raw[0] != '{' {
		return jsonObject{}, false
	}
	return jsonObject{b: raw, i: 1}, true
}

// next returns the next member: its name as written between the quotes
// (see [jsonName]) and its value as written, or false after the last one.
func (o *jsonObject) next() (name, value []byte, ok bool) {
	b := o.b
	i := skipSpace(b, o.i)
	if i < len(b) && b[i] == ',' {
		i = skipSpace(b, i+1)
	}
	if i >= len(b) || b[i] != '"' {
		o.i = len(b)
		return nil, nil, false
	}
	end := stringEnd(b, i)
	name = b[i+1 : end-1]
	i = skipSpace(b, end)
	if i >= len(b) || b[i] != ':' {
		o.i = len(b)
		return nil, nil, false
	}
	i = skipSpace(b, i+1)
	end = valueEnd(b, i)
	o.i = end
	return name, b[i:end], true
}

// skipSpace returns the first position from i that is not JSON white
// space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the position after the string that starts at b[i],
// a quote.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd returns the position after the value that starts at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	// A number, true, false or null.
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

// jsonName returns a member name as encoding/json reads it: the text
// between the quotes, or, when it holds an escape, the text unescaped.
// Names are compared exactly, as JOSE wants (RFC 7515 §4, RFC 7517 §4).
func jsonName(raw []byte) []byte {
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return raw
	}
	var s string
	// raw sits between the quotes of a valid JSON string.
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	if json.Unmarshal(q, &s) != nil {
		return nil
	}
	return []byte(s)
}

// jsonText returns the string a JSON value holds, as encoding/json reads
// it, and false when the value is absent or not a string. Without an
// escape it is a slice of raw.
func jsonText(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return nil, false
	}
	in := raw[1 : len(raw)-1]
	if bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		return in, true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}
