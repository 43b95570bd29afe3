package api

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/plantstore/plantstore/plants"
)

// ErrInvalidAfter reports an after query parameter the API refuses: 400.
// The errors [ParseAfter] returns match it ([errors.Is]) and carry the
// reason, a fixed text that never repeats the request.
var ErrInvalidAfter error = &statusError{status: http.StatusBadRequest, msg: "invalid after"}

// The reasons a cursor is refused.
var (
	errAfterCursor   = invalidAfter("not a cursor from a Link header of this API")
	errAfterTwice    = invalidAfter("given more than once")
	errAfterEncoding = invalidAfter("malformed percent-encoding")
)

// invalidAfter returns the [ErrInvalidAfter] of a reason.
func invalidAfter(reason string) error {
	return &statusError{status: http.StatusBadRequest, msg: "invalid after: " + reason, is: ErrInvalidAfter}
}

// ParseAfter returns the key of the cursor given as the after parameter of
// rawQuery, read as [ParseLimit] reads limit, or the zero key when there is
// none. A value that [plants.ParseCursor] refuses (an empty one included)
// or a second after parameter gives an error wrapping [ErrInvalidAfter].
func ParseAfter(rawQuery string) (plants.Key, error) {
	var (
		key   plants.Key
		found bool
	)
	for rawQuery != "" {
		var pair string
		pair, rawQuery, _ = strings.Cut(rawQuery, "&")
		rawName, rawValue, _ := strings.Cut(pair, "=")
		if !strings.Contains(rawName, "after") && !strings.Contains(rawName, "%") {
			continue // fast path: no other name decodes to "after"
		}
		if name, err := url.QueryUnescape(rawName); err != nil || name != "after" {
			continue
		}
		if found {
			return plants.Key{}, errAfterTwice
		}
		found = true
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			return plants.Key{}, errAfterEncoding
		}
		if key, err = plants.ParseCursor(value); err != nil {
			return plants.Key{}, errAfterCursor
		}
	}
	return key, nil
}

// nextLink returns the Link header value of the page after the one that
// ended with the plant of key last: the request's query with after set to
// the cursor of last (in place of the caller's after, which goes; every
// other parameter stays as the caller sent it, limit included), on base +
// "/plants", where base is the absolute URL prefix of the API (-public-url
// without its trailing "/") or "" for a relative reference.
func nextLink(base, rawQuery string, last plants.Key) string {
	var b strings.Builder
	b.WriteString("<")
	b.WriteString(base)
	b.WriteString("/plants?")
	first := true
	for rawQuery != "" {
		var pair string
		pair, rawQuery, _ = strings.Cut(rawQuery, "&")
		rawName, _, _ := strings.Cut(pair, "=")
		if name, err := url.QueryUnescape(rawName); err == nil && name == "after" {
			continue
		}
		if pair == "" {
			continue
		}
		if !first {
			b.WriteByte('&')
		}
		first = false
		// The caller's bytes, but never a character that would end the
		// link or the header: those are escaped.
		writeLinkSafe(&b, pair)
	}
	if !first {
		b.WriteByte('&')
	}
	b.WriteString("after=")
	b.WriteString(last.Cursor()) // base64url: nothing to escape
	b.WriteString(`>; rel="next"`)
	return b.String()
}

// writeLinkSafe writes s with every byte that may not appear in a URI
// reference inside a Link header's <...> (controls, space, '<', '>', '"',
// and non-ASCII) percent-encoded. Go's server hands over the query as the
// client sent it, so only what the client escaped is escaped.
func writeLinkSafe(b *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '<' || c == '>' || c == '"' || c == '\\' || c == '^' || c == '`' || c == '{' || c == '|' || c == '}' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
}
