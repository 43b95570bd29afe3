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
	for rawValue := range paramValues(rawQuery, "after") {
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

// appendNextLink appends the Link header value of the page after the one
// that ended with the plant of key last to dst: the request's query with
// after set to the cursor of last (in place of the caller's after, which
// goes; every other parameter stays as the caller sent it, limit
// included), on base + "/plants", where base is the absolute URL prefix of
// the API (-public-url without its trailing "/") or "" for a relative
// reference.
func appendNextLink(dst []byte, base, rawQuery string, last plants.Key) []byte {
	dst = append(dst, '<')
	dst = append(dst, base...)
	dst = append(dst, "/plants?"...)
	for rawQuery != "" {
		var pair string
		pair, rawQuery, _ = strings.Cut(rawQuery, "&")
		if pair == "" {
			continue
		}
		if rawName, _, _ := strings.Cut(pair, "="); isParam(rawName, "after") {
			continue
		}
		// The caller's bytes, but never one that would end the link or
		// the header: those are escaped.
		dst = appendLinkSafe(dst, pair)
		dst = append(dst, '&')
	}
	dst = append(dst, "after="...)
	dst = last.AppendCursor(dst) // base64url: nothing to escape
	return append(dst, `>; rel="next"`...)
}

// appendLinkSafe appends s with every byte that may not appear in a URI
// reference inside a Link header's <...> (controls, space, non-ASCII and
// < > " \ ^ ` { | }) percent-encoded. Go's server hands over the query as the
// client sent it, so only what the client escaped is escaped.
func appendLinkSafe(dst []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '<' || c == '>' || c == '"' || c == '\\' || c == '^' || c == '`' || c == '{' || c == '|' || c == '}' {
			dst = append(dst, '%', hex[c>>4], hex[c&15])
			continue
		}
		dst = append(dst, c)
	}
	return dst
}
