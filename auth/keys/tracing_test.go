package keys_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/observability/spantest"
)

// TestJWKSFetchSpans checks the spans of a fetch by OIDC discovery: a
// refresh span with the discovery and fetch client spans below it, their
// URLs redacted as in the logs, and the traceparent each request carried.
func TestJWKSFetchSpans(t *testing.T) {
	k := authtest.NewKeyID(t, "EdDSA", "ed")
	doc := authtest.JWKS(t, k)
	var mu sync.Mutex
	parents := map[string]string{} // path -> traceparent received
	srv := authtest.NewServer(t, nil)
	srv.Set(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		parents[r.URL.Path] = r.Header.Get("Traceparent")
		mu.Unlock()
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL, "jwks_uri": srv.URL + "/jwks?api_key=s3cret"})
		case "/jwks":
			w.Write(doc)
		default:
			http.NotFound(w, r)
		}
	})
	tp, rec := spantest.Recorder(t)
	j, _ := authtest.NewJWKS(t, keys.JWKSOptions{Issuer: srv.URL, Refresh: time.Hour, TracerProvider: tp, Name: "staff"})
	authtest.WaitFor(t, "keys", func() bool { return j.Ready() == nil })
	authtest.WaitFor(t, "the refresh span", func() bool { return len(spantest.Named(rec, "auth.jwks.refresh")) == 1 })

	refresh := spantest.Named(rec, "auth.jwks.refresh")[0]
	if refresh.Parent().IsValid() {
		t.Errorf("background refresh has parent %v, want a trace of its own", refresh.Parent())
	}
	if got := spantest.Attr(refresh, "plantstore.issuer"); got != "staff" {
		t.Errorf("refresh plantstore.issuer = %q, want staff", got)
	}
	if got := spantest.Attr(refresh, "plantstore.keys"); got != "1" {
		t.Errorf("refresh plantstore.keys = %q, want 1", got)
	}
	for _, c := range []struct{ name, path, url string }{
		{"auth.oidc.discovery", "/.well-known/openid-configuration", srv.URL + "/.well-known/openid-configuration"},
		{"auth.jwks.fetch", "/jwks", srv.URL + "/jwks?xxxxx"},
	} {
		spans := spantest.Named(rec, c.name)
		if len(spans) != 1 {
			t.Fatalf("%d %s spans, want 1", len(spans), c.name)
		}
		s := spans[0]
		if s.SpanKind() != trace.SpanKindClient || s.Parent().SpanID() != refresh.SpanContext().SpanID() {
			t.Errorf("%s: kind %v parent %v, want a client span below the refresh", c.name, s.SpanKind(), s.Parent().SpanID())
		}
		if got := spantest.Attr(s, "url.full"); got != c.url {
			t.Errorf("%s url.full = %q, want %q", c.name, got, c.url)
		}
		if got := spantest.Attr(s, "http.response.status_code"); got != "200" {
			t.Errorf("%s http.response.status_code = %q, want 200", c.name, got)
		}
		mu.Lock()
		tp := parents[c.path]
		mu.Unlock()
		if want := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"; tp != want {
			t.Errorf("GET %s carried traceparent %q, want %q", c.path, tp, want)
		}
	}
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.String(), "s3cret") {
				t.Errorf("span %s attribute %s carries the URL's secret: %s", s.Name(), kv.Key, kv.Value.String())
			}
		}
	}
}

// TestJWKSFetchForRequestIsChild checks that a fetch a token's unknown kid
// triggers is part of that request's trace, and that a failed fetch is an
// error span.
func TestJWKSFetchForRequestIsChild(t *testing.T) {
	old, rotated := authtest.NewKeyID(t, "EdDSA", "old"), authtest.NewKeyID(t, "EdDSA", "new")
	srv := authtest.NewServer(t, authtest.JWKS(t, old))
	tp, rec := spantest.Recorder(t)
	j, _ := authtest.NewJWKS(t, keys.JWKSOptions{URL: srv.URL, Refresh: time.Hour, MinRefresh: time.Nanosecond, TracerProvider: tp})
	authtest.WaitFor(t, "keys", func() bool { return j.Ready() == nil })

	srv.Serve(authtest.JWKS(t, old, rotated))
	ctx, request := tp.Tracer("test").Start(t.Context(), "GET /plants", trace.WithSpanKind(trace.SpanKindServer))
	if _, err := j.Key(ctx, "new", "EdDSA"); err != nil {
		t.Fatalf("Key(new) after rotation: %v", err)
	}
	request.End()
	authtest.WaitFor(t, "two refresh spans", func() bool { return len(spantest.Named(rec, "auth.jwks.refresh")) == 2 })
	var child sdktrace.ReadOnlySpan
	for _, s := range spantest.Named(rec, "auth.jwks.refresh") {
		if s.Parent().IsValid() {
			child = s
		}
	}
	if child == nil || child.Parent().SpanID() != request.SpanContext().SpanID() || child.SpanContext().TraceID() != request.SpanContext().TraceID() {
		t.Fatalf("no refresh span below the request span %v", request.SpanContext().SpanID())
	}

	srv.Set(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusBadGateway) })
	if _, err := j.Key(t.Context(), "unknown", "EdDSA"); err == nil {
		t.Fatal("Key(unknown) with the JWKS down succeeded")
	}
	authtest.WaitFor(t, "the failed fetch span", func() bool {
		for _, s := range spantest.Named(rec, "auth.jwks.fetch") {
			if spantest.Attr(s, "http.response.status_code") == "502" {
				return s.Status().Code.String() == "Error"
			}
		}
		return false
	})
}
