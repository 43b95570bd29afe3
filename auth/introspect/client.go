package introspect

import (
	"context"
	"crypto"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/auth/mint"
	"github.com/plantstore/plantstore/observability/setting"
)

// assertionType is the client_assertion_type of RFC 7523 §2.2.
const assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// assertionLifetime is how long a client assertion is valid: one call.
const assertionLifetime = time.Minute

// credential is how the client authenticates: its secret, or its private
// key. One of the two is set.
type credential struct {
	secret []byte
	key    crypto.PrivateKey
}

// credentialFile returns the file the client's credential is read from,
// and what it holds: "private_key" or "secret".
func (t *Trust) credentialFile() (path, holds string) {
	if t.cfg.PrivateKeyFile != "" {
		return t.cfg.PrivateKeyFile, "private_key"
	}
	return t.cfg.ClientSecretFile, "secret"
}

// readCredential reads the client's secret (one trailing newline dropped)
// or private key from its file. Its error names the file and the setting,
// never what the file holds.
func (t *Trust) readCredential() (*credential, error) {
	path, key := t.credentialFile()
	if path == "" {
		return nil, nil
	}
	fail := func(err error) error {
		e := &setting.Error{Issuer: t.name, Key: "introspection_client_secret_file", Err: fmt.Errorf("%s: %w", path, err)}
		if key == "private_key" {
			e.Key = "introspection_private_key_file"
		}
		return e
	}
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fail(err)
	}
	if t.cfg.PrivateKeyFile != "" {
		k, err := mint.ParsePrivateKey(b)
		if err != nil {
			// The parser's words name block types, never key material.
			return nil, fail(errors.New("no private key it can sign with (want a PEM PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block)"))
		}
		if _, ok := k.(crypto.Signer); !ok {
			return nil, fail(errors.New("not an RSA, EC or Ed25519 private key"))
		}
		return &credential{key: k}, nil
	}
	b = []byte(strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"))
	if len(b) == 0 {
		return nil, fail(errors.New("empty"))
	}
	return &credential{secret: b}, nil
}

// Watch reads the client's secret or key file again whenever it changes
// (a mounted Secret updated), until ctx is done; a file that cannot be
// read or parsed is logged, and the credential read last keeps serving.
// The channel it returns is closed once it has stopped.
func (t *Trust) Watch(ctx context.Context) <-chan struct{} {
	path, _ := t.credentialFile()
	if path == "" {
		done := make(chan struct{})
		close(done)
		return done
	}
	log := t.log.With(zap.String("issuer", t.name), zap.String("source", path))
	return keys.WatchFile(ctx, path, log, func() {
		c, err := t.readCredential()
		if err != nil {
			log.Warn("introspection client credential not read; the last one read serves", zap.Error(err))
			return
		}
		if old := t.cred.Load(); old != nil && old.same(c) {
			return
		}
		t.cred.Store(c)
		log.Info("introspection client credential read again")
	})
}

// same reports whether c and o are the same credential.
func (c *credential) same(o *credential) bool {
	if c.key != nil || o.key != nil {
		type equaler interface{ Equal(crypto.PrivateKey) bool }
		e, ok := c.key.(equaler)
		return ok && o.key != nil && e.Equal(o.key)
	}
	return string(c.secret) == string(o.secret)
}

// authenticate adds the client's authentication to req, whose form is
// form: client_secret_basic (RFC 6749 §2.3.1, both parts form-encoded
// before Basic), or private_key_jwt (RFC 7523 §2.2, an assertion signed
// with the key, whose audience is the issuer and the endpoint).
func (t *Trust) authenticate(form url.Values, endpoint string, now time.Time) (http.Header, error) {
	h := http.Header{}
	c := t.cred.Load()
	switch {
	case c == nil:
		return h, nil
	case c.key != nil:
		jti := make([]byte, 16)
		_, _ = rand.Read(jti)
		aud := []any{endpoint}
		if t.issuer != "" {
			aud = append(aud, t.issuer)
		}
		a, err := mint.Sign(c.key, "", "JWT", map[string]any{
			"iss": t.cfg.ClientID, "sub": t.cfg.ClientID, "aud": aud,
			"jti": base64.RawURLEncoding.EncodeToString(jti),
			"iat": now.Unix(), "exp": now.Add(assertionLifetime).Unix(),
		})
		if err != nil {
			return nil, errors.New("client assertion not signed: " + err.Error())
		}
		form.Set("client_id", t.cfg.ClientID)
		form.Set("client_assertion_type", assertionType)
		form.Set("client_assertion", a)
	default:
		r := &http.Request{Header: h}
		r.SetBasicAuth(url.QueryEscape(t.cfg.ClientID), url.QueryEscape(string(c.secret)))
	}
	return h, nil
}
