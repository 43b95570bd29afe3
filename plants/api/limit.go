package api

import (
	"iter"
	"math"
	"net/http"
	"net/url"
	"strings"

	"github.com/plantstore/plantstore/plants"
)

// ErrInvalidLimit reports a limit query parameter the API refuses: 400.
// The errors [ParseLimit] returns match it ([errors.Is]) and carry the
// reason. Reasons are fixed texts: they never repeat the request.
var ErrInvalidLimit error = &statusError{status: http.StatusBadRequest, msg: "invalid limit"}

// The reasons a limit is refused.
var (
	errLimitEmpty    = invalidLimit("empty value; want an integer from 0 to 2147483647")
	errLimitSyntax   = invalidLimit("want an integer from 0 to 2147483647, digits only")
	errLimitRange    = invalidLimit("over 2147483647")
	errLimitTwice    = invalidLimit("given more than once")
	errLimitEncoding = invalidLimit("malformed percent-encoding")
)

// invalidLimit returns the [ErrInvalidLimit] of a reason.
func invalidLimit(reason string) error {
	return &statusError{status: http.StatusBadRequest, msg: "invalid limit: " + reason, is: ErrInvalidLimit}
}

// ParseLimit returns the limit given in rawQuery, a URL's raw query string,
// or [plants.NoLimit] when there is none. The query is read the way
// [url.ParseQuery] reads it: pairs separated by "&", names and values
// percent-decoded with "+" as a space, so "limit=%31" is 1 and "limit=+1"
// has a space. The value is ASCII digits only (leading zeros allowed), from
// 0 to 2147483647. An empty value ("limit=" or a bare "limit"), a sign, a
// space, any other character, a larger value or a second limit parameter
// gives an error wrapping [ErrInvalidLimit]. Other parameters are ignored,
// even when malformed.
func ParseLimit(rawQuery string) (int, error) {
	limit, found := plants.NoLimit, false
	for rawValue := range paramValues(rawQuery, "limit") {
		if found {
			return 0, errLimitTwice
		}
		found = true
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			return 0, errLimitEncoding
		}
		if limit, err = parseDigits(value); err != nil {
			return 0, err
		}
	}
	return limit, nil
}

// paramValues yields the raw (still percent-encoded) values of the
// parameters of rawQuery whose names decode to name, in order: the one
// reading of a query that limit and after share.
func paramValues(rawQuery, name string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for rawQuery != "" {
			var pair string
			pair, rawQuery, _ = strings.Cut(rawQuery, "&")
			rawName, rawValue, _ := strings.Cut(pair, "=")
			if isParam(rawName, name) && !yield(rawValue) {
				return
			}
		}
	}
}

// isParam reports whether the raw name of a query parameter decodes to
// name. A name that holds neither name nor a "%" cannot: the fast path.
func isParam(rawName, name string) bool {
	if !strings.Contains(rawName, name) && !strings.Contains(rawName, "%") {
		return false
	}
	decoded, err := url.QueryUnescape(rawName)
	return err == nil && decoded == name
}

// parseDigits parses a limit value: ASCII digits, at most math.MaxInt32.
func parseDigits(s string) (int, error) {
	if s == "" {
		return 0, errLimitEmpty
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, errLimitSyntax
		}
		if n = n*10 + int(c-'0'); n > math.MaxInt32 {
			// Keep checking that the rest is digits: syntax errors first.
			for j := i + 1; j < len(s); j++ {
				if s[j] < '0' || s[j] > '9' {
					return 0, errLimitSyntax
				}
			}
			return 0, errLimitRange
		}
	}
	return n, nil
}
