package auth_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
)

// askIssuer is a way of trust that is not a signature: it knows the
// opaque tokens it was told of, as an issuer asked about them would, and
// its answers hold until a deadline, the stamp of its verdicts. It counts
// the questions.
type askIssuer struct {
	mu     sync.Mutex
	known  map[string]auth.Claims
	asked  int
	hold   time.Duration
	now    func() time.Time
	notYet error // Ready's answer
}

func (a *askIssuer) Authenticator(_ auth.Config, now func() time.Time) (auth.Authenticator, error) {
	a.now = now
	return a, nil
}

func (a *askIssuer) Authenticate(_ context.Context, token string) (auth.Verdict, *auth.Error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked++
	c, ok := a.known[token]
	if !ok {
		return auth.Verdict{}, auth.InvalidToken(auth.ReasonBadSignature)
	}
	return auth.Verdict{Claims: c, Stamp: uint64(a.now().Add(a.hold).UnixNano()), Cacheable: true}, nil
}

func (a *askIssuer) Holds(stamp uint64, now time.Time) bool {
	return uint64(now.UnixNano()) < stamp
}

func (a *askIssuer) Ready(time.Time) error { return a.notYet }

func (a *askIssuer) questions() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.asked
}

// TestOpaqueTrust is the seam with a second way of trust, as
// introspection plugs in: a token that is not a JWS goes to the issuer
// whose Opaque Trust is set; its claims meet the rules a JWS's meet
// (times, iss, aud, the caller); its verdict is cached while the
// Authenticator says it holds, and asked again after; readiness asks it.
func TestOpaqueTrust(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) float64 { return float64(now.Add(d).Unix()) }
	const iss = "https://sso.example.com"
	ask := &askIssuer{hold: time.Minute, known: map[string]auth.Claims{
		"good":      {"sub": "alice", "iss": iss, "aud": "plantstore", "exp": at(time.Hour)},
		"expired":   {"sub": "alice", "iss": iss, "aud": "plantstore", "exp": at(-time.Hour)},
		"elsewhere": {"sub": "alice", "iss": iss, "aud": "shop", "exp": at(time.Hour)},
		"other-iss": {"sub": "alice", "iss": "https://other.example.com", "aud": "plantstore", "exp": at(time.Hour)},
		"no-sub":    {"iss": iss, "aud": "plantstore", "exp": at(time.Hour)},
	}}
	cfg := auth.Config{Issuer: iss, Audiences: []string{"plantstore"}}
	v, err := auth.NewVerifier(auth.Options{}, auth.Issuer{Name: "staff", Config: cfg, Opaque: ask})
	if err != nil {
		t.Fatal(err)
	}
	auth.SetClock(v, func() time.Time { return now })

	id, err := v.Verify(t.Context(), "good")
	if err != nil || id.Subject != "alice" || id.Issuer != "staff" {
		t.Fatalf("an opaque token the issuer vouches for: %+v, %v; want alice of staff", id, err)
	}
	if _, err := v.Verify(t.Context(), "good"); err != nil || ask.questions() != 1 {
		t.Errorf("the same token again: %v after %d questions; want it served from the cache", err, ask.questions())
	}
	now = now.Add(time.Minute)
	if _, err := v.Verify(t.Context(), "good"); err != nil || ask.questions() != 2 {
		t.Errorf("once the answer no longer holds: %v after %d questions; want the issuer asked again", err, ask.questions())
	}

	for token, want := range map[string]auth.Reason{
		"expired":   auth.ReasonExpired,
		"elsewhere": auth.ReasonAudience,
		"other-iss": auth.ReasonIssuer,
		"no-sub":    auth.ReasonNoSubject,
		"unknown":   auth.ReasonBadSignature,
		// A JWS naming staff: staff takes opaque tokens only.
		"eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJodHRwczovL3Nzby5leGFtcGxlLmNvbSIsInN1YiI6ImFsaWNlIn0.c2ln": auth.ReasonMalformed,
	} {
		var ae *auth.Error
		if _, err := v.Verify(t.Context(), token); !errors.As(err, &ae) || ae.Reason != want {
			t.Errorf("%s: %v; want %s", token, err, want)
		}
	}

	ask.notYet = errors.New("not yet")
	if err := v.Ready(); err == nil || !strings.Contains(err.Error(), "issuer staff: not yet") {
		t.Errorf("Ready: %v; want the Authenticator's answer for staff", err)
	}
}

// TestOpaqueTrustOnce: at most one issuer takes opaque tokens, and with
// none such a token is refused as malformed, as it always was.
func TestOpaqueTrustOnce(t *testing.T) {
	both := []auth.Issuer{
		{Name: "a", Config: auth.Config{Issuer: "a"}, Opaque: &askIssuer{}},
		{Name: "b", Config: auth.Config{Issuer: "b"}, Opaque: &askIssuer{}},
	}
	if _, err := auth.NewVerifier(auth.Options{}, both...); err == nil || !strings.Contains(err.Error(), "both take opaque tokens") {
		t.Errorf("two issuers of opaque tokens: %v; want refused", err)
	}
	// An issuer that introspects always (its JWTs too) beside one of
	// opaque tokens: both start, and opaque tokens go to the latter; two
	// that introspect always start too, and an opaque token, of either,
	// goes to neither.
	always := func(name string, ask *askIssuer) auth.Issuer {
		c := auth.Config{Issuer: name, Introspection: auth.Introspection{
			Tokens: auth.IntrospectAlways, Endpoint: "https://" + name + ".example/introspect",
			ClientID: "plantstore", ClientSecretFile: "secret",
		}}
		return auth.Issuer{Name: name, Config: c, Opaque: ask}
	}
	said, alw, alw2 := &askIssuer{known: map[string]auth.Claims{}}, &askIssuer{known: map[string]auth.Claims{}}, &askIssuer{known: map[string]auth.Claims{}}
	if v, err := auth.NewVerifier(auth.Options{}, auth.Issuer{Name: "a", Config: auth.Config{Issuer: "a"}, Opaque: said}, always("b", alw)); err != nil {
		t.Errorf("an issuer of opaque tokens and one that introspects always: %v; want both", err)
	} else if _, _ = v.Verify(t.Context(), "opaque"); said.questions() != 1 || alw.questions() != 0 {
		t.Errorf("an opaque token asked %d times of the issuer of opaque tokens, %d of the other; want 1, 0", said.questions(), alw.questions())
	}
	if v, err := auth.NewVerifier(auth.Options{}, always("b", alw), always("c", alw2)); err != nil {
		t.Errorf("two issuers that introspect always: %v; want both", err)
	} else if _, err := v.Verify(t.Context(), "opaque"); !errors.As(err, new(*auth.Error)) || alw.questions()+alw2.questions() != 0 {
		t.Errorf("an opaque token with two issuers that introspect always: %v, %d questions; want refused, none", err, alw.questions()+alw2.questions())
	}
	jwsOnly := &askIssuer{known: map[string]auth.Claims{}}
	v, err := auth.NewVerifier(auth.Options{}, auth.Issuer{Name: "a", Config: auth.Config{Issuer: "a"}, JWS: jwsOnly})
	if err != nil {
		t.Fatal(err)
	}
	var ae *auth.Error
	if _, err := v.Verify(t.Context(), "opaque"); !errors.As(err, &ae) || ae.Reason != auth.ReasonMalformed || jwsOnly.questions() != 0 {
		t.Errorf("an opaque token and no issuer of them: %v; want malformed, no question asked", err)
	}
}
