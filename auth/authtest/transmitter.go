package authtest

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The event types of OpenID Shared Signals a Transmitter sends.
const (
	SessionRevoked       = "https://schemas.openid.net/secevent/caep/event-type/session-revoked"
	CredentialChange     = "https://schemas.openid.net/secevent/caep/event-type/credential-change"
	AccountDisabled      = "https://schemas.openid.net/secevent/risc/event-type/account-disabled"
	AccountPurged        = "https://schemas.openid.net/secevent/risc/event-type/account-purged"
	CredentialCompromise = "https://schemas.openid.net/secevent/risc/event-type/credential-compromise"
)

// A Transmitter is an OpenID Shared Signals transmitter of the tests (no
// public one runs offline): it signs Security Event Tokens (RFC 8417) with
// an issuer's real key and pushes them (RFC 8935).
type Transmitter struct {
	Key Key
	// Iss is the issuer's iss, Aud the receiver's audience.
	Iss, Aud string
}

// SET returns a signed SET of one event about sub (an iss_sub subject
// identifier of the transmitter's issuer, as sub_id) at eventTime, with
// claims changed by over and header members by header (nil removes one).
func (tr Transmitter) SET(t testing.TB, event, sub string, eventTime time.Time, header, over map[string]any) string {
	t.Helper()
	jti := make([]byte, 8)
	rand.Read(jti)
	claims := map[string]any{
		"iss":    tr.Iss,
		"aud":    tr.Aud,
		"iat":    time.Now().Unix(),
		"jti":    hex.EncodeToString(jti),
		"sub_id": map[string]any{"format": "iss_sub", "iss": tr.Iss, "sub": sub},
		"events": map[string]any{event: map[string]any{"event_timestamp": eventTime.Unix()}},
	}
	for k, v := range over {
		if v == nil {
			delete(claims, k)
			continue
		}
		claims[k] = v
	}
	h := map[string]any{"typ": "secevent+jwt"}
	for k, v := range header {
		h[k] = v
	}
	return Token(t, tr.Key, h, claims)
}

// Push POSTs set to url as RFC 8935 says, and returns the status and body.
func Push(t testing.TB, url, set string) (int, string) {
	t.Helper()
	return PushAs(t, url, "application/secevent+jwt", set)
}

// PushAs is Push with another Content-Type.
func PushAs(t testing.TB, url, contentType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
