package observability

import (
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// timeLayout is RFC 3339 in UTC with milliseconds, for example
// 2026-11-23T09:36:48.123Z: sortable as text, and parsed as is by log
// pipelines that would need a hint for epoch seconds.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// NewLogger returns a logger writing to w at level (debug, info, warn or
// error) in format (json or console). Each line carries the keys ts (RFC
// 3339 UTC with milliseconds), level (lower case) and msg, then the fields
// of the call; there is no caller, stack trace or sampling, so the access
// log line has exactly the keys [Middleware] gives it and no line is
// dropped. Writes to w are serialized, so w need not be safe for
// concurrent use. When w is a [BatchWriter], only the access lines of
// [Middleware] are batched; any other line is written before the call
// that logs it returns. An unknown level or format is an error naming the value.
func NewLogger(level, format string, w io.Writer) (*zap.Logger, error) {
	var lvl zapcore.Level
	switch level {
	case "debug":
		lvl = zapcore.DebugLevel
	case "info":
		lvl = zapcore.InfoLevel
	case "warn":
		lvl = zapcore.WarnLevel
	case "error":
		lvl = zapcore.ErrorLevel
	default:
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}

	layout := zapcore.TimeEncoderOfLayout(timeLayout)
	cfg := zapcore.EncoderConfig{
		TimeKey:       timeKey,
		LevelKey:      levelKey,
		MessageKey:    messageKey,
		NameKey:       "logger",
		StacktraceKey: zapcore.OmitKey,
		CallerKey:     zapcore.OmitKey,
		FunctionKey:   zapcore.OmitKey,
		LineEnding:    zapcore.DefaultLineEnding,
		EncodeLevel:   zapcore.LowercaseLevelEncoder,
		// The JSON encoder appends the layout into its buffer without
		// allocating; t.UTC() only changes the location.
		EncodeTime: func(t time.Time, enc zapcore.PrimitiveArrayEncoder) {
			layout(t.UTC(), enc)
		},
		EncodeDuration: zapcore.SecondsDurationEncoder,
		EncodeName:     zapcore.FullNameEncoder,
	}

	var enc zapcore.Encoder
	switch format {
	case "json":
		enc = zapcore.NewJSONEncoder(cfg)
	case "console":
		enc = zapcore.NewConsoleEncoder(cfg)
	default:
		return nil, fmt.Errorf("log format %q: want json or console", format)
	}

	// On a BatchWriter only the access lines Middleware writes itself are
	// batched; every other line (startup, key rotation, errors) goes out
	// before the call that logs it returns.
	ws := zapcore.Lock(zapcore.AddSync(w))
	access := ws
	if bw, ok := w.(*BatchWriter); ok {
		ws = zapcore.Lock(writeNow{bw})
		access = bw
	}
	c := &lineCore{Core: zapcore.NewCore(enc, ws, lvl), out: access, json: format == "json"}
	return zap.New(c, zap.ErrorOutput(ws)), nil
}

// writeNow is a BatchWriter whose Write does not batch.
type writeNow struct{ *BatchWriter }

func (w writeNow) Write(p []byte) (int, error) { return w.WriteNow(p) }

// lineCore is the core of NewLogger's loggers: zap's, plus what
// [Middleware] needs to write the access line itself (see
// [accessEntry.appendJSON]). A logger derived with fields or options has
// another core, and Middleware then logs through zap.
type lineCore struct {
	zapcore.Core
	out  zapcore.WriteSyncer // for access lines: the core's own, or its BatchWriter
	json bool
}

// accessOutput returns where Middleware may write JSON access lines itself
// for log, and the core that decides their level; nil when log is not
// NewLogger's JSON logger as it was returned.
func accessOutput(log *zap.Logger) *lineCore {
	if c, ok := log.Core().(*lineCore); ok && c.json {
		return c
	}
	return nil
}
