package observability

import (
	"encoding/hex"
	"math"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap/zapcore"
)

// accessMsg is the msg of the access line.
const accessMsg = "request"

// AccessLog writes the access line, one per request, for [Middleware]. It
// is the only encoder of that line: the line is most of what the service
// logs, and zap's general encoder costs several times as much. In the json
// format the line is a JSON object with the keys of every other line (level,
// ts, msg) first; in the console format it is laid out as zap's console
// lines are: ts, level and msg separated by tabs, then the fields as a JSON
// object. Get one from [NewLogger]. A nil *AccessLog writes nothing.
type AccessLog struct {
	out     lineWriter
	level   zapcore.Level
	console bool
}

// A lineWriter writes one line stamped t. A [LogOutput] takes t as the time
// of the write, instead of reading the clock again.
type lineWriter interface {
	WriteAt(p []byte, t time.Time) (int, error)
}

// unstamped is the lineWriter of an output that keeps no time.
type unstamped struct{ zapcore.WriteSyncer }

func (u unstamped) WriteAt(p []byte, _ time.Time) (int, error) { return u.Write(p) }

// accessEntry is one access log line: the fields [Middleware] logs, in the
// order it logs them.
type accessEntry struct {
	method, route, path string
	status              int
	duration            float64 // seconds
	bytes               int
	requestID, remoteIP string
	userAgent           string
	trace               trace.SpanContext // of the server span; invalid with tracing off
	Entry
}

// enabled reports whether a line at lvl is written.
func (l *AccessLog) enabled(lvl zapcore.Level) bool {
	return l != nil && lvl >= l.level
}

// write writes a at lvl, stamped t, using buf; it returns buf for reuse.
func (l *AccessLog) write(buf []byte, a *accessEntry, lvl zapcore.Level, t time.Time) []byte {
	buf = l.appendLine(buf[:0], a, lvl, t)
	_, _ = l.out.WriteAt(buf, t) // nobody to tell: zap drops write errors too
	return buf
}

// appendLine appends the line for a at lvl and t, newline included.
func (l *AccessLog) appendLine(dst []byte, a *accessEntry, lvl zapcore.Level, t time.Time) []byte {
	if l.console {
		dst = appendTimestamp(dst, t)
		dst = append(dst, '\t')
		dst = append(dst, lvl.String()...)
		dst = append(dst, "\t"+accessMsg+"\t{"...)
	} else {
		dst = append(dst, `{"`+levelKey+`":"`...)
		dst = append(dst, lvl.String()...) // lower case, as the logger's
		dst = append(dst, `","`+timeKey+`":"`...)
		dst = appendTimestamp(dst, t)
		dst = append(dst, `","`+messageKey+`":"`+accessMsg+`",`...)
	}
	dst = append(dst, `"method":`...)
	dst = AppendJSONString(dst, a.method)
	dst = append(dst, `,"route":`...)
	dst = AppendJSONString(dst, a.route)
	dst = append(dst, `,"path":`...)
	dst = AppendJSONString(dst, a.path)
	dst = append(dst, `,"status":`...)
	dst = strconv.AppendInt(dst, int64(a.status), 10)
	dst = append(dst, `,"duration":`...)
	dst = appendLogFloat(dst, a.duration)
	dst = append(dst, `,"bytes":`...)
	dst = strconv.AppendInt(dst, int64(a.bytes), 10)
	dst = append(dst, `,"request_id":`...)
	dst = AppendJSONString(dst, a.requestID)
	dst = append(dst, `,"remote_ip":`...)
	dst = AppendJSONString(dst, a.remoteIP)
	dst = append(dst, `,"user_agent":`...)
	dst = AppendJSONString(dst, a.userAgent)
	if a.issuer != "" {
		dst = append(dst, `,"iss":`...)
		dst = AppendJSONString(dst, a.issuer)
	}
	if a.subject != "" {
		dst = append(dst, `,"sub":`...)
		dst = AppendJSONString(dst, a.subject)
	}
	if a.introspected {
		dst = append(dst, `,"introspected":true`...)
	}
	if a.authFailure != "" {
		dst = append(dst, `,"auth_failure":`...)
		dst = AppendJSONString(dst, a.authFailure)
	}
	if a.audit != "" {
		dst = append(dst, `,"audit":`...)
		dst = AppendJSONString(dst, a.audit)
	}
	if a.claimRule != "" {
		dst = append(dst, `,"claim_rule":`...)
		dst = AppendJSONString(dst, a.claimRule)
	}
	if a.hasPlants {
		dst = append(dst, `,"plants":`...)
		dst = strconv.AppendInt(dst, int64(a.plants), 10)
	}
	if a.trace.IsValid() {
		tid, sid := a.trace.TraceID(), a.trace.SpanID()
		dst = append(dst, `,"trace_id":"`...)
		dst = hex.AppendEncode(dst, tid[:])
		dst = append(dst, `","span_id":"`...)
		dst = hex.AppendEncode(dst, sid[:])
		dst = append(dst, '"')
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

// appendLogFloat appends f as a JSON number, or as the strings zap uses
// for the values JSON has no number for.
func appendLogFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"+Inf"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Inf"`...)
	}
	// A duration under a second, as the middleware makes them: a whole
	// number n of nanoseconds over 1e9. The shortest decimal that reads
	// back as that float is n's nine digits after "0." with the trailing
	// zeros dropped (any other decimal of at most nine places is at least
	// 1e-9 away, and the float's spacing under 1 is below 2^-52), which is
	// what AppendFloat finds, written here without its search.
	if f >= 0 && f < 1 {
		if n := int64(f*1e9 + 0.5); n < 1e9 && float64(n)/1e9 == f {
			return appendNanos(dst, n)
		}
	}
	return strconv.AppendFloat(dst, f, 'f', -1, 64)
}

// appendNanos appends n nanoseconds (0 <= n < 1e9) in seconds, as
// strconv.AppendFloat(dst, float64(n)/1e9, 'f', -1, 64) does.
func appendNanos(dst []byte, n int64) []byte {
	if n == 0 {
		return append(dst, '0')
	}
	var digits [11]byte
	digits[0], digits[1] = '0', '.'
	for i := 10; i >= 2; i-- {
		digits[i] = byte('0' + n%10)
		n /= 10
	}
	end := len(digits)
	for digits[end-1] == '0' {
		end--
	}
	return append(dst, digits[:end]...)
}
