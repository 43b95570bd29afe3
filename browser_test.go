package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/plantstore/plantstore/observability/testenv"
	"github.com/plantstore/plantstore/plants"
)

// chromium returns the path of the Chromium binary for the browser tests,
// which run with TEST_SOAK=1 (as .ci/run sets) or TEST_BROWSER=1. Without
// Chromium they skip, unless TEST_REQUIRE_TOOLS=1.
func chromium(t *testing.T) string {
	t.Helper()
	testenv.Browser(t)
	for _, name := range []string{"chromium", "chromium-headless-shell", "/usr/lib/chromium/chromium"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("TEST_REQUIRE_TOOLS") == "1" {
		t.Fatal("chromium is required (TEST_REQUIRE_TOOLS=1): apt-get install chromium")
	}
	testenv.Skip(t, "no chromium: apt-get install chromium")
	return ""
}

// newBrowser starts a headless Chromium with a profile of its own and
// returns a context of one tab in it; both end with the test.
func newBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	// The flags keep Chromium off the network but for the pages it is
	// sent to (it looks up and calls its vendor's hosts otherwise).
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return bctx
}

// fetchResult is what the page's fetch found out.
type fetchResult struct {
	OK        bool   `json:"ok"`
	Error     string `json:"error"`
	Status    int    `json:"status"`
	Link      string `json:"link"`
	RequestID string `json:"requestId"`
	Challenge string `json:"challenge"`
	Plants    int    `json:"plants"`
}

// pageFetch opens page in the tab of ctx and has it fetch url with the
// headers, as a script of the page: what it can read of the answer, or the
// error that fetch rejected with.
func pageFetch(t *testing.T, ctx context.Context, page, url string, headers map[string]string) fetchResult {
	t.Helper()
	if headers == nil {
		headers = map[string]string{}
	}
	h, err := json.Marshal(headers)
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`(async () => {
  try {
    const r = await fetch(%q, {headers: %s});
    const body = r.status === 200 ? await r.json() : [];
    return {ok: true, status: r.status, link: r.headers.get("Link") || "",
      requestId: r.headers.get("X-Request-ID") || "", challenge: r.headers.get("WWW-Authenticate") || "",
      plants: body.length};
  } catch (e) {
    return {ok: false, error: String(e)};
  }
})()`, url, h)
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatalf("open %s: %v", page, err)
	}
	res, err := chromedp.Run(ctx, chromedp.Evaluate[fetchResult](script, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("fetch %s from %s: %v", url, page, err)
	}
	return res
}

// TestBrowserCORS has real Chromium fetch /plants?limit=1 with a bearer
// token from a page of a listed origin, and read the Link and X-Request-ID
// headers, which only Access-Control-Expose-Headers makes readable; a page
// of another origin is refused by the browser itself: its fetch rejects,
// whether the service refused the preflight or answered a GET without the
// header that would let the page read it.
func TestBrowserCORS(t *testing.T) {
	path := chromium(t)
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html><title>plantstore client</title><p>a page calling the API</p>")
	})
	listed := httptest.NewServer(page)
	t.Cleanup(listed.Close)
	unlisted := httptest.NewServer(page)
	t.Cleanup(unlisted.Close)

	token, keyFile := mintTestToken(t, "EdDSA", "-sub", "alice", "-groups", "gardeners")
	in := startServe(t, nil, "-jwt-key-file", keyFile, "-cors-origins", listed.URL)
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	if n := len(expectedPlants(plants.SampleCatalog(), plants.Caller{Subject: "alice", Groups: []string{"gardeners"}})); n < 2 {
		t.Fatalf("alice reads %d plants of the sample; the test needs two pages", n)
	}
	ctx := newBrowser(t, path)
	api := in.api + "/plants?limit=1"
	auth := map[string]string{"Authorization": "Bearer " + token, "X-Request-ID": "browser-req-1"}

	t.Run("listed origin reads the page and its headers", func(t *testing.T) {
		res := pageFetch(t, ctx, listed.URL, api, auth)
		if !res.OK || res.Status != http.StatusOK || res.Plants != 1 {
			t.Fatalf("fetch from %s = %+v; want 200 with one plant", listed.URL, res)
		}
		if !strings.Contains(res.Link, `rel="next"`) || !strings.Contains(res.Link, "after=") {
			t.Errorf("the page read Link %q; want the next page's", res.Link)
		}
		if res.RequestID != "browser-req-1" {
			t.Errorf("the page read X-Request-ID %q; want browser-req-1", res.RequestID)
		}
	})
	t.Run("listed origin reads a refusal", func(t *testing.T) {
		res := pageFetch(t, ctx, listed.URL, api, map[string]string{"Authorization": "Bearer " + token + "x"})
		if !res.OK || res.Status != http.StatusUnauthorized || !strings.Contains(res.Challenge, "invalid_token") || res.RequestID == "" {
			t.Errorf("fetch with a bad token from %s = %+v; want 401 with its challenge and request ID readable", listed.URL, res)
		}
	})
	t.Run("unlisted origin is blocked at the preflight", func(t *testing.T) {
		res := pageFetch(t, ctx, unlisted.URL, api, auth)
		if res.OK || !strings.Contains(res.Error, "Failed to fetch") {
			t.Errorf("fetch with a token from %s = %+v; want the browser to reject it", unlisted.URL, res)
		}
	})
	t.Run("unlisted origin cannot read a simple GET", func(t *testing.T) {
		res := pageFetch(t, ctx, unlisted.URL, api, nil)
		if res.OK || !strings.Contains(res.Error, "Failed to fetch") {
			t.Errorf("fetch without headers from %s = %+v; want the browser to reject it", unlisted.URL, res)
		}
	})
	// The browser did ask: the service answered the listed origin's
	// preflight, refused the other's, and answered the simple GET (with
	// nothing that lets the page read it).
	var metrics []byte
	defer func() {
		if t.Failed() {
			t.Logf("/metrics:\n%s", regexp.MustCompile(`(?m)^plantstore_http_requests_total.*$`).FindAll(metrics, -1))
		}
	}()
	waitFor(t, patience, "the browser's requests on /metrics", func() bool {
		_, metrics, _ = get(t, in.admin+"/metrics", "")
		return strings.Contains(string(metrics), `plantstore_http_requests_total{code="204",method="OPTIONS",route="/plants"}`) &&
			strings.Contains(string(metrics), `plantstore_http_requests_total{code="403",method="OPTIONS",route="/plants"} 1`) &&
			strings.Contains(string(metrics), `plantstore_http_requests_total{code="401",method="GET",route="/plants"} 2`)
	})
}
