package observability_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/plantstore/plantstore/observability"
)

// loopbackProxy makes the test client, on 127.0.0.1, a trusted proxy.
var loopbackProxy = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

// Samplers of the OTEL_* variables.
var (
	ratioZero     = map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"}
	ratioTiny     = map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.000000001"}
	ratioOne      = map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1"}
	defaultSample = map[string]string(nil)
)

// recordedSpan returns the span of rec whose plantstore.request_id is id,
// or nil when none was recorded.
func recordedSpan(rec *tracetest.SpanRecorder, id string) sdktrace.ReadOnlySpan {
	for _, s := range rec.Ended() {
		if attrs(s)["plantstore.request_id"].AsString() == id {
			return s
		}
	}
	return nil
}

// TestSampledFlagTrust checks whose traceparent decides whether a request
// is recorded: only a trusted proxy's sampled flag is followed; a public
// caller's trace is continued (its trace id is the span's and the access
// line's) but sampled as a trace that starts here, so the ratio applies
// and the default sampler records it.
func TestSampledFlagTrust(t *testing.T) {
	// Low 64 bits zero: the ratio sampler, deciding on this trace id,
	// would record it at any ratio above 0.
	const chosenTrace = "4bf92f3577b34da60000000000000000"
	tests := []struct {
		name         string
		env          map[string]string
		trusted      bool // the server trusts the client as a proxy
		traceparent  string
		requests     int
		wantRecorded bool
		wantCallers  bool // the span is in the caller's trace, under its span
	}{
		{"public caller's sampled flag, ratio 0", ratioZero, false, "00-" + callerTrace + "-" + callerSpan + "-01", 1, false, true},
		{"trusted proxy's sampled flag, ratio 0", ratioZero, true, "00-" + callerTrace + "-" + callerSpan + "-01", 1, true, true},
		{"public caller, no traceparent, ratio 0", ratioZero, false, "", 1, false, false},
		{"public caller, no traceparent, ratio 1", ratioOne, false, "", 1, true, false},
		{"public caller's sampled flag, default sampler", defaultSample, false, "00-" + callerTrace + "-" + callerSpan + "-01", 1, true, true},
		{"public caller's unsampled flag, default sampler", defaultSample, false, "00-" + callerTrace + "-" + callerSpan + "-00", 1, true, true},
		{"public caller's unsampled flag, ratio 1", ratioOne, false, "00-" + callerTrace + "-" + callerSpan + "-00", 1, true, true},
		{"trusted proxy's unsampled flag, default sampler", defaultSample, true, "00-" + callerTrace + "-" + callerSpan + "-00", 1, false, true},
		{"trusted proxy's sampled flag, default sampler", defaultSample, true, "00-" + callerTrace + "-" + callerSpan + "-01", 1, true, true},
		{"public caller's trace id chosen to pass a tiny ratio", ratioTiny, false, "00-" + chosenTrace + "-" + callerSpan + "-01", 20, false, true},
		{"trusted proxy's trace id under a tiny ratio, unsampled", ratioTiny, true, "00-" + chosenTrace + "-" + callerSpan + "-00", 1, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, rec := newSampled(t, tt.env, false)
			var trusted []netip.Prefix
			if tt.trusted {
				trusted = loopbackProxy
			}
			url, lines, _ := tracedServerBehind(t, tr, trusted)
			for i := range tt.requests {
				id := fmt.Sprintf("sampling-%d", i)
				req := newRequest(t, http.MethodGet, url+"/plants")
				req.Header.Set("X-Request-ID", id)
				if tt.traceparent != "" {
					req.Header.Set("Traceparent", tt.traceparent)
				}
				if resp, _ := do(t, req); resp.StatusCode != http.StatusOK {
					t.Fatalf("GET /plants: %d", resp.StatusCode)
				}
				s := recordedSpan(rec, id)
				if (s != nil) != tt.wantRecorded {
					t.Fatalf("request %d (traceparent %q, trusted %t, sampler %v): recorded %t, want %t", i, tt.traceparent, tt.trusted, tt.env, s != nil, tt.wantRecorded)
				}
				wantTrace := strings.Split(tt.traceparent+"--", "-")[1]
				line := findLine(t, lines(), id)
				if tt.wantCallers && line["trace_id"] != wantTrace {
					t.Errorf("request %d: access line trace_id %v, want the caller's %s", i, line["trace_id"], wantTrace)
				}
				if !tt.wantCallers && (line["trace_id"] == nil || line["trace_id"] == wantTrace) {
					t.Errorf("request %d: access line trace_id %v, want a new trace's", i, line["trace_id"])
				}
				if s == nil {
					continue
				}
				if got := s.SpanContext().TraceID().String(); got != line["trace_id"] {
					t.Errorf("request %d: span trace id %s, access line %v", i, got, line["trace_id"])
				}
				if p := s.Parent(); tt.wantCallers != (p.IsRemote() && p.SpanID().String() == callerSpan) {
					t.Errorf("request %d: span parent %s (remote %t), want the caller's span %t", i, p.SpanID(), p.IsRemote(), tt.wantCallers)
				}
			}
		})
	}
}

// tracestateOf returns a valid W3C tracestate of exactly n bytes (n >= 5)
// in at most 32 list members, as the propagator accepts: members of a key
// of 100 characters and a value of 200, and a last one of what is left.
func tracestateOf(n int) string {
	var b strings.Builder
	for i := 0; ; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		key := fmt.Sprintf("k%02d", i)
		rest := n - b.Len() - len(key) - 1 // for this member's value and any after it
		if rest <= 400 {
			pad := max(0, rest-200) // a longer key keeps the value at 200
			b.WriteString(key + strings.Repeat("a", pad) + "=" + strings.Repeat("v", rest-pad))
			return b.String()
		}
		b.WriteString(key + strings.Repeat("a", 97) + "=" + strings.Repeat("v", 200))
	}
}

// TestTracestateLimit checks that a tracestate over 512 bytes is dropped,
// from a public caller and from a trusted proxy alike, while one of 512
// bytes is continued.
func TestTracestateLimit(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		tr, rec := newRecorded(t, false)
		var proxies []netip.Prefix
		if trusted {
			proxies = loopbackProxy
		}
		url, _, _ := tracedServerBehind(t, tr, proxies)
		for _, n := range []int{40, 512, 513, 8 << 10} {
			ts := tracestateOf(n)
			if len(ts) != n {
				t.Fatalf("tracestateOf(%d) is %d bytes", n, len(ts))
			}
			id := fmt.Sprintf("tracestate-%d", n)
			req := newRequest(t, http.MethodGet, url+"/plants")
			req.Header.Set("X-Request-ID", id)
			req.Header.Set("Traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
			req.Header.Set("Tracestate", ts)
			do(t, req)
			s := recordedSpan(rec, id)
			if s == nil {
				t.Fatalf("trusted %t, tracestate of %d bytes: no span recorded", trusted, n)
			}
			if s.SpanContext().TraceID().String() != callerTrace {
				t.Errorf("trusted %t, tracestate of %d bytes: trace %s, want the caller's", trusted, n, s.SpanContext().TraceID())
			}
			want := ts
			if n > 512 {
				want = ""
			}
			if got := s.SpanContext().TraceState().String(); got != want {
				t.Errorf("trusted %t: a tracestate of %d bytes gave the span one of %d bytes, want %d", trusted, n, len(got), len(want))
			}
		}
	}
}

// TestSamplerVariables checks the sampler variables NewTracing takes and
// refuses.
func TestSamplerVariables(t *testing.T) {
	tests := []struct {
		env     map[string]string
		wantErr string // "" for none
	}{
		{nil, ""},
		{map[string]string{"OTEL_TRACES_SAMPLER": " ParentBased_TraceIDRatio ", "OTEL_TRACES_SAMPLER_ARG": "0.25"}, ""},
		{map[string]string{"OTEL_TRACES_SAMPLER": "always_off"}, ""},
		{map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio"}, ""},
		{map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "5%"}, `OTEL_TRACES_SAMPLER_ARG="5%"`},
		{map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"}, `OTEL_TRACES_SAMPLER_ARG="1.5"`},
		{map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "NaN"}, `OTEL_TRACES_SAMPLER_ARG="NaN"`},
		{map[string]string{"OTEL_TRACES_SAMPLER": "jaeger_remote"}, `OTEL_TRACES_SAMPLER="jaeger_remote"`},
	}
	for _, tt := range tests {
		env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}
		for k, v := range tt.env {
			env[k] = v
		}
		tr, err := observability.NewTracing(t.Context(), observability.TracingOptions{Getenv: func(k string) string { return env[k] }})
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("NewTracing with %v: %v, want no error", tt.env, err)
		case tt.wantErr != "" && (!errors.Is(err, observability.ErrTracingConfig) || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("NewTracing with %v: %v, want an ErrTracingConfig naming %s", tt.env, err, tt.wantErr)
		}
		if err == nil {
			_ = tr.Shutdown(context.Background())
		}
	}
}

// TestSDKErrorsLogged checks where the SDK's errors, which it reports
// through one handler for the whole process, are logged: by every Tracing
// made with a log, until its Shutdown.
func TestSDKErrorsLogged(t *testing.T) {
	on := func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}[k]
	}
	newLogged := func() (*observability.Tracing, func(string) bool) {
		log, _, buf := newLogger(t, "info")
		tr, err := observability.NewTracing(t.Context(), observability.TracingOptions{Getenv: on, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
		return tr, func(msg string) bool {
			for _, l := range buf.Lines(t) {
				if e, _ := l["error"].(string); strings.Contains(e, msg) {
					return true
				}
			}
			return false
		}
	}
	a, aLogged := newLogged()
	_, bLogged := newLogged()
	otel.Handle(errors.New("first collector error"))
	if !aLogged("first collector error") || !bLogged("first collector error") {
		t.Errorf("an SDK error with two Tracings running: logged by the first %t, the second %t; want both", aLogged("first collector error"), bLogged("first collector error"))
	}
	if err := a.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, cLogged := newLogged() // its rate limit has logged nothing yet
	otel.Handle(errors.New("second collector error"))
	if aLogged("second collector error") || !cLogged("second collector error") {
		t.Errorf("an SDK error after the first Tracing's Shutdown: logged by it %t, by a new one %t; want false, true", aLogged("second collector error"), cLogged("second collector error"))
	}
}
