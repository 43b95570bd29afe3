// Package setting is how the service's packages refuse a value the
// operator configured: one error type, [Error], that names the setting by
// its key (and the issuer and the file line, when there are some), so that
// the one place that reports it can name the flag, the PLANTSTORE_*
// variable or the line the value came from; and how a setting that may
// hold a secret is shown ([RedactURL]). It imports the standard library
// only, so that every package of the module, the storage adapters
// included, may use it without linking anything else; it sits beside
// observability, the layer every package may import, because what it
// shapes is what the operator sees when a start is refused.
package setting

import (
	"fmt"
	"net/url"
	"strconv"
)

// An Error is a configured value that a constructor refuses.
//
// Key is the setting's key: the snake_case key of its row in the table of
// settings, which is also its key in the issuers file ("max_lifetime",
// "redis_url"); it is empty for a problem of a file that is no one
// setting's (a line that does not parse). Issuer is the name of the issuer
// whose setting it is, when it is one named issuer's. File and Line say
// where the value was read, when it came from a file (Line 0: the file as
// a whole). Err says what is wrong with the value; it never holds a
// secret the value carries.
type Error struct {
	Key    string
	Issuer string
	File   string
	Line   int
	Err    error
}

// Errorf returns the *Error of the setting key, with the problem
// formatted as by fmt.Errorf.
func Errorf(key, format string, a ...any) *Error {
	return &Error{Key: key, Err: fmt.Errorf(format, a...)}
}

// Error returns "[FILE[:LINE]: ][issuer ISSUER: ][KEY: ]problem".
func (e *Error) Error() string {
	s := ""
	if e.File != "" {
		s = e.File + ": "
		if e.Line > 0 {
			s = e.File + ":" + strconv.Itoa(e.Line) + ": "
		}
	}
	if e.Issuer != "" {
		s += "issuer " + e.Issuer + ": "
	}
	if e.Key != "" {
		s += e.Key + ": "
	}
	return s + e.Err.Error()
}

// Unwrap returns e.Err.
func (e *Error) Unwrap() error { return e.Err }

// RedactURL returns s with the secrets a URL may carry replaced by
// "xxxxx": the password of its userinfo and its query string, as in
// https://user:xxxxx@idp.example.com/jwks?xxxxx. The user name stays, so
// that an error about it (a role the database does not know) names it.
// The fragment is dropped. A string that does not parse as a URL is
// returned as "xxxxx" whole.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "xxxxx"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = "xxxxx", false
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}
