package keys

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/plantstore/plantstore/observability/setting"
)

// tracerName names the tracer of the key source spans.
const tracerName = "github.com/plantstore/plantstore/auth/keys"

// The attribute keys of key source spans that semconv does not name.
const (
	sourceKey = attribute.Key("plantstore.key_source") // the URL or issuer, secrets redacted
	issuerKey = attribute.Key("plantstore.issuer")     // the issuer's name in the issuers file
	keysKey   = attribute.Key("plantstore.keys")       // keys in a fetched set
)

// endSpan marks span failed with err, whose text names URLs with their
// secrets redacted and never a document's body.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
}

// traceRequest puts the W3C trace context of the span in req's context on
// req, and describes req on that span when it records. The URL is redacted
// as in the logs.
func traceRequest(req *http.Request) trace.Span {
	span := trace.SpanFromContext(req.Context())
	propagation.TraceContext{}.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	if span.IsRecording() {
		span.SetAttributes(
			semconv.HTTPRequestMethodKey.String(req.Method),
			semconv.URLFull(setting.RedactURL(req.URL.String())),
			semconv.ServerAddress(req.URL.Hostname()),
		)
	}
	return span
}
