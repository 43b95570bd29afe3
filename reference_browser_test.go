package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/plantstore/plantstore/plants/api/reference"
)

// pageEvents keeps what the browser reports while the page loads: every
// request it sends and every console entry of its log. The listener runs
// on the tab's goroutine, the test reads from its own.
type pageEvents struct {
	mu       sync.Mutex
	requests []string
	logs     []string
}

func (p *pageEvents) add(ev any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		p.requests = append(p.requests, e.Request.URL)
	case *log.EventEntryAdded:
		p.logs = append(p.logs, string(e.Entry.Source)+" "+string(e.Entry.Level)+": "+e.Entry.Text)
	}
}

func (p *pageEvents) snapshot() (requests, logs []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests), slices.Clone(p.logs)
}

// recordViolations is run in every document before its own scripts: it
// keeps the page's Content-Security-Policy violations where the test reads
// them (a script the browser is told to run is not held to the page's
// policy).
const recordViolations = `window.__violations = [];
document.addEventListener("securitypolicyviolation", e =>
  window.__violations.push(e.effectiveDirective + " " + (e.blockedURI || "inline") + " " + e.sourceFile + ":" + e.lineNumber));`

// watchPage has the tab of ctx record every request and console entry in
// the returned pageEvents, and every Content-Security-Policy violation of
// its documents in window.__violations.
func watchPage(t *testing.T, ctx context.Context) *pageEvents {
	t.Helper()
	events := &pageEvents{}
	if err := chromedp.Listen(ctx, events.add); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: recordViolations}); err != nil {
		t.Fatal(err)
	}
	return events
}

// violations returns the Content-Security-Policy violations of the page
// open in the tab of ctx.
func violations(t *testing.T, ctx context.Context) []string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.__violations`))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// foreign returns the requests that went to another host than host.
func foreign(requests []string, host string) []string {
	var out []string
	for _, r := range requests {
		u, err := url.Parse(r)
		if err != nil || u.Scheme != "data" && u.Host != host {
			out = append(out, r)
		}
	}
	return out
}

// TestBrowserAPIReference opens the admin listener's /docs in the real
// Chromium: Swagger UI renders /openapi.json with GET /plants and its
// parameters limit and after; every request the page sends goes to the
// admin listener (none to a CDN, a font host or a validator), and the
// page's Content-Security-Policy, which allows its own assets only, is
// never violated, not even when a link names another document in the
// page's query. The same watch is shown to catch a page that breaks
// either rule. With TEST_SCREENSHOT=FILE it writes what the page shows,
// as docs/api-reference.png was made.
func TestBrowserAPIReference(t *testing.T) {
	path := chromium(t)
	in := startServe(t, nil, "-dev")
	waitFor(t, patience, "/readyz 200", answers(in.admin+"/readyz", http.StatusOK))
	admin, err := url.Parse(in.admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t, path)
	events := watchPage(t, ctx)
	defer func() {
		if t.Failed() {
			requests, logs := events.snapshot()
			t.Logf("requests:\n  %s\nlog:\n  %s", strings.Join(requests, "\n  "), strings.Join(logs, "\n  "))
		}
	}()

	// The operation, opened, shows its parameters.
	op := `#operations-default-listPlants`
	err = chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(in.admin+"/docs"),
		chromedp.WaitVisible(chromedp.CSS(op+` .opblock-summary`)),
		chromedp.Click(chromedp.CSS(op+` .opblock-summary`)),
		chromedp.WaitVisible(chromedp.CSS(op+` .parameters`)),
	)
	if err != nil {
		t.Fatalf("open %s/docs and the operation: %v", in.admin, err)
	}
	summary, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(op+` .opblock-summary`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(summary, "GET") || !strings.Contains(summary, "/plants") {
		t.Errorf("the operation's summary reads %q; want GET /plants", summary)
	}
	params, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("`+op+` .parameters .parameter__name")].map(e => e.firstChild.textContent.trim())`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"limit", "after"} {
		if !slices.Contains(params, want) {
			t.Errorf("the page shows the parameters %q; want %s among them", params, want)
		}
	}
	if v := violations(t, ctx); len(v) > 0 {
		t.Errorf("Content-Security-Policy violations:\n  %s", strings.Join(v, "\n  "))
	}
	requests, logs := events.snapshot()
	if f := foreign(requests, admin.Host); len(f) > 0 {
		t.Errorf("the page sent requests to %q; want the admin listener %s only", f, admin.Host)
	}
	for _, want := range []string{"/docs", "/docs/swagger-ui-bundle.js", "/docs/swagger-ui.css", "/docs/init.js", "/openapi.json"} {
		if !slices.Contains(requests, in.admin+want) {
			t.Errorf("the page never requested %s%s", in.admin, want)
		}
	}
	for _, l := range logs {
		if strings.Contains(l, "Content Security Policy") || strings.HasPrefix(l, "security ") {
			t.Errorf("the browser's log: %s", l)
		}
	}
	if out := os.Getenv("TEST_SCREENSHOT"); out != "" {
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", filepath.Clean(out))
	}

	// A link cannot point the page at another document or configuration.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/gif")
	}))
	t.Cleanup(other.Close)
	bait := in.admin + "/docs?url=" + url.QueryEscape(other.URL+"/evil.json") + "&configUrl=" + url.QueryEscape(other.URL+"/config.json")
	// Rendered within 20 s: a page that went for the other document
	// would be refused it by its policy and render nothing.
	bctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(bctx, chromedp.Navigate(bait), chromedp.WaitVisible(chromedp.CSS(op+` .opblock-summary`))); err != nil {
		t.Fatalf("open %s, wait for GET /plants: %v", bait, err)
	}
	requests, _ = events.snapshot()
	if f := foreign(requests, admin.Host); len(f) > 0 {
		t.Errorf("/docs?url=...&configUrl=... sent requests to %q; want the admin listener only", f)
	}

	// A page under the same policy with an inline script and another
	// host's stylesheet shows two violations; one without a policy that
	// loads another host's image, a foreign request.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.URL.Path == "/strict" {
			w.Header().Set("Content-Security-Policy", reference.CSP)
			fmt.Fprintf(w, `<!doctype html><link rel="stylesheet" href="%s/x.css"><script>document.title = "inline"</script><p>bad`, other.URL)
			return
		}
		fmt.Fprintf(w, `<!doctype html><img src="%s/x.gif"><p>bad`, other.URL)
	}))
	t.Cleanup(bad.Close)
	if err := chromedp.Do(ctx, chromedp.Navigate(bad.URL+"/strict"), chromedp.WaitVisible(chromedp.CSS(`p`))); err != nil {
		t.Fatal(err)
	}
	if v := violations(t, ctx); len(v) != 2 {
		t.Errorf("a page with an inline script and another host's stylesheet: violations %q; want 2", v)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(bad.URL+"/open"), chromedp.WaitVisible(chromedp.CSS(`p`))); err != nil {
		t.Fatal(err)
	}
	requests, _ = events.snapshot()
	if f := foreign(requests, strings.TrimPrefix(bad.URL, "http://")); !slices.Contains(f, other.URL+"/x.gif") {
		t.Errorf("a page loading another host's image: foreign requests %q; want %s/x.gif", f, other.URL)
	}
}
