package api_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/api"
)

// limitOracle is the SPEC rule for the limit parameter, written apart from
// ParseLimit: the query is split into pairs at "&" and each name and value
// is decoded as url.ParseQuery decodes them; pairs whose name does not
// decode are not a limit; no limit pair means no limit, two are an error;
// the one value must be 1 or more ASCII digits whose value fits an int32.
func limitOracle(rawQuery string) (limit int, ok bool) {
	var values []string
	badValue := false
	for _, pair := range strings.Split(rawQuery, "&") {
		if pair == "" {
			continue
		}
		name, value, _ := strings.Cut(pair, "=")
		n, err := url.QueryUnescape(name)
		if err != nil || n != "limit" {
			continue
		}
		v, err := url.QueryUnescape(value)
		if err != nil {
			badValue = true
		}
		values = append(values, v)
	}
	switch {
	case len(values) == 0:
		return plants.NoLimit, true
	case len(values) > 1, badValue:
		return 0, false
	}
	v := values[0]
	if v == "" || strings.Trim(v, "0123456789") != "" {
		return 0, false
	}
	digits := strings.TrimLeft(v, "0")
	const max = "2147483647"
	if len(digits) > len(max) || len(digits) == len(max) && digits > max {
		return 0, false
	}
	n := 0
	for _, c := range digits {
		n = n*10 + int(c-'0')
	}
	return n, true
}

// FuzzParseLimit checks ParseLimit against limitOracle on any query string:
// it accepts exactly what the SPEC accepts, with the same value, and every
// refusal is an ErrInvalidLimit whose message is one of the fixed texts
// (never a piece of the query).
func FuzzParseLimit(f *testing.F) {
	for _, seed := range []string{
		"", "limit=0", "limit=1", "limit=10", "limit=2147483647", "limit=2147483648",
		"limit=00000000000000000000000000002147483647", "limit=99999999999999999999",
		"limit=", "limit", "limit=-1", "limit=+1", "limit=%2B1", "limit=1%20", "limit=%31",
		"limit=1&limit=1", "l%69mit=5", "limit=0x10", "limit=1e3", "limit=%zz", "%zz=1&limit=3",
		"a=1&limit=7&b=%", "limit=１", "limit=1;x=2", "limit=%00", "LIMIT=1", "limit%3D1",
	} {
		f.Add(seed)
	}
	// The messages of the refusals, learnt from inputs that break each rule.
	messages := map[string]bool{}
	for _, bad := range []string{"limit=", "limit=x", "limit=99999999999", "limit=1&limit=2", "limit=%zz"} {
		_, err := api.ParseLimit(bad)
		if err == nil {
			f.Fatalf("ParseLimit(%q) = nil error, want one", bad)
		}
		messages[err.Error()] = true
	}
	f.Fuzz(func(t *testing.T, rawQuery string) {
		got, err := api.ParseLimit(rawQuery)
		want, ok := limitOracle(rawQuery)
		if ok {
			if err != nil || got != want {
				t.Fatalf("ParseLimit(%q) = %d, %v; want %d, nil", rawQuery, got, err, want)
			}
			return
		}
		if err == nil {
			t.Fatalf("ParseLimit(%q) = %d, nil; want an error", rawQuery, got)
		}
		if !errors.Is(err, api.ErrInvalidLimit) {
			t.Fatalf("ParseLimit(%q) error %v does not wrap ErrInvalidLimit", rawQuery, err)
		}
		if !messages[err.Error()] {
			t.Fatalf("ParseLimit(%q) error %q is not one of the fixed messages %v", rawQuery, err, messages)
		}
	})
}
