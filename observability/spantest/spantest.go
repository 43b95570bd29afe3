// Package spantest records the spans a test makes through a real
// OpenTelemetry SDK tracer provider, for the packages whose code makes
// spans (observability, auth, plants/postgres).
package spantest

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Recorder returns an SDK tracer provider, sampling as the SDK does by
// default (parent-based, always on for a root), whose spans end in the
// returned recorder. The provider is shut down when the test ends.
func Recorder(tb testing.TB) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	tb.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	// Not tb.Context(): it is canceled before cleanups run, and Shutdown
	// with a canceled context returns at once, shutting nothing down.
	tb.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, rec
}

// Named returns the ended spans of rec called name, in the order they
// ended.
func Named(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// Attr returns the value of s's attribute key as text ("200" for the
// integer 200), or "" when s has none.
func Attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}
