package observability

import (
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The keys every line of [NewLogger] starts with, and the access line's
// message.
const (
	levelKey   = "level"
	timeKey    = "ts"
	messageKey = "msg"
	accessMsg  = "request"
)

// accessEntry is one access log line: the fields [Middleware] logs, in the
// order it logs them.
type accessEntry struct {
	method, route, path string
	status              int
	duration            float64 // seconds
	bytes               int
	requestID, remoteIP string
	userAgent           string
	Entry
}

// fields appends the line's fields to f, for a zap logger.
func (a *accessEntry) fields(f []zap.Field) []zap.Field {
	f = append(f,
		zap.String("method", a.method),
		zap.String("route", a.route),
		zap.String("path", a.path),
		zap.Int("status", a.status),
		zap.Float64("duration", a.duration),
		zap.Int("bytes", a.bytes),
		zap.String("request_id", a.requestID),
		zap.String("remote_ip", a.remoteIP),
		zap.String("user_agent", a.userAgent),
	)
	if a.subject != "" {
		f = append(f, zap.String("sub", a.subject))
	}
	if a.authFailure != "" {
		f = append(f, zap.String("auth_failure", a.authFailure))
	}
	if a.hasPlants {
		f = append(f, zap.Int("plants", a.plants))
	}
	return f
}

// appendJSON appends the line as NewLogger's JSON encoder writes it for
// lvl at t with [accessEntry.fields], byte for byte, newline included:
// the access log is most of what the service logs, and zap's general
// encoder costs several times as much.
func (a *accessEntry) appendJSON(dst []byte, lvl zapcore.Level, t time.Time) []byte {
	dst = append(dst, `{"`+levelKey+`":"`...)
	dst = append(dst, lvl.String()...) // lower case, as LowercaseLevelEncoder
	dst = append(dst, `","`+timeKey+`":"`...)
	dst = appendTimestamp(dst, t)
	dst = append(dst, `","`+messageKey+`":"`+accessMsg+`","method":`...)
	dst = appendLogString(dst, a.method)
	dst = append(dst, `,"route":`...)
	dst = appendLogString(dst, a.route)
	dst = append(dst, `,"path":`...)
	dst = appendLogString(dst, a.path)
	dst = append(dst, `,"status":`...)
	dst = strconv.AppendInt(dst, int64(a.status), 10)
	dst = append(dst, `,"duration":`...)
	dst = appendLogFloat(dst, a.duration)
	dst = append(dst, `,"bytes":`...)
	dst = strconv.AppendInt(dst, int64(a.bytes), 10)
	dst = append(dst, `,"request_id":`...)
	dst = appendLogString(dst, a.requestID)
	dst = append(dst, `,"remote_ip":`...)
	dst = appendLogString(dst, a.remoteIP)
	dst = append(dst, `,"user_agent":`...)
	dst = appendLogString(dst, a.userAgent)
	if a.subject != "" {
		dst = append(dst, `,"sub":`...)
		dst = appendLogString(dst, a.subject)
	}
	if a.authFailure != "" {
		dst = append(dst, `,"auth_failure":`...)
		dst = appendLogString(dst, a.authFailure)
	}
	if a.hasPlants {
		dst = append(dst, `,"plants":`...)
		dst = strconv.AppendInt(dst, int64(a.plants), 10)
	}
	return append(dst, "}\n"...)
}

// appendTimestamp appends t in UTC as timeLayout formats it
// (2026-11-23T09:36:48.123Z), without time's general formatter.
func appendTimestamp(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(dst, timeLayout)
	}
	hour, minute, sec := t.Clock()
	ms := t.Nanosecond() / 1e6
	return append(dst,
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+month/10), byte('0'+month%10), '-',
		byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':',
		byte('0'+minute/10), byte('0'+minute%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), '.',
		byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
}

// appendLogFloat appends f as zap's JSON encoder does.
func appendLogFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"+Inf"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Inf"`...)
	}
	return strconv.AppendFloat(dst, f, 'f', -1, 64)
}

// logSafe tells which ASCII bytes appendLogString copies as they are.
var logSafe = func() (safe [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		safe[b] = b != '\\' && b != '"'
	}
	return safe
}()

// appendLogString appends s quoted as zap's JSON encoder does: \ and "
// escaped, \n, \r and \t in short form, other control characters as \u00XX
// and each byte of invalid UTF-8 as \ufffd.
func appendLogString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	last := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			dst = append(dst, s[last:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			last = i
			continue
		}
		if logSafe[b] {
			i++
			continue
		}
		dst = append(dst, s[last:i]...)
		switch b {
		case '\\', '"':
			dst = append(dst, '\\', b)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
		}
		i++
		last = i
	}
	dst = append(dst, s[last:]...)
	return append(dst, '"')
}
