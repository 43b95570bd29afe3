package observability

import (
	"io"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/plantstore/plantstore/observability/setting"
)

// timeLayout is RFC 3339 in UTC with milliseconds, for example
// 2026-11-23T09:36:48.123Z: sortable as text, and parsed as is by log
// pipelines that would need a hint for epoch seconds.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// The keys every line starts with.
const (
	levelKey   = "level"
	timeKey    = "ts"
	messageKey = "msg"
)

// NewLogger returns the service's logger and its access log, both writing
// to w at level (debug, info, warn or error) in format (json or console).
//
// Each line of the logger carries the keys ts (RFC 3339 UTC with
// milliseconds), level (lower case) and msg, then the fields of the call;
// there is no caller, stack trace or sampling, so no line is dropped. The
// access log writes the one line per request of [Middleware] in the same
// shape (see [AccessLog]). Writes to w are serialized, so w need not be
// safe for concurrent use. An unknown level or format is refused with the
// *[setting.Error] of log_level or log_format.
func NewLogger(w io.Writer, level, format string) (*zap.Logger, *AccessLog, error) {
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
		return nil, nil, setting.Errorf("log_level", "unknown level %q: want debug, info, warn or error", level)
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
		return nil, nil, setting.Errorf("log_format", "unknown format %q: want json or console", format)
	}
	ws, ok := w.(zapcore.WriteSyncer)
	if !ok {
		ws = zapcore.AddSync(w)
	}
	var (
		lines  zapcore.WriteSyncer
		access lineWriter
	)
	if o, buffered := w.(*LogOutput); buffered {
		// Only access lines wait for a batch; every other line (startup,
		// key updates, errors) goes out with those before it at once.
		lines, access = writeThrough{o}, o
	} else {
		ws = zapcore.Lock(ws) // a LogOutput serializes its writes itself
		lines, access = ws, unstamped{ws}
	}
	log := zap.New(zapcore.NewCore(enc, lines, lvl), zap.ErrorOutput(lines))
	return log, &AccessLog{out: access, level: lvl, console: format == "console"}, nil
}

// writeThrough writes each line to a LogOutput and flushes it with what
// waits before it.
type writeThrough struct{ *LogOutput }

func (w writeThrough) Write(p []byte) (int, error) {
	n, err := w.LogOutput.Write(p)
	if err == nil {
		err = w.LogOutput.Sync()
	}
	return n, err
}
