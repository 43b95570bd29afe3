// Package introspect trusts a token by asking its issuer whether it is
// active (OAuth 2.0 Token Introspection, RFC 7662): the way of trust of
// reference (opaque) tokens, and, for an issuer that asks to, of its JWTs
// too. It is one way an issuer's tokens are trusted ([auth.Trust]); the
// claims of the issuer's answer are held to every rule a JWT of that
// issuer meets by the auth pipeline, which also caches a positive answer
// (under keyed hashes of the token, never the token) until [Trust] says it no
// longer holds: at most the issuer's cache setting, and never past exp.
//
// What it adds is the cost bound: concurrent requests with one token share
// one call; an inactive answer is remembered a few seconds; the calls of a
// replica are bounded in number a second and in flight ([Limits]), each
// with a timeout. A request over the bound, or with the endpoint down,
// slow or answering what is not an answer, is refused with 503
// ([auth.ReasonIntrospectionUnavailable]): never a verdict on the token,
// and never another issuer's.
package introspect

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/observability/setting"
)

// maxAnswer is the largest answer of the endpoint read; a longer one is
// no answer.
const maxAnswer = 64 << 10

// retryAfter is what a refusal for want of an answer tells the caller to
// wait.
const retryAfter = time.Second

// A Trust asks one issuer's introspection endpoint about its tokens. It
// is comparable: an issuer that keeps its Trust (and its Config) keeps
// its cached tokens across a reload. It is safe for concurrent use.
type Trust struct {
	lim    *Limits
	name   string // the issuer's name, for logs and metrics
	issuer string // the iss an answer without one is taken to have
	cfg    auth.Introspection
	cred   atomic.Pointer[credential]
	log    *zap.Logger
	// keys and algorithms verify signed answers (RFC 9701).
	keys       keys.Keys
	algorithms []string
	// discovered is the endpoint discovery found, when none is configured.
	discovered discovered
	// inactive remembers the tokens the issuer said are not active.
	inactive negatives
	mu       sync.Mutex
	flights  map[[sha256.Size]byte]*flight
}

var _ auth.Trust = (*Trust)(nil)

// Config is what a Trust is made of: the issuer's name and iss, and its
// checked introspection settings.
type Config struct {
	Name          string
	Issuer        string
	Introspection auth.Introspection
	// Algorithms are those the issuer signs with, for its signed answers
	// (RFC 9701); nil means auth.DefaultAlgorithms.
	Algorithms []string
	// Keys are the issuer's keys, which verify its signed answers; nil
	// when it has none (then it cannot sign answers).
	Keys keys.Keys
}

// New returns the Trust of the issuer of c, whose calls count against
// lim (nil: limits of their own, with the defaults). It reads the
// client's secret or key file, and returns a *setting.Error naming it
// when it cannot; [Trust.Watch] follows the file's changes.
func New(c Config, lim *Limits, log *zap.Logger) (*Trust, error) {
	if lim == nil {
		lim, _ = NewLimits(Options{})
	}
	if log == nil {
		log = zap.NewNop()
	}
	t := &Trust{lim: lim, name: c.Name, issuer: c.Issuer, cfg: c.Introspection, log: log,
		keys: c.Keys, algorithms: c.Algorithms, flights: map[[sha256.Size]byte]*flight{}}
	if len(t.algorithms) == 0 {
		t.algorithms = auth.DefaultAlgorithms()
	}
	if t.cfg.JWTResponse && t.keys == nil {
		return nil, &setting.Error{Issuer: c.Name, Key: "introspection_jwt_response", Err: errors.New("signed answers are verified with the issuer's keys, and it has none: give it a key source or an issuer to discover them")}
	}
	if t.cfg.Cache <= 0 {
		t.cfg.Cache = auth.DefaultIntrospectionCache
	}
	cred, err := t.readCredential()
	if err != nil {
		return nil, err
	}
	t.cred.Store(cred)
	return t, nil
}

// Authenticator returns the authenticator of the tokens of an issuer
// whose checked Config is c, on the clock now.
func (t *Trust) Authenticator(c auth.Config, now func() time.Time) (auth.Authenticator, error) {
	return &authenticator{t: t, now: now}, nil
}

// authenticator asks about the tokens of one issuer.
type authenticator struct {
	t   *Trust
	now func() time.Time
}

// Authenticate returns the claims of the issuer's answer about token,
// stamped with the time until which the answer may be served from the
// cache: the issuer's cache setting from now, or exp when that is sooner.
func (a *authenticator) Authenticate(ctx context.Context, token string) (auth.Verdict, *auth.Error) {
	d := sha256.Sum256([]byte(token))
	now := a.now()
	if r, ok := a.t.inactive.get(d, now); ok {
		return auth.Verdict{}, auth.InvalidToken(r)
	}
	claims, err := a.t.ask(ctx, d, token, a.now)
	if err != nil {
		return auth.Verdict{}, err
	}
	until := now.Add(a.t.cfg.Cache)
	if exp, ok := claims["exp"].(float64); ok && exp >= 0 && exp < float64(until.Unix()) {
		until = time.Unix(int64(exp), 0)
	}
	return auth.Verdict{Claims: claims, Stamp: uint64(until.UnixNano()), Cacheable: true, Digest: true, Introspected: true}, nil
}

// Holds reports whether the answer of stamp may still be served at now.
func (a *authenticator) Holds(stamp uint64, now time.Time) bool {
	return now.UnixNano() < int64(stamp)
}

// Ready is always nil: whether the endpoint answers is no part of
// readiness, since cached answers keep serving while it does not.
func (a *authenticator) Ready(time.Time) error { return nil }

// A flight is one call to the endpoint, which the requests with the same
// token wait for.
type flight struct {
	done    chan struct{}
	claims  auth.Claims
	err     *auth.Error
	waiters atomic.Int32 // the requests waiting for it besides the caller
}

// ask returns the claims of the issuer's answer about token, whose SHA-256
// is d, sharing one call among the requests that ask at once.
func (t *Trust) ask(ctx context.Context, d [sha256.Size]byte, token string, now func() time.Time) (auth.Claims, *auth.Error) {
	t.mu.Lock()
	if f, ok := t.flights[d]; ok {
		f.waiters.Add(1)
		t.mu.Unlock()
		select {
		case <-f.done:
			if f.err != nil {
				// Each request's own: the pipeline adds to a refusal.
				e := *f.err
				return nil, &e
			}
			return f.claims, nil
		case <-ctx.Done():
			return nil, auth.Unavailable(retryAfter)
		}
	}
	// Unavailable until the call says otherwise, so that the waiters of a
	// call that panicked are refused, not left waiting.
	f := &flight{done: make(chan struct{}), err: auth.Unavailable(retryAfter)}
	t.flights[d] = f
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.flights, d)
		t.mu.Unlock()
		close(f.done)
	}()
	f.claims, f.err = t.call(ctx, token)
	if f.err != nil {
		if f.err.Reason != auth.ReasonIntrospectionUnavailable {
			t.inactive.put(d, f.err.Reason, now().Add(min(negativeFor, t.cfg.Cache)))
		}
		// A copy: the waiters copy f.err once it is done.
		e := *f.err
		return nil, &e
	}
	return f.claims, nil
}

// call asks the endpoint about token, within the limits, and reads its
// answer; it counts the request by its result, and makes a span of the
// call.
func (t *Trust) call(ctx context.Context, token string) (auth.Claims, *auth.Error) {
	obs := t.lim.obs
	release, ok := t.lim.take()
	if !ok {
		obs.count(t.name, resultLimited)
		return nil, auth.Unavailable(retryAfter)
	}
	defer release()
	// The call is the token's, not the request's that happened to make
	// it: the others waiting on it are not failed by its caller leaving.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.lim.timeout)
	defer cancel()
	start := time.Now()
	ctx, span := obs.start(ctx, t.name, t.cfg.Endpoint)
	claims, ae, result := t.exchange(ctx, token)
	obs.end(span, t.name, result, start)
	obs.count(t.name, result)
	return claims, ae
}

// exchange posts the request about token and reads the answer, and
// returns the result it counts as.
func (t *Trust) exchange(ctx context.Context, token string) (auth.Claims, *auth.Error, string) {
	body, err := t.post(ctx, token)
	if err != nil {
		t.log.Warn("introspection failed", zap.String("issuer", t.name), zap.Error(err))
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, auth.Unavailable(retryAfter), resultTimeout
		}
		return nil, auth.Unavailable(retryAfter), resultError
	}
	claims, ae, err := t.answer(body, token)
	switch {
	case err != nil:
		t.log.Warn("introspection answer refused", zap.String("issuer", t.name), zap.Error(err))
		return nil, auth.Unavailable(retryAfter), resultError
	case ae != nil:
		return nil, ae, resultInactive
	}
	return claims, nil, resultActive
}

// post sends the RFC 7662 §2.1 request for token and returns the body of
// a 200 answer. Its errors name the endpoint without its query, never the
// token or the secret.
func (t *Trust) post(ctx context.Context, token string) ([]byte, error) {
	endpoint, err := t.endpoint(ctx)
	if err != nil {
		return nil, err
	}
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	h, err := t.authenticate(form, endpoint, time.Now())
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, errors.New("endpoint " + setting.RedactURL(endpoint) + ": not a URL")
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if t.cfg.JWTResponse {
		req.Header.Set("Accept", jwtAnswerType)
	}
	where := setting.RedactURL(endpoint)
	resp, err := t.lim.client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s: no answer within %s", where, t.lim.timeout)
		}
		return nil, fmt.Errorf("%s: %s", where, causeOf(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
		return nil, fmt.Errorf("%s: status %d", where, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %s", where, causeOf(err))
	}
	if len(body) > maxAnswer {
		return nil, fmt.Errorf("%s: answer over %d bytes", where, maxAnswer)
	}
	if t.cfg.JWTResponse {
		if body, err = t.verifyAnswer(ctx, resp.Header.Get("Content-Type"), body); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	return body, nil
}

// causeOf returns the innermost error of err, the url.Error's URL (which
// may carry a query) left out.
func causeOf(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// answer reads the endpoint's answer about token: a JSON object whose
// active is the JSON true, else the token is inactive (RFC 7662 §2.2: a
// string "true" or no active at all is no yes); a token_type that names a
// refresh or ID token is no access token; an answer that names another
// token than token is no answer (the error, which names nothing of the
// token). The iss of an answer without one is the issuer's.
func (t *Trust) answer(body []byte, token string) (auth.Claims, *auth.Error, error) {
	var claims auth.Claims
	if err := json.Unmarshal(body, &claims); err != nil || claims == nil {
		return nil, nil, errors.New("the answer is not a JSON object")
	}
	if active, ok := claims["active"].(bool); !ok || !active {
		return nil, auth.InvalidToken(auth.ReasonInactive), nil
	}
	if echoed, ok := claims["token"]; ok && echoed != token {
		return nil, nil, errAnotherToken
	}
	if jti, ok := jwtID(token); ok {
		if got, present := claims["jti"]; present && got != jti {
			return nil, nil, errAnotherToken
		}
	}
	switch tt := claims["token_type"].(type) {
	case nil:
	case string:
		if notAccessToken(tt) {
			return nil, auth.InvalidToken(auth.ReasonTokenType), nil
		}
	default:
		return nil, auth.InvalidToken(auth.ReasonClaims), nil
	}
	delete(claims, "active")
	delete(claims, "token")
	if _, ok := claims["iss"]; !ok && t.issuer != "" {
		claims["iss"] = t.issuer
	}
	return claims, nil, nil
}

// errAnotherToken: the endpoint answered about another token than the one
// asked about.
var errAnotherToken = errors.New("the answer is about another token")

// notAccessToken reports whether a token_type names a refresh token or an
// ID token (RFC 8693 §3 type URIs or plain names).
func notAccessToken(tt string) bool {
	t := strings.ToLower(tt)
	return strings.Contains(t, "refresh") || strings.Contains(t, "id_token") || strings.Contains(t, "id-token") || t == "id"
}

// jwtID returns the jti of token when it is a JWS in compact form with a
// string jti, read without verifying anything: to see that an answer is
// about this token.
func jwtID(token string) (string, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", false
	}
	var p struct {
		JTI *string `json:"jti"`
	}
	if json.Unmarshal(b, &p) != nil || p.JTI == nil {
		return "", false
	}
	return *p.JTI, true
}
