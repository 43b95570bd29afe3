package postgres_test

import (
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/plantstore/plantstore/observability/spantest"
	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
	"github.com/plantstore/plantstore/plants/storetest"
)

// TestTracedQueries checks that a traced request's listing makes spans of
// its statements below the request's span, with the statement and never
// its parameters (the caller's principals), and that a listing outside a
// trace makes none.
func TestTracedQueries(t *testing.T) {
	t.Parallel()
	dsn := migrated(t)
	if err := postgres.Import(t.Context(), dsn, storetest.Catalog(t, `[{"name":"Fern","readers":["user:secret-subject"]}]`), false); err != nil {
		t.Fatalf("Import: %v", err)
	}
	tp, rec := spantest.Recorder(t)
	s := openStore(t, dsn, postgres.Options{TracerProvider: tp})
	q := plants.Query{Caller: plants.Caller{Subject: "secret-subject", Groups: []string{"secret-group"}}, Limit: plants.NoLimit}

	for range s.List(t.Context(), q) {
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("a listing outside a trace made %d spans", n)
	}

	ctx, request := tp.Tracer("test").Start(t.Context(), "GET /plants", trace.WithSpanKind(trace.SpanKindServer))
	var got []string
	for p, err := range s.List(ctx, q) {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		got = append(got, p.Name)
	}
	request.End()
	if len(got) != 1 {
		t.Fatalf("List = %v, want [Fern]", got)
	}
	var queries int
	for _, sp := range rec.Ended() {
		if sp.SpanContext().SpanID() == request.SpanContext().SpanID() {
			continue
		}
		if sp.SpanContext().TraceID() != request.SpanContext().TraceID() {
			t.Errorf("span %q is in another trace", sp.Name())
		}
		for _, kv := range sp.Attributes() {
			if strings.Contains(kv.Value.String(), "secret-") {
				t.Errorf("span %q attribute %s carries a principal: %s", sp.Name(), kv.Key, kv.Value.String())
			}
			if kv.Key == "db.query.text" {
				queries++
			}
		}
	}
	if queries == 0 {
		t.Errorf("no statement span below the request; spans: %d", len(rec.Ended()))
	}
}

// TestTracedSnapshotReload checks that each snapshot reload is a span of
// its own with its statements below it.
func TestTracedSnapshotReload(t *testing.T) {
	t.Parallel()
	dsn := migrated(t)
	if err := postgres.Import(t.Context(), dsn, storetest.Catalog(t, `[{"name":"Fern","readers":["*"]},{"name":"Moss","readers":["*"]}]`), false); err != nil {
		t.Fatalf("Import: %v", err)
	}
	tp, rec := spantest.Recorder(t)
	s := openSnapshot(t, dsn, postgres.Options{TracerProvider: tp}, nil)
	waitLoaded(t, s)
	var reload sdktrace.ReadOnlySpan
	waitUntil(t, 10*time.Second, "the reload span", func() bool {
		for _, sp := range rec.Ended() {
			if sp.Name() == "plants.snapshot.reload" {
				reload = sp
				return true
			}
		}
		return false
	})
	var plantsAttr string
	for _, kv := range reload.Attributes() {
		if kv.Key == "plantstore.plants" {
			plantsAttr = kv.Value.String()
		}
	}
	if plantsAttr != "2" || reload.Parent().IsValid() {
		t.Errorf("reload span plantstore.plants %q, parent %v; want 2 and a root span", plantsAttr, reload.Parent())
	}
	var below int
	for _, sp := range rec.Ended() {
		if sp.Parent().SpanID() == reload.SpanContext().SpanID() {
			below++
		}
	}
	if below == 0 {
		t.Error("no statement span below the reload span")
	}
}
