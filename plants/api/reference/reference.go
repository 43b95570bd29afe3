// Package reference serves the API reference page of the admin listener,
// /docs: Swagger UI rendering /openapi.json, from assets embedded in the
// binary (swagger-ui/, vendored from npm by .ci/swagger-ui with its
// licenses). The page asks nothing of any other host: its
// Content-Security-Policy allows its own assets and the document only.
package reference

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

//go:embed page.html page.css init.js swagger-ui
var files embed.FS

// CSP is the Content-Security-Policy of every answer under /docs: scripts,
// styles and the document from the admin listener itself, the data: images
// Swagger UI's stylesheet carries (its icons), nothing else; no inline
// script or style, no frames, forms or base URL.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is one file of the page, as served.
type asset struct {
	contentType string
	body        []byte // gzipped when gzipped
	gzipped     bool
	etag        string
	plain       func() []byte // body decompressed, made once when asked
}

// assets are the files under /docs/, by name.
var assets = map[string]struct{ file, contentType string }{
	"swagger-ui-bundle.js":             {"swagger-ui/swagger-ui-bundle.js.gz", "text/javascript; charset=utf-8"},
	"swagger-ui.css":                   {"swagger-ui/swagger-ui.css.gz", "text/css; charset=utf-8"},
	"page.css":                         {"page.css", "text/css; charset=utf-8"},
	"init.js":                          {"init.js", "text/javascript; charset=utf-8"},
	"LICENSE":                          {"swagger-ui/LICENSE", "text/plain; charset=utf-8"},
	"NOTICE":                           {"swagger-ui/NOTICE", "text/plain; charset=utf-8"},
	"swagger-ui-bundle.js.LICENSE.txt": {"swagger-ui/swagger-ui-bundle.js.LICENSE.txt", "text/plain; charset=utf-8"},
	"VERSION":                          {"swagger-ui/VERSION", "text/plain; charset=utf-8"},
}

// load reads the embedded files once.
var load = sync.OnceValue(func() map[string]*asset {
	out := map[string]*asset{}
	add := func(name, file, contentType string) {
		b, err := files.ReadFile(file)
		if err != nil {
			panic("reference: embedded file missing: " + file) // a build without it is broken
		}
		a := &asset{contentType: contentType, body: b, gzipped: strings.HasSuffix(file, ".gz")}
		sum := sha256.Sum256(b)
		a.etag = `"` + hex.EncodeToString(sum[:16]) + `"`
		a.plain = func() []byte { return b }
		if a.gzipped {
			a.plain = sync.OnceValue(func() []byte {
				zr, err := gzip.NewReader(bytes.NewReader(b))
				if err != nil {
					panic("reference: " + file + ": " + err.Error())
				}
				plain, err := io.ReadAll(zr)
				if err != nil {
					panic("reference: " + file + ": " + err.Error())
				}
				return plain
			})
		}
		out[name] = a
	}
	add("", "page.html", "text/html; charset=utf-8")
	for name, f := range assets {
		add(name, f.file, f.contentType)
	}
	return out
})

// File returns the content of the asset served at /docs/name, uncompressed
// (name "" is the page), and whether there is one.
func File(name string) ([]byte, bool) {
	a, ok := load()[name]
	if !ok {
		return nil, false
	}
	return a.plain(), true
}

// Handler serves the page at /docs and its assets under /docs/; /docs/
// itself redirects to the page. Other paths are 404, and methods other
// than GET and HEAD 405. Every answer carries [CSP]. The bundle and
// stylesheet go out gzipped to clients that accept it (nearly all), else
// decompressed.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		var name string
		switch {
		case r.URL.Path == "/docs":
		case r.URL.Path == "/docs/":
			// Relative, so that it holds behind a path prefix.
			h.Set("Location", "../docs")
			w.WriteHeader(http.StatusMovedPermanently)
			return
		default:
			var ok bool
			if name, ok = strings.CutPrefix(r.URL.Path, "/docs/"); !ok || name == "" {
				http.NotFound(w, r)
				return
			}
		}
		a, ok := load()[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h.Set("Content-Type", a.contentType)
		// Revalidated on every load: the assets change with the binary.
		h.Set("Cache-Control", "no-cache")
		body := a.body
		if a.gzipped {
			h.Add("Vary", "Accept-Encoding")
			if acceptsGzip(r.Header.Values("Accept-Encoding")) {
				h.Set("Content-Encoding", "gzip")
				h.Set("ETag", strings.TrimSuffix(a.etag, `"`)+`-gzip"`)
			} else {
				body = a.plain()
				h.Set("ETag", a.etag)
			}
		} else {
			h.Set("ETag", a.etag)
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	})
}

// acceptsGzip reports whether the Accept-Encoding values accept gzip
// (listed, and without q=0).
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.EqualFold(strings.TrimSpace(coding), "gzip") && strings.TrimSpace(coding) != "*" {
				continue
			}
			q := strings.ReplaceAll(strings.ToLower(params), " ", "")
			if q == "q=0" || q == "q=0.0" || q == "q=0.00" || q == "q=0.000" {
				continue
			}
			return true
		}
	}
	return false
}
