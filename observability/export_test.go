package observability

import sdktrace "go.opentelemetry.io/otel/sdk/trace"

// NewTracingRecorded returns a Tracing whose spans end in sp, sampled as
// [NewTracing] samples with the OTEL_TRACES_SAMPLER variables of getenv.
func NewTracingRecorded(getenv func(string) string, sp sdktrace.SpanProcessor, subject bool) (*Tracing, error) {
	s, err := samplerFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	return newTracing(s, subject, sdktrace.WithSpanProcessor(sp)), nil
}

// BuildVersionOf is how NewRegistry fills an empty version or revision,
// from the build information bi.
var BuildVersionOf = buildVersion
