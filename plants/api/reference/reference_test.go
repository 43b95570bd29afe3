package reference_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/plants/api/reference"
)

// get sends a request to the handler and returns the answer with its body
// as sent (not decompressed).
func get(t *testing.T, method, path string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	reference.Handler().ServeHTTP(rec, req)
	resp := rec.Result()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// versionSums returns the SHA-256 sums VERSION records, by file name.
func versionSums(t *testing.T) map[string]string {
	t.Helper()
	v, ok := reference.File("VERSION")
	if !ok {
		t.Fatal("no VERSION")
	}
	sums := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^sha256 ([0-9a-f]{64}) (\S+)$`).FindAllStringSubmatch(string(v), -1) {
		sums[m[2]] = m[1]
	}
	if !regexp.MustCompile(`(?m)^version \d+\.\d+\.\d+$`).Match(v) || !regexp.MustCompile(`(?m)^integrity sha512-`).Match(v) {
		t.Errorf("VERSION without a version or npm's integrity:\n%s", v)
	}
	return sums
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestVendoredFiles checks the embedded Swagger UI against the checksums
// .ci/swagger-ui recorded from npm's tarball: the bundle and stylesheet as
// served (decompressed) and the licenses.
func TestVendoredFiles(t *testing.T) {
	sums := versionSums(t)
	for _, name := range []string{"swagger-ui-bundle.js", "swagger-ui.css", "LICENSE", "NOTICE", "swagger-ui-bundle.js.LICENSE.txt"} {
		b, ok := reference.File(name)
		if !ok {
			t.Errorf("%s is not embedded", name)
			continue
		}
		if want, got := sums[name], sum(b); got != want {
			t.Errorf("%s: sha256 %s; VERSION says %q", name, got, want)
		}
	}
	if lic, _ := reference.File("LICENSE"); !bytes.Contains(lic, []byte("Apache License")) {
		t.Error("LICENSE is not Swagger UI's Apache License")
	}
}

func TestHandler(t *testing.T) {
	sums := versionSums(t)
	tests := []struct {
		name     string
		method   string
		path     string
		header   map[string]string
		status   int
		ctype    string
		encoding string
		sha256   string // of the body, decompressed, when set
	}{
		{"the page", "GET", "/docs", nil, 200, "text/html; charset=utf-8", "", ""},
		{"the bundle, gzipped", "GET", "/docs/swagger-ui-bundle.js", map[string]string{"Accept-Encoding": "gzip, deflate, br"}, 200, "text/javascript; charset=utf-8", "gzip", sums["swagger-ui-bundle.js"]},
		{"the bundle, plain", "GET", "/docs/swagger-ui-bundle.js", nil, 200, "text/javascript; charset=utf-8", "", sums["swagger-ui-bundle.js"]},
		{"the bundle, gzip refused", "GET", "/docs/swagger-ui-bundle.js", map[string]string{"Accept-Encoding": "br, gzip;q=0"}, 200, "text/javascript; charset=utf-8", "", sums["swagger-ui-bundle.js"]},
		{"the stylesheet", "GET", "/docs/swagger-ui.css", map[string]string{"Accept-Encoding": "gzip"}, 200, "text/css; charset=utf-8", "gzip", sums["swagger-ui.css"]},
		{"the initializer", "GET", "/docs/init.js", nil, 200, "text/javascript; charset=utf-8", "", ""},
		{"the license", "HEAD", "/docs/LICENSE", nil, 200, "text/plain; charset=utf-8", "", ""},
		{"the directory", "GET", "/docs/", nil, 301, "", "", ""},
		{"an unknown asset", "GET", "/docs/swagger-ui-standalone-preset.js", nil, 404, "text/plain; charset=utf-8", "", ""},
		{"the embedded directory", "GET", "/docs/swagger-ui/LICENSE", nil, 404, "text/plain; charset=utf-8", "", ""},
		{"another method", "POST", "/docs", nil, 405, "text/plain; charset=utf-8", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, tt.method, tt.path, tt.header)
			if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != tt.ctype || resp.Header.Get("Content-Encoding") != tt.encoding {
				t.Fatalf("%s %s = %d, Content-Type %q, Content-Encoding %q; want %d, %q, %q", tt.method, tt.path,
					resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Encoding"), tt.status, tt.ctype, tt.encoding)
			}
			if got := resp.Header.Get("Content-Security-Policy"); got != reference.CSP {
				t.Errorf("%s %s: Content-Security-Policy %q; want %q", tt.method, tt.path, got, reference.CSP)
			}
			if tt.sha256 != "" {
				if tt.encoding == "gzip" {
					body = gunzip(t, body)
				}
				if got := sum(body); got != tt.sha256 {
					t.Errorf("%s %s: body's sha256 %s; want %s", tt.method, tt.path, got, tt.sha256)
				}
			}
			if tt.status == 301 && resp.Header.Get("Location") != "../docs" {
				t.Errorf("%s %s: Location %q; want ../docs (relative, for a path prefix)", tt.method, tt.path, resp.Header.Get("Location"))
			}
		})
	}
}

// TestHandlerRevalidates checks the ETag of each encoding: a client that
// holds the asset gets 304.
func TestHandlerRevalidates(t *testing.T) {
	for _, enc := range []string{"gzip", ""} {
		h := map[string]string{"Accept-Encoding": enc}
		resp, _ := get(t, "GET", "/docs/swagger-ui.css", h)
		etag := resp.Header.Get("ETag")
		if etag == "" || resp.Header.Get("Cache-Control") != "no-cache" || !strings.Contains(resp.Header.Get("Vary"), "Accept-Encoding") {
			t.Fatalf("Accept-Encoding %q: ETag %q, Cache-Control %q, Vary %q; want an ETag, no-cache, Vary: Accept-Encoding", enc,
				etag, resp.Header.Get("Cache-Control"), resp.Header.Get("Vary"))
		}
		h["If-None-Match"] = etag
		if resp, _ := get(t, "GET", "/docs/swagger-ui.css", h); resp.StatusCode != http.StatusNotModified {
			t.Errorf("Accept-Encoding %q, If-None-Match %s = %d; want 304", enc, etag, resp.StatusCode)
		}
	}
}

// TestPageAssets checks that every script and stylesheet the page names
// is served, from this handler, by a relative URL (so that the page works
// behind a path prefix), and that the page has no inline script or style,
// which its policy would block.
func TestPageAssets(t *testing.T) {
	page, _ := reference.File("")
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(string(page), -1)
	if len(refs) < 4 {
		t.Fatalf("the page names %d assets; want the bundle, the stylesheets and the initializer", len(refs))
	}
	for _, m := range refs {
		ref := m[1]
		switch {
		case ref == "openapi.json" || ref == "data:,":
			continue
		case !strings.HasPrefix(ref, "docs/"):
			t.Errorf("the page names %q; want docs/NAME, relative", ref)
			continue
		}
		if resp, _ := get(t, "GET", "/"+ref, nil); resp.StatusCode != 200 {
			t.Errorf("the page names %s, which is %d", ref, resp.StatusCode)
		}
	}
	if regexp.MustCompile(`<script>|<style|\sstyle="|\son[a-z]+="`).Match(page) {
		t.Errorf("the page has an inline script or style:\n%s", page)
	}
}
