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
// reference. The parameters copied, once escaped, take at most
// maxLinkQuery bytes: past that only limit is kept, so that the header
// stays small whatever the query.
func appendNextLink(dst []byte, base, rawQuery string, last plants.Key) []byte {
	dst = append(dst, '<')
	dst = append(dst, base...)
	dst = append(dst, "/plants?"...)
	start := len(dst)
	dst = appendLinkQuery(dst, rawQuery, false)
	if len(dst)-start > maxLinkQuery {
		dst = appendLinkQuery(dst[:start], rawQuery, true)
	}
	dst = append(dst, "after="...)
	dst = last.AppendCursor(dst) // base64url: nothing to escape
	return append(dst, `>; rel="next"`...)
}

// maxLinkQuery bounds the parameters a Link copies from the request, as
// escaped: past it, the caller's other parameters are left out.
const maxLinkQuery = 1 << 10

// appendLinkQuery appends the pairs of rawQuery but after (limit's alone
// when onlyLimit is set), each escaped and followed by "&".
func appendLinkQuery(dst []byte, rawQuery string, onlyLimit bool) []byte {
	for rawQuery != "" {
		var pair string
		pair, rawQuery, _ = strings.Cut(rawQuery, "&")
		if pair == "" {
			continue
		}
		rawName, _, _ := strings.Cut(pair, "=")
		if isParam(rawName, "after") || onlyLimit && !isParam(rawName, "limit") {
			continue
		}
		// The caller's bytes, but never one that would end the link or
		// the header, or split it where a naive reader splits links: those
		// are escaped.
		dst = appendLinkSafe(dst, pair)
		dst = append(dst, '&')
	}
	return dst
}

// appendLinkSafe appends s with every byte that may not appear in a URI
// reference inside a Link header's <...> (controls, space, non-ASCII and
// < > " \ ^ ` { | }), and the , and ; that readers of Link split on,
// percent-encoded. Go's server hands over the query as the client sent
// it, so only what the client escaped, or could have, is escaped: a
// server decodes %2C and %3B in a query as it reads , and ;.
func appendLinkSafe(dst []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '<' || c == '>' || c == '"' || c == '\\' || c == '^' || c == '`' || c == '{' || c == '|' || c == '}' || c == ',' || c == ';' {
			dst = append(dst, '%', hex[c>>4], hex[c&15])
			continue
		}
		dst = append(dst, c)
	}
	return dst
}
