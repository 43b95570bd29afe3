package introspect

import (
	"context"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/plantstore/plantstore/auth"
)

// tracerName names the tracer of the introspection spans.
const tracerName = "github.com/plantstore/plantstore/auth/introspect"

// The results of a request for an answer, the result label of
// plantstore_introspection_requests_total.
const (
	resultActive   = "active"   // the endpoint said the token is active
	resultInactive = "inactive" // it said it is not, or not an access token
	resultError    = "error"    // it gave no answer: down, an error status, a redirect, what is not an answer
	resultTimeout  = "timeout"  // it gave none within the timeout
	resultLimited  = "limited"  // no call was made: over -introspection-max-rate or -max-inflight
)

// observer records the calls of a replica: their metrics, and a span
// each.
type observer struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	tracer   trace.Tracer
}

func newObserver(reg prometheus.Registerer, tp trace.TracerProvider) *observer {
	o := &observer{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "plantstore_introspection_requests_total",
			Help: "Requests for an introspection answer, by issuer and result: active, inactive, error, timeout, or limited (no call made, over the replica's bounds).",
		}, []string{"issuer", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "plantstore_introspection_duration_seconds",
			Help:    "Time calls to introspection endpoints took, by issuer.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"issuer"}),
	}
	if reg != nil {
		reg.MustRegister(o.requests, o.duration)
	}
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	o.tracer = tp.Tracer(tracerName)
	return o
}

// issuerLabel is the issuer label of the issuer named name.
func issuerLabel(name string) string {
	if name == "" {
		return auth.UnnamedIssuerLabel
	}
	return name
}

// count records a request of the issuer named name and its result.
func (o *observer) count(name, result string) {
	o.requests.WithLabelValues(issuerLabel(name), result).Inc()
}

// start begins the span of a call to endpoint, a child of ctx's: the
// method, the endpoint without its query and the issuer, never the token
// nor the client's credential.
func (o *observer) start(ctx context.Context, name, endpoint string) (context.Context, trace.Span) {
	ctx, span := o.tracer.Start(ctx, "auth.introspect", trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		attrs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String("POST"), attribute.String("plantstore.issuer", issuerLabel(name))}
		if u, err := url.Parse(endpoint); err == nil {
			u.User, u.RawQuery, u.Fragment = nil, "", ""
			attrs = append(attrs, semconv.URLFull(u.String()), semconv.ServerAddress(u.Hostname()))
		}
		span.SetAttributes(attrs...)
	}
	return ctx, span
}

// end ends span with result, the call having started at start.
func (o *observer) end(span trace.Span, name, result string, start time.Time) {
	o.duration.WithLabelValues(issuerLabel(name)).Observe(time.Since(start).Seconds())
	span.SetAttributes(attribute.String("plantstore.introspection.result", result))
	if result == resultError || result == resultTimeout {
		span.SetStatus(codes.Error, result)
	}
	span.End()
}
