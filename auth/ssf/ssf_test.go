package ssf_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/jws"
	"github.com/plantstore/plantstore/auth/ssf"
	"github.com/plantstore/plantstore/observability/metricstest"
)

const (
	staffIss    = "https://staff.example"
	partnersIss = "https://partners.example"
	resource    = "https://plants.example.com"
)

// memoryStore is a Store of one replica: the cutoffs it recorded, each
// jti once.
type memoryStore struct {
	mu      sync.Mutex
	seen    map[string]bool
	cutoffs []ssf.Cutoff
}

func (s *memoryStore) Record(_ context.Context, issuer, jti string, c ssf.Cutoff) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[issuer+"\x00"+jti] {
		return false, nil
	}
	s.seen[issuer+"\x00"+jti] = true
	s.cutoffs = append(s.cutoffs, c)
	return true, nil
}

func (s *memoryStore) last() (ssf.Cutoff, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cutoffs) == 0 {
		return ssf.Cutoff{}, 0
	}
	return s.cutoffs[len(s.cutoffs)-1], len(s.cutoffs)
}

type receiver struct {
	url   string
	store *memoryStore
	reg   *prometheus.Registry
	v     *auth.Verifier
}

// newReceiver serves a Receiver for the issuers staff and partners, each
// with its own key.
func newReceiver(t *testing.T, staff, partners authtest.Key, o ssf.Options) receiver {
	t.Helper()
	v, err := auth.NewVerifier(auth.Options{},
		auth.Issuer{Name: "staff", Config: auth.Config{Issuer: staffIss}, JWS: jws.New(authtest.KeySet(staff))},
		auth.Issuer{Name: "partners", Config: auth.Config{Issuer: partnersIss}, JWS: jws.New(authtest.KeySet(partners))},
	)
	if err != nil {
		t.Fatal(err)
	}
	st := &memoryStore{seen: map[string]bool{}}
	reg := prometheus.NewRegistry()
	o.Issuers, o.Audiences, o.Store, o.Registerer = v, []string{resource}, st, reg
	srv := httptest.NewServer(ssf.New(o))
	t.Cleanup(srv.Close)
	return receiver{url: srv.URL, store: st, reg: reg, v: v}
}

// TestReceiverEvents: each event this service acts on becomes a cutoff
// for its subject at the event's time, from sub_id or the event's subject.
func TestReceiverEvents(t *testing.T) {
	staff, partners := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "EdDSA")
	r := newReceiver(t, staff, partners, ssf.Options{})
	tr := authtest.Transmitter{Key: staff, Iss: staffIss, Aud: resource}
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	for i, event := range []string{authtest.SessionRevoked, authtest.CredentialChange, authtest.AccountDisabled, authtest.AccountPurged, authtest.CredentialCompromise} {
		status, body := authtest.Push(t, r.url, tr.SET(t, event, "alice", at, nil, nil))
		c, n := r.store.last()
		if status != http.StatusAccepted || n != i+1 || c != (ssf.Cutoff{Issuer: "staff", Subject: "alice", Before: at}) {
			t.Errorf("%s: %d %s, cutoff %+v; want 202 and alice's cutoff at %v", event, status, body, c, at)
		}
	}
	// An older transmitter: the subject in the event, no sub_id.
	set := tr.SET(t, authtest.SessionRevoked, "", at, nil, map[string]any{
		"sub_id": nil,
		"events": map[string]any{authtest.SessionRevoked: map[string]any{"event_timestamp": at.Unix(), "subject": map[string]any{"format": "iss_sub", "iss": staffIss, "sub": "bob"}}},
	})
	if status, body := authtest.Push(t, r.url, set); status != http.StatusAccepted {
		t.Errorf("the event's subject: %d %s", status, body)
	} else if c, _ := r.store.last(); c.Subject != "bob" {
		t.Errorf("the event's subject: cutoff %+v, want bob's", c)
	}
	// An event this service does not act on is taken and ignored.
	_, before := r.store.last()
	if status, body := authtest.Push(t, r.url, tr.SET(t, "https://schemas.openid.net/secevent/caep/event-type/assurance-level-change", "alice", at, nil, nil)); status != http.StatusAccepted {
		t.Errorf("another event: %d %s, want 202", status, body)
	}
	if _, n := r.store.last(); n != before {
		t.Error("an event this service does not act on recorded a cutoff")
	}
	got := metricstest.ByLabel(t, r.reg, "plantstore_security_events_total", "result")
	if got["accepted"] != 6 || got["ignored"] != 1 {
		t.Errorf("plantstore_security_events_total by result = %v, want 6 accepted, 1 ignored", got)
	}
}

// TestSecurityEventAttacks: what an attacker may post to the receiver,
// and a SET where an access token is expected.
func TestSecurityEventAttacks(t *testing.T) {
	staff, partners := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	r := newReceiver(t, staff, partners, ssf.Options{})
	tr := authtest.Transmitter{Key: staff, Iss: staffIss, Aud: resource}
	at := time.Now().Add(-time.Minute)
	replayed := tr.SET(t, authtest.SessionRevoked, "alice", at, nil, nil)
	if status, body := authtest.Push(t, r.url, replayed); status != http.StatusAccepted {
		t.Fatalf("the first delivery: %d %s", status, body)
	}
	signedByPartners := authtest.Transmitter{Key: partners, Iss: staffIss, Aud: resource}
	accessToken := authtest.Token(t, staff, map[string]any{"typ": "at+jwt"}, authtest.Claims(map[string]any{"iss": staffIss, "aud": resource}))
	tests := []struct {
		name, contentType, body, want string
	}{
		{"a SET signed by another issuer", "", signedByPartners.SET(t, authtest.SessionRevoked, "alice", at, nil, nil), "invalid_key"},
		{"a SET signed by another issuer, with the issuer's kid", "", signedByPartners.SET(t, authtest.SessionRevoked, "alice", at, map[string]any{"kid": staff.Verify.ID}, nil), "authentication_failed"},
		{"a SET for another audience", "", tr.SET(t, authtest.SessionRevoked, "alice", at, nil, map[string]any{"aud": "https://other.example"}), "invalid_audience"},
		{"a SET replayed", "", replayed, "invalid_request"},
		{"a SET with an access-token typ", "", tr.SET(t, authtest.SessionRevoked, "alice", at, map[string]any{"typ": "at+jwt"}, nil), "invalid_request"},
		{"a SET without typ", "", tr.SET(t, authtest.SessionRevoked, "alice", at, map[string]any{"typ": nil}, nil), "invalid_request"},
		{"an access token posted as a SET", "", accessToken, "invalid_request"},
		{"an access token posted as a SET, typ secevent+jwt, with exp", "", tr.SET(t, authtest.SessionRevoked, "alice", at, nil, map[string]any{"exp": time.Now().Add(time.Hour).Unix()}), "invalid_request"},
		{"a SET naming a subject of another issuer", "", tr.SET(t, authtest.SessionRevoked, "alice", at, nil, map[string]any{"sub_id": map[string]any{"format": "iss_sub", "iss": partnersIss, "sub": "alice"}}), "invalid_request"},
		{"a SET of an unknown issuer", "", authtest.Transmitter{Key: staff, Iss: "https://evil.example", Aud: resource}.SET(t, authtest.SessionRevoked, "alice", at, nil, nil), "invalid_issuer"},
		{"a subject by email, which no issuer maps", "", tr.SET(t, authtest.SessionRevoked, "", at, nil, map[string]any{"sub_id": map[string]any{"format": "email", "email": "alice@example.com"}}), "invalid_request"},
		{"a SET issued an hour ago", "", tr.SET(t, authtest.SessionRevoked, "alice", at, nil, map[string]any{"iat": time.Now().Add(-time.Hour).Unix()}), "invalid_request"},
		{"a SET issued in the future", "", tr.SET(t, authtest.SessionRevoked, "alice", at, nil, map[string]any{"iat": time.Now().Add(time.Hour).Unix()}), "invalid_request"},
		{"a SET without jti", "", tr.SET(t, authtest.SessionRevoked, "alice", at, nil, map[string]any{"jti": nil}), "invalid_request"},
		{"a SET signed with alg none", "", authtest.RawToken(t, map[string]any{"alg": "none", "typ": "secevent+jwt"}, map[string]any{"iss": staffIss, "aud": resource, "iat": time.Now().Unix(), "jti": "x", "events": map[string]any{authtest.SessionRevoked: map[string]any{}}}, ""), "invalid_key"},
		{"the wrong Content-Type", "application/json", tr.SET(t, authtest.SessionRevoked, "alice", at, nil, nil), "invalid_request"},
		{"a body over 64 KiB", "", tr.SET(t, authtest.SessionRevoked, "alice", at, nil, map[string]any{"pad": strings.Repeat("p", 70<<10)}), "invalid_request"},
	}
	_, recorded := r.store.last()
	for _, tt := range tests {
		ct := tt.contentType
		if ct == "" {
			ct = ssf.ContentType
		}
		status, body := authtest.PushAs(t, r.url, ct, tt.body)
		if want := `{"description":`; status != http.StatusBadRequest || !strings.Contains(body, `"err":"`+tt.want+`"`) || !strings.HasPrefix(body, want) {
			t.Errorf("%s: %d %s; want 400 with err %q", tt.name, status, body, tt.want)
		}
	}
	if _, n := r.store.last(); n != recorded {
		t.Errorf("refused SETs recorded %d cutoffs", n-recorded)
	}
	// A SET never grants access: the verifier refuses it as a token.
	set := tr.SET(t, authtest.SessionRevoked, "alice", at, nil, map[string]any{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})
	req := httptest.NewRequest(http.MethodGet, "/plants", nil)
	req.Header.Set("Authorization", "Bearer "+set)
	if _, err := r.v.Authenticate(req); authtest.ReasonOf(t, err) != auth.ReasonTokenType {
		t.Errorf("a SET as an access token: %v, want refused (token_type)", err)
	}
}

// TestReceiverBounds: over its rate the receiver answers 429, and only
// POST is taken.
func TestReceiverBounds(t *testing.T) {
	staff := authtest.NewKey(t, "ES256")
	r := newReceiver(t, staff, authtest.NewKey(t, "ES256"), ssf.Options{Rate: 0.001, Burst: 2})
	tr := authtest.Transmitter{Key: staff, Iss: staffIss, Aud: resource}
	var codes []int
	for range 3 {
		status, _ := authtest.Push(t, r.url, tr.SET(t, authtest.SessionRevoked, "alice", time.Now(), nil, nil))
		codes = append(codes, status)
	}
	if codes[0] != http.StatusAccepted || codes[1] != http.StatusAccepted || codes[2] != http.StatusTooManyRequests {
		t.Errorf("three SETs with a burst of 2: %v, want 202 202 429", codes)
	}
	resp, err := http.Get(r.url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", resp.StatusCode)
	}
}
