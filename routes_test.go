package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/jws"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/auth/mint"
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/plants"
)

// TestEventsPathMethods: the security events' path takes POST only;
// another method is 405 with Allow: POST (not /plants' GET, HEAD), counted
// and logged under its own route.
func TestEventsPathMethods(t *testing.T) {
	var logs strings.Builder
	log, access, err := observability.NewLogger(&logs, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	reg := observability.NewRegistry("test", "test")
	priv, _, err := mint.GenerateKey("ES256")
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(auth.Options{}, auth.Issuer{
		Config: auth.Config{Issuer: "https://idp.example", Audiences: []string{"plantstore"}},
		JWS:    jws.New(keys.NewKeySet([]keys.Key{{ID: "k", Algorithm: "ES256", Public: priv.Public()}})),
	})
	if err != nil {
		t.Fatal(err)
	}
	posted := 0
	h := newAPIHandler(apiOptions{
		log: log, reg: reg, access: access, verifier: v, authMetrics: auth.NewMetrics(reg),
		store:      plants.NewMemoryStore(benchCatalog(t, 10), plants.NewMetrics(reg)),
		events:     http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { posted++; w.WriteHeader(http.StatusAccepted) }),
		eventsPath: "/ssf/events", writeTimeout: time.Minute,
	})
	for _, tt := range []struct {
		method, path string
		status       int
		allow, route string
	}{
		{http.MethodPost, "/ssf/events", http.StatusAccepted, "", "/ssf/events"},
		{http.MethodGet, "/ssf/events", http.StatusMethodNotAllowed, "POST", "/ssf/events"},
		{http.MethodPut, "/ssf/events", http.StatusMethodNotAllowed, "POST", "/ssf/events"},
		{http.MethodPost, "/plants", http.StatusMethodNotAllowed, "GET, HEAD", "/plants"},
	} {
		logs.Reset()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(tt.method, tt.path, nil))
		if w.Code != tt.status || w.Header().Get("Allow") != tt.allow {
			t.Errorf("%s %s = %d, Allow %q; want %d, Allow %q", tt.method, tt.path, w.Code, w.Header().Get("Allow"), tt.status, tt.allow)
		}
		if !strings.Contains(logs.String(), `"route":"`+tt.route+`"`) {
			t.Errorf("%s %s logged %s; want route %s", tt.method, tt.path, logs.String(), tt.route)
		}
	}
	if posted != 1 {
		t.Errorf("the receiver got %d requests; want the one POST", posted)
	}
}
