package keys

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// jwksStopped waits up to 10s for j's loop and fetches to end.
func jwksStopped(t testing.TB, j *JWKS) {
	t.Helper()
	select {
	case <-j.stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("JWKS loop still running 10s after its context ended")
	}
}

func TestJWKSStopsWithContext(t *testing.T) {
	var hits atomic.Int64
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(block) })

	t.Run("context cancelled before start", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		before := hits.Load()
		j, err := NewJWKS(ctx, JWKSOptions{URL: srv.URL}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		jwksStopped(t, j)
		if got := hits.Load() - before; got != 0 {
			t.Errorf("stopped loop made %d requests, want 0", got)
		}
		if done := j.startFetch(false, trace.SpanContext{}); done != nil {
			t.Errorf("startFetch after stop started a fetch")
		}
	})

	t.Run("context cancelled during a fetch", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		before := hits.Load()
		j, err := NewJWKS(ctx, JWKSOptions{URL: srv.URL, Timeout: time.Hour}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for hits.Load() == before {
			if time.Now().After(deadline) {
				t.Fatal("first fetch never reached the server")
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
		jwksStopped(t, j)
		j.mu.Lock()
		inflight := j.inflight
		j.mu.Unlock()
		if inflight != nil {
			t.Errorf("a fetch is still running after the loop stopped")
		}
		if err := j.Ready(); !errors.Is(err, ErrNoKeys) {
			t.Errorf("Ready() = %v, want %v", err, ErrNoKeys)
		}
	})

	t.Run("unknown kid after stop", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		j, err := NewJWKS(ctx, JWKSOptions{URL: srv.URL, MinRefresh: time.Nanosecond}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		jwksStopped(t, j)
		j.keys.Store(NewKeySet([]Key{{ID: "a", Public: []byte("x")}}))
		before := hits.Load()
		if _, err := j.Key(t.Context(), "b", "HS256"); !errors.Is(err, ErrUnknownKey) {
			t.Errorf("Key(unknown kid) after stop error = %v, want %v", err, ErrUnknownKey)
		}
		if got := hits.Load() - before; got != 0 {
			t.Errorf("Key after stop made %d requests, want 0", got)
		}
	})
}

func TestCheckRedirect(t *testing.T) {
	req := func(u string) *http.Request {
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Request{URL: p}
	}
	tests := []struct {
		from, to string
		wantErr  bool
	}{
		{from: "https://idp.example/jwks", to: "https://cdn.example/jwks"},
		{from: "http://127.0.0.1/jwks", to: "http://127.0.0.1/keys"},
		{from: "http://127.0.0.1/jwks", to: "https://idp.example/jwks"},
		{from: "https://idp.example/jwks", to: "http://idp.example/jwks", wantErr: true},
		{from: "https://idp.example/jwks", to: "file:///etc/passwd", wantErr: true},
		{from: "http://idp.example/jwks", to: "gopher://idp.example/jwks", wantErr: true},
	}
	for _, tt := range tests {
		err := checkRedirect(req(tt.to), []*http.Request{req(tt.from)})
		if (err != nil) != tt.wantErr {
			t.Errorf("checkRedirect(%s -> %s) = %v, want error %t", tt.from, tt.to, err, tt.wantErr)
		}
	}
	var via []*http.Request
	for range 10 {
		via = append(via, req("https://idp.example/jwks"))
	}
	if err := checkRedirect(req("https://idp.example/jwks"), via); err == nil {
		t.Errorf("checkRedirect after 10 redirects = nil, want an error")
	}
}

func TestJitter(t *testing.T) {
	for _, d := range []time.Duration{0, time.Nanosecond, 50 * time.Millisecond, 15 * time.Minute} {
		for range 100 {
			got := jitter(d)
			if lo, hi := d-d/10, d+d/10; got < lo || got > hi {
				t.Fatalf("jitter(%v) = %v, want within [%v, %v]", d, got, lo, hi)
			}
		}
	}
}
