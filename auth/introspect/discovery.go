package introspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/plantstore/plantstore/observability/setting"
)

// maxDocument is the largest discovery document read.
const maxDocument = 1 << 20

// rediscoverAfter is how long a failed discovery is not tried again: the
// requests meanwhile are refused at once (503).
const rediscoverAfter = 10 * time.Second

// discovered is the introspection endpoint that the issuer's discovery
// document names, found at the first call that needs it.
type discovered struct {
	mu   sync.Mutex
	url  string
	next time.Time // no try before then, after a failure
}

// endpoint returns the endpoint to ask: the configured one, or the
// introspection_endpoint of the issuer's OpenID Connect discovery document
// (whose issuer must be the issuer), read once.
func (t *Trust) endpoint(ctx context.Context) (string, error) {
	if t.cfg.Endpoint != "" {
		return t.cfg.Endpoint, nil
	}
	d := &t.discovered
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.url != "" {
		return d.url, nil
	}
	if time.Now().Before(d.next) {
		return "", errors.New("discovery of the introspection endpoint failed lately")
	}
	u, err := t.discover(ctx)
	if err != nil {
		d.next = time.Now().Add(rediscoverAfter)
		return "", err
	}
	d.url = u
	return u, nil
}

// discover reads the issuer's discovery document.
func (t *Trust) discover(ctx context.Context) (string, error) {
	doc := strings.TrimSuffix(t.issuer, "/") + "/.well-known/openid-configuration"
	where := setting.RedactURL(doc)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, doc, nil)
	if err != nil {
		return "", fmt.Errorf("discovery %s: not a URL", where)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := t.lim.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("discovery %s: %s", where, causeOf(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("discovery %s: status %d", where, resp.StatusCode)
	}
	var m struct {
		Issuer   string `json:"issuer"`
		Endpoint string `json:"introspection_endpoint"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxDocument)).Decode(&m); err != nil {
		return "", fmt.Errorf("discovery %s: not a discovery document", where)
	}
	switch {
	case m.Issuer != t.issuer:
		return "", fmt.Errorf("discovery %s: the document is of issuer %q", where, m.Issuer)
	case m.Endpoint == "":
		return "", fmt.Errorf("discovery %s: the document names no introspection_endpoint", where)
	case !strings.HasPrefix(m.Endpoint, "https://") && !strings.HasPrefix(m.Endpoint, "http://"):
		return "", fmt.Errorf("discovery %s: introspection_endpoint is not an http or https URL", where)
	}
	return m.Endpoint, nil
}
