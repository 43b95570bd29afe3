package observability

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
)

// ErrTracingConfig is wrapped by the errors of [NewTracing] about the
// OTEL_* variables.
var ErrTracingConfig = errors.New("tracing configuration")

// Tracing is the service's OpenTelemetry tracing: a tracer provider for
// the packages that make spans, the W3C trace context propagator, and the
// exporter's lifecycle. A nil *Tracing, or one made with tracing off, makes
// no spans and costs the request path one nil check.
type Tracing struct {
	provider trace.TracerProvider
	tracer   trace.Tracer // the server spans of Middleware
	prop     propagation.TextMapPropagator
	sdk      *sdktrace.TracerProvider // nil when off
	subject  bool
	log      *zap.Logger // of the SDK's errors; nil: none

	serverSpan []trace.SpanStartOption // made once: an option costs an allocation
	names      sync.Map                // method + route -> span name, bounded as the routes are
}

// TracingOptions configures [NewTracing].
type TracingOptions struct {
	// Getenv reads the OTEL_* variables that decide whether tracing is on,
	// and the sampler's (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG);
	// nil means none is set. The exporter, batch and resource settings are
	// read by the OpenTelemetry SDK from the process environment, as
	// everywhere the SDK runs.
	Getenv func(string) string
	// Version is the service.version resource attribute.
	Version string
	// Subject puts the caller's subject (enduser.id) and issuer name on
	// server spans (-trace-subject). Off, spans carry neither.
	Subject bool
	// Log receives the SDK's errors (an unreachable collector, say), at
	// most one line a minute, until Shutdown. Nil logs nothing.
	Log *zap.Logger
}

// exportErrorGap is the least time between two logged SDK errors: a
// collector that is down fails every batch.
const exportErrorGap = time.Minute

// TracingOn reports whether the OTEL_* variables read by getenv turn
// tracing on (SPEC §12): OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_TRACES_EXPORTER set, unless
// OTEL_SDK_DISABLED is true or OTEL_TRACES_EXPORTER is none.
func TracingOn(getenv func(string) string) bool {
	if getenv == nil {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	exporter := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	if exporter == "none" {
		return false
	}
	return exporter != "" ||
		strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) != "" ||
		strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) != ""
}

// NewTracing returns the service's tracing. When [TracingOn] says no, it
// returns a Tracing that makes no spans and starts nothing. Otherwise it
// builds the exporter that the standard variables name
// (OTEL_TRACES_EXPORTER otlp or console, OTEL_EXPORTER_OTLP_PROTOCOL
// http/protobuf or grpc, endpoint, headers, timeout, certificates), a batch
// span processor (OTEL_BSP_*: spans wait in a bounded queue and are dropped,
// never waited for, when it is full), the sampler of OTEL_TRACES_SAMPLER
// and OTEL_TRACES_SAMPLER_ARG (parentbased_always_on by default; see
// [Middleware] for whose sampled flag it follows) and a resource named
// plantstore (OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override).
// Exporting runs in the background: a slow or absent collector never
// blocks or fails a request. A value the SDK does not know, or a sampler
// argument that is not a ratio from 0 to 1, is an error wrapping
// [ErrTracingConfig].
func NewTracing(ctx context.Context, o TracingOptions) (*Tracing, error) {
	t := &Tracing{
		provider: noop.NewTracerProvider(),
		prop:     propagation.TraceContext{},
		subject:  o.Subject,
	}
	if !TracingOn(o.Getenv) {
		return t, nil
	}
	sampler, err := samplerFromEnv(o.Getenv)
	if err != nil {
		return nil, err
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		var set []string
		for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
			if v := o.Getenv(k); v != "" {
				set = append(set, k+"="+strconv.Quote(v))
			}
		}
		return nil, fmt.Errorf("%w: %w (%s)", ErrTracingConfig, err, strings.Join(set, ", "))
	}
	// The defaults first: the variables override them.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("plantstore"), semconv.ServiceVersion(o.Version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("%w: resource: %w", ErrTracingConfig, err)
	}
	t = newTracing(sampler, o.Subject, sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	if o.Log != nil {
		t.log = o.Log
		sdkErrors.add(t, rateLimitedErrors(o.Log, exportErrorGap))
	}
	return t, nil
}

// newTracing returns the Tracing of an SDK tracer provider made with opts
// and sampler, which [callerSampler] wraps.
func newTracing(sampler sdktrace.Sampler, subject bool, opts ...sdktrace.TracerProviderOption) *Tracing {
	tp := sdktrace.NewTracerProvider(append(opts, sdktrace.WithSampler(callerSampler{sampler}))...)
	return &Tracing{
		provider:   tp,
		tracer:     tp.Tracer(instrumentationName),
		prop:       propagation.TraceContext{},
		sdk:        tp,
		subject:    subject,
		serverSpan: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)},
	}
}

// samplerFromEnv returns the sampler that OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG name, read through getenv, as the SDK would
// make it (ParentBased(AlwaysSample()) when unset; a ratio of 1 when a
// ratio sampler has no argument). The SDK reads them too, but keeps them
// to itself, and falls back to another sampler on a value it does not
// take: here such a value is an error wrapping [ErrTracingConfig].
func samplerFromEnv(getenv func(string) string) (sdktrace.Sampler, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() (sdktrace.Sampler, error) {
		if arg == "" {
			return sdktrace.TraceIDRatioBased(1), nil
		}
		f, err := strconv.ParseFloat(arg, 64)
		if err != nil || !(f >= 0 && f <= 1) {
			return nil, fmt.Errorf("%w: OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", ErrTracingConfig, arg)
		}
		return sdktrace.TraceIDRatioBased(f), nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		return sdktrace.ParentBased(r), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return ratio()
	}
	return nil, fmt.Errorf("%w: OTEL_TRACES_SAMPLER=%q: not one of always_on, always_off, traceidratio, "+
		"parentbased_always_on, parentbased_always_off, parentbased_traceidratio", ErrTracingConfig, name)
}

// trustedParent marks the context of a request whose remote span context
// (its traceparent) came from a trusted proxy; see callerSampler.
type trustedParent struct{}

// callerSampler is the service's sampler. The sampler of the OTEL_*
// variables decides, except for a span whose parent is a remote span
// context that no trusted proxy sent: a public caller's sampled flag must
// not make the service record a trace (at its cost), nor its unsampled
// flag stop one. Such a span keeps the caller's trace id and parent, and
// is sampled as a root would be: the sampler decides as for a span
// without a parent, on a trace id drawn at random, since the caller chose
// its own (a trace id chosen for its low bits would pass any ratio).
type callerSampler struct{ sdktrace.Sampler }

// ShouldSample implements [sdktrace.Sampler].
func (s callerSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	psc := trace.SpanContextFromContext(p.ParentContext)
	if !psc.IsValid() || !psc.IsRemote() || p.ParentContext.Value(trustedParent{}) != nil {
		return s.Sampler.ShouldSample(p)
	}
	p.ParentContext = trace.ContextWithSpanContext(p.ParentContext, trace.SpanContext{})
	binary.BigEndian.PutUint64(p.TraceID[:8], rand.Uint64())
	binary.BigEndian.PutUint64(p.TraceID[8:], rand.Uint64())
	r := s.Sampler.ShouldSample(p)
	r.Tracestate = psc.TraceState() // the caller's, continued with its trace
	return r
}

// Description implements [sdktrace.Sampler].
func (s callerSampler) Description() string {
	return "CallerSampler{" + s.Sampler.Description() + "}"
}

// instrumentationName names the tracer of the server spans.
const instrumentationName = "github.com/plantstore/plantstore/observability"

// Enabled reports whether t makes spans.
func (t *Tracing) Enabled() bool { return t != nil && t.sdk != nil }

// Provider returns the tracer provider for the packages that make child
// spans (key fetches, store queries): a no-op provider when tracing is off.
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil {
		return noop.NewTracerProvider()
	}
	return t.provider
}

// Shutdown exports the spans still queued and stops the exporter, giving
// up when ctx ends: a collector that is down does not hold the exit.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	err := t.sdk.Shutdown(ctx)
	if t.log != nil {
		sdkErrors.remove(t)
	}
	return err
}

// sdkErrors sends the errors of the OpenTelemetry SDK to the logs of the
// Tracings that run. The SDK reports them through one handler for the
// whole process ([otel.SetErrorHandler]), with no way to set one per
// tracer provider or to tell which provider failed; so the handler is set
// once, the first time a Tracing with a log is made, and each Tracing
// between [NewTracing] and its Shutdown logs every error. A second
// Tracing (a test's, a restart's) thus neither takes the errors of the
// first away from its log nor leaves them going to a log that is gone.
var sdkErrors errorFanout

// errorFanout is the handler of sdkErrors. Its zero value is ready.
type errorFanout struct {
	once     sync.Once
	mu       sync.RWMutex
	handlers map[*Tracing]otel.ErrorHandler
}

// add makes h receive the SDK's errors for t, setting the SDK's handler
// the first time.
func (f *errorFanout) add(t *Tracing, h otel.ErrorHandler) {
	f.once.Do(func() { otel.SetErrorHandler(f) })
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.handlers == nil {
		f.handlers = make(map[*Tracing]otel.ErrorHandler)
	}
	f.handlers[t] = h
}

// remove stops t's handler.
func (f *errorFanout) remove(t *Tracing) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.handlers, t)
}

// Handle implements [otel.ErrorHandler]: err goes to every handler.
func (f *errorFanout) Handle(err error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, h := range f.handlers {
		h.Handle(err)
	}
}

// rateLimitedErrors logs the SDK's errors at Warn, at most one per gap,
// with the count of those left out.
func rateLimitedErrors(log *zap.Logger, gap time.Duration) otel.ErrorHandler {
	var next atomic.Int64
	var dropped atomic.Int64
	return otel.ErrorHandlerFunc(func(err error) {
		now := time.Now().UnixNano()
		n := next.Load()
		if now < n || !next.CompareAndSwap(n, now+int64(gap)) {
			dropped.Add(1)
			return
		}
		log.Warn("tracing: the OpenTelemetry SDK reported an error", zap.Error(err), zap.Int64("errors_not_logged", dropped.Swap(0)))
	})
}

// startServerSpan starts the server span of a request, the child of the
// caller's traceparent when it carries a valid one; trusted says that the
// request came from a trusted proxy, whose sampled flag the sampler may
// follow (see callerSampler). name is the span name ("GET /plants", or the
// method alone for an unmatched path).
func (t *Tracing) startServerSpan(ctx context.Context, carrier propagation.TextMapCarrier, name string, trusted bool) (context.Context, trace.Span) {
	ctx = t.prop.Extract(ctx, carrier)
	if trusted && trace.SpanContextFromContext(ctx).IsRemote() {
		ctx = context.WithValue(ctx, trustedParent{}, trustedParent{})
	}
	return t.tracer.Start(ctx, name, t.serverSpan...)
}

// spanName returns the server span name of method and route (see the
// function spanName), made once per combination. Methods come from a
// closed set and routes from the route table, so the cache is bounded.
func (t *Tracing) spanName(method, route string) string {
	type key struct{ method, route string }
	k := key{methodLabel(method), route}
	if name, ok := t.names.Load(k); ok {
		return name.(string)
	}
	name := spanName(method, route)
	t.names.Store(k, name)
	return name
}

// traceHeaders is the carrier of a request's W3C trace context headers.
// It reads them by their canonical names directly, which saves
// http.Header.Get canonicalizing the propagator's lower-case names on
// every request.
type traceHeaders http.Header

// maxTracestate is the longest tracestate taken from a request, in bytes:
// what W3C Trace Context asks every vendor to pass on at least. A longer
// one is dropped whole, so a caller cannot make every span it is part of
// (and every export) carry kilobytes of its own.
const maxTracestate = 512

// Get returns the first value of the header key; a tracestate over
// maxTracestate bytes is "", as if the request had none.
func (h traceHeaders) Get(key string) string {
	var vs []string
	switch key {
	case "traceparent":
		vs = h["Traceparent"]
	case "tracestate":
		vs = h["Tracestate"]
		if len(vs) > 0 && len(vs[0]) > maxTracestate {
			return ""
		}
	default:
		vs = http.Header(h).Values(key)
	}
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// Set is never called: the service only extracts.
func (h traceHeaders) Set(key, value string) { http.Header(h).Set(key, value) }

// Keys returns the header names.
func (h traceHeaders) Keys() []string { return propagation.HeaderCarrier(h).Keys() }

// The attribute keys of server spans that semconv does not name.
const (
	requestIDKey   = attribute.Key("plantstore.request_id")
	issuerKey      = attribute.Key("plantstore.issuer")
	authFailureKey = attribute.Key("plantstore.auth_failure")
	plantsKey      = attribute.Key("plantstore.plants")
)
