// Package ssf receives the security events of the identity providers
// (OpenID Shared Signals): Security Event Tokens (RFC 8417) pushed to the
// API (RFC 8935), signed by a configured issuer with its own keys. The
// CAEP session-revoked and credential-change events and the RISC
// account-disabled, account-purged and credential-compromise events
// become a revocation cutoff for the subject they name, at the event's
// time; a SET never grants access.
package ssf

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/jws"
)

// ContentType is the media type of a pushed SET (RFC 8935 §2).
const ContentType = "application/secevent+jwt"

// The events that become a subject cutoff, by their URI, with the short
// name of the event label of plantstore_security_events_total.
var cutoffEvents = map[string]string{
	"https://schemas.openid.net/secevent/caep/event-type/session-revoked":       "session-revoked",
	"https://schemas.openid.net/secevent/caep/event-type/credential-change":     "credential-change",
	"https://schemas.openid.net/secevent/risc/event-type/account-disabled":      "account-disabled",
	"https://schemas.openid.net/secevent/risc/event-type/account-purged":        "account-purged",
	"https://schemas.openid.net/secevent/risc/event-type/credential-compromise": "credential-compromise",
}

// Defaults of [Options].
const (
	DefaultMaxBody = 64 << 10
	DefaultMaxAge  = 5 * time.Minute
	DefaultRate    = 20
	DefaultBurst   = 50
)

// A Cutoff is what an accepted event revokes: the tokens of Subject of
// the issuer Issuer (its configured name) issued before Before.
type Cutoff struct {
	Issuer, Subject string
	Before          time.Time
}

// A Store records events: Record stores the cutoff of the event jti of
// issuer, and reports false when that jti was recorded before (a replay),
// across the replicas that share the store.
type Store interface {
	Record(ctx context.Context, issuer, jti string, c Cutoff) (fresh bool, err error)
}

// Issuers finds the configured issuer whose iss is iss.
type Issuers interface {
	IssuerOf(iss string) (auth.Issuer, bool)
}

// Options configure a [Receiver].
type Options struct {
	// Issuers are the issuers whose events are taken: those of the
	// verifier, with their keys.
	Issuers Issuers
	// Audiences are the values one of which the aud of every SET must
	// name: the resource (-public-url).
	Audiences []string
	// Store records the cutoffs; required.
	Store Store
	// MaxAge is how old a SET may be by its iat; 0 means DefaultMaxAge.
	MaxAge time.Duration
	// Leeway is the clock skew allowed on iat.
	Leeway time.Duration
	// MaxBody bounds a SET in bytes; 0 means DefaultMaxBody.
	MaxBody int64
	// Rate and Burst bound the SETs a replica reads a second; 0 means the
	// defaults.
	Rate  float64
	Burst int
	// Registerer takes plantstore_security_events_total.
	Registerer prometheus.Registerer
	// Log receives a line per accepted event.
	Log *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// A Receiver is the RFC 8935 push endpoint: an http.Handler for POST.
type Receiver struct {
	o       Options
	limit   *rate.Limiter
	counter *prometheus.CounterVec
}

// New returns a Receiver.
func New(o Options) *Receiver {
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Rate <= 0 {
		o.Rate = DefaultRate
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	r := &Receiver{o: o, limit: rate.NewLimiter(rate.Limit(o.Rate), o.Burst)}
	r.counter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "plantstore_security_events_total",
		Help: "Security Event Tokens received, by issuer (its configured name; unknown before one is known), event (the event's short name, other, or none) and result (accepted, replayed, ignored, or the RFC 8935 error code).",
	}, []string{"issuer", "event", "result"})
	if o.Registerer != nil {
		o.Registerer.MustRegister(r.counter)
	}
	return r
}

// setError is a refusal of RFC 8935 §2.3: 400 with its error code.
type setError struct {
	code, description string
}

func (e *setError) Error() string { return e.code + ": " + e.description }

func refuse(code, description string) *setError { return &setError{code, description} }

// ServeHTTP takes one SET: 202 when it was accepted (or named no event
// this service acts on), 400 with the RFC 8935 error JSON when it is
// refused, 429 over the rate, 503 when the store cannot record it (the
// transmitter retries).
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": http.StatusMethodNotAllowed, "message": "POST a Security Event Token"})
		return
	}
	if !r.limit.Allow() {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": http.StatusTooManyRequests, "message": "too many security events; retry later"})
		return
	}
	issuer, event, err := r.take(req)
	var se *setError
	switch {
	case err == nil:
		r.count(issuer, event, "accepted")
		w.WriteHeader(http.StatusAccepted)
	case errors.Is(err, errIgnored):
		r.count(issuer, event, "ignored")
		w.WriteHeader(http.StatusAccepted)
	case errors.As(err, &se):
		r.count(issuer, event, se.code)
		writeJSON(w, http.StatusBadRequest, map[string]string{"err": se.code, "description": se.description})
	default:
		r.count(issuer, event, "unavailable")
		r.o.Log.Warn("security event not recorded", zap.String("iss", issuer), zap.Error(err))
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": http.StatusServiceUnavailable, "message": "the revocation store cannot record the event; retry later"})
	}
}

// count adds one to the events of issuer ("unknown" before one is known).
func (r *Receiver) count(issuer, event, result string) {
	if issuer == "" {
		issuer = "unknown"
	}
	if event == "" {
		event = "none"
	}
	r.counter.WithLabelValues(issuer, event, result).Inc()
}

// errIgnored is a valid SET with no event this service acts on.
var errIgnored = errors.New("no event this service acts on")

// take reads, verifies and records the SET of req, and returns the name
// of its issuer (the label value: "default" for the unnamed one) and its
// event's short name.
func (r *Receiver) take(req *http.Request) (issuer, event string, err error) {
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || mt != ContentType {
		return "", "", refuse("invalid_request", "Content-Type must be "+ContentType)
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, req.Body, r.o.MaxBody))
	if err != nil {
		return "", "", refuse("invalid_request", "body too large or unreadable")
	}
	token := strings.TrimSpace(string(body))
	iss, ok := peekIssuer(token)
	if !ok {
		return "", "", refuse("invalid_request", "not a signed JWT")
	}
	is, ok := r.o.Issuers.IssuerOf(iss)
	if !ok || is.JWS == nil {
		return "", "", refuse("invalid_issuer", "iss is not a configured issuer")
	}
	issuer = is.Name
	if issuer == "" {
		issuer = auth.UnnamedIssuerLabel
	}
	trust, ok := is.JWS.(*jws.Trust)
	if !ok {
		return issuer, "", refuse("invalid_issuer", "the issuer's tokens are not signed")
	}
	claims, ae := trust.VerifyEvent(req.Context(), is.Config, token)
	if ae != nil {
		return issuer, "", refusalOf(ae)
	}
	c, event, err := r.cutoff(is, claims)
	if err != nil {
		return issuer, event, err
	}
	jti, _ := claims["jti"].(string)
	fresh, err := r.o.Store.Record(req.Context(), is.Name, jti, c)
	if err != nil {
		return issuer, event, err
	}
	if !fresh {
		return issuer, event, refuse("invalid_request", "jti already received")
	}
	r.o.Log.Info("security event applied", zap.String("iss", issuer), zap.String("event", event), zap.Time("before", c.Before))
	return issuer, event, nil
}

// refusalOf is the RFC 8935 error of a SET the signature check refused.
func refusalOf(ae *auth.Error) *setError {
	switch ae.Reason {
	case auth.ReasonUnknownKey, auth.ReasonAlgorithm, auth.ReasonKeysUnavailable:
		return refuse("invalid_key", "no key of the issuer verifies this SET")
	case auth.ReasonBadSignature:
		return refuse("authentication_failed", "the signature does not verify")
	case auth.ReasonTokenType:
		return refuse("invalid_request", "typ must be secevent+jwt")
	}
	return refuse("invalid_request", "malformed SET")
}

// cutoff checks the claims of a verified SET of is (aud, iat, jti, the
// events, the subject) and returns the cutoff it makes and the event's
// short name.
func (r *Receiver) cutoff(is auth.Issuer, claims auth.Claims) (Cutoff, string, error) {
	if !slices.ContainsFunc(r.o.Audiences, func(a string) bool { return audienceHas(claims["aud"], a) }) {
		return Cutoff{}, "", refuse("invalid_audience", "aud is not this resource")
	}
	now := r.o.Now()
	iatF, ok := claims["iat"].(float64)
	if !ok || iatF < 0 || iatF > 253402300799 {
		return Cutoff{}, "", refuse("invalid_request", "iat missing or not a time")
	}
	iat := time.Unix(int64(iatF), 0)
	if iat.After(now.Add(r.o.Leeway)) || iat.Before(now.Add(-r.o.MaxAge-r.o.Leeway)) {
		return Cutoff{}, "", refuse("invalid_request", "iat too old or in the future")
	}
	if jti, _ := claims["jti"].(string); jti == "" {
		return Cutoff{}, "", refuse("invalid_request", "jti missing")
	}
	if _, ok := claims["exp"]; ok {
		// RFC 8417 §2.2: a SET has no exp, so that it cannot be taken
		// for an access token.
		return Cutoff{}, "", refuse("invalid_request", "a SET has no exp")
	}
	events, ok := claims["events"].(map[string]any)
	if !ok || len(events) == 0 {
		return Cutoff{}, "", refuse("invalid_request", "events missing")
	}
	uris := make([]string, 0, len(events))
	for u := range events {
		uris = append(uris, u)
	}
	slices.Sort(uris)
	for _, u := range uris {
		name, acts := cutoffEvents[u]
		if !acts {
			continue
		}
		payload, _ := events[u].(map[string]any)
		sub, err := subjectOf(is, claims["sub_id"], payload["subject"])
		if err != nil {
			return Cutoff{}, name, err
		}
		before := iat
		if ts, ok := payload["event_timestamp"].(float64); ok && ts >= 0 && ts <= 253402300799 {
			before = time.Unix(int64(ts), 0)
		}
		return Cutoff{Issuer: is.Name, Subject: sub, Before: before}, name, nil
	}
	return Cutoff{}, "other", errIgnored
}

// subjectOf returns the subject of an event: the SET's sub_id, or the
// event's subject as older transmitters send it, in the iss_sub format
// whose iss is the issuer's own; other formats (email, opaque, ...) name
// no subject of this service's tokens.
func subjectOf(is auth.Issuer, subID, eventSubject any) (string, error) {
	id, ok := subID.(map[string]any)
	if !ok {
		if id, ok = eventSubject.(map[string]any); !ok {
			return "", refuse("invalid_request", "no subject: sub_id or the event's subject")
		}
	}
	format, _ := id["format"].(string)
	if format != "iss_sub" {
		return "", refuse("invalid_request", "subject format not supported: iss_sub only")
	}
	iss, _ := id["iss"].(string)
	sub, _ := id["sub"].(string)
	if iss != is.Config.Issuer {
		return "", refuse("invalid_request", "the subject is of another issuer")
	}
	if sub == "" {
		return "", refuse("invalid_request", "the subject has no sub")
	}
	return sub, nil
}

// audienceHas reports whether aud (a string or an array of strings) names
// want.
func audienceHas(aud any, want string) bool {
	switch a := aud.(type) {
	case string:
		return a == want
	case []any:
		for _, v := range a {
			if s, ok := v.(string); ok && s == want {
				return true
			}
		}
	}
	return false
}

// peekIssuer returns the iss of a compact JWS without verifying anything,
// to choose the keys.
func peekIssuer(token string) (string, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(parts[1])
	if err != nil {
		return "", false
	}
	var p struct {
		Iss string `json:"iss"`
	}
	if json.Unmarshal(b, &p) != nil || p.Iss == "" {
		return "", false
	}
	return p.Iss, true
}

// writeJSON writes v as the JSON body of a response of status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
