package keys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/plantstore/plantstore/observability/setting"
)

// Errors of OIDC discovery.
var (
	// ErrDiscoveryIssuer: the discovery document names another issuer than
	// the one it was fetched for (OpenID Connect Discovery 1.0 §4.3).
	ErrDiscoveryIssuer = errors.New("discovery issuer mismatch")
	// ErrNoJWKSURI: the discovery document has no usable jwks_uri.
	ErrNoJWKSURI = errors.New("discovery document has no jwks_uri")
)

// Discover fetches the OpenID Connect discovery document of issuer,
// <issuer>/.well-known/openid-configuration (a trailing "/" of issuer is
// dropped first, as OpenID Connect Discovery 1.0 §4 says), and returns its
// jwks_uri. The document's issuer must equal issuer exactly
// ([ErrDiscoveryIssuer] otherwise), and jwks_uri must be an absolute http or
// https URL ([ErrNoJWKSURI] otherwise). The response must be 200 and at most
// maxBytes long (1 MiB when maxBytes <= 0). A nil client means
// [http.DefaultClient]; the request is bounded by ctx.
func Discover(ctx context.Context, client *http.Client, issuer string, maxBytes int64) (jwksURI string, err error) {
	if client == nil {
		client = http.DefaultClient
	}
	where := setting.RedactURL(issuer)
	if _, err := parseHTTPURL(issuer); err != nil {
		return "", fmt.Errorf("discover %s: issuer: %w", where, err)
	}
	u := strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	doc, err := getDocument(ctx, client, u, "application/json", maxBytes)
	if err != nil {
		return "", fmt.Errorf("discover %s: %w", where, err)
	}
	var meta struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(doc, &meta); err != nil {
		return "", fmt.Errorf("discover %s: %w", where, jsonError(err))
	}
	if meta.Issuer != issuer {
		return "", fmt.Errorf("discover %s: %w: document names %q", where, ErrDiscoveryIssuer, setting.RedactURL(meta.Issuer))
	}
	if meta.JWKSURI == "" {
		return "", fmt.Errorf("discover %s: %w", where, ErrNoJWKSURI)
	}
	if _, err := parseHTTPURL(meta.JWKSURI); err != nil {
		return "", fmt.Errorf("discover %s: %w: %w", where, ErrNoJWKSURI, err)
	}
	return meta.JWKSURI, nil
}

// parseHTTPURL parses an absolute http or https URL with a host.
func parseHTTPURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, errors.New("not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("scheme %q, want http or https", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("URL has no host")
	}
	return u, nil
}

// getDocument GETs u and returns the body of a 200 response, refusing more
// than maxBytes. Error messages carry the status or the transport error,
// never the body, and name u with its secrets redacted ([RedactURL]).
func getDocument(ctx context.Context, client *http.Client, u, accept string, maxBytes int64) ([]byte, error) {
	where := setting.RedactURL(u)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: not a valid URL", where)
	}
	req.Header.Set("Accept", accept)
	span := traceRequest(req)
	resp, err := client.Do(req)
	if err != nil {
		// A *url.Error quotes the URL with its user name and query (only
		// a password is hidden): keep the cause alone.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("GET %s: %w", where, err)
	}
	defer resp.Body.Close()
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d, want 200", where, resp.StatusCode)
	}
	b, err := readLimited(resp.Body, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", where, err)
	}
	return b, nil
}
