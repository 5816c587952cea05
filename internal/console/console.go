// Package console owns the operator console: a few hand-written static files
// (HTML, CSS, JavaScript, an icon) embedded in the binary and the handler
// that serves them under /console/. The page signs in with the admin token
// itself and reads the /admin JSON API; nothing here touches the token, so
// the files are public and carry no secret.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// Prefix is where the console is served; "/console" redirects to it.
const Prefix = "/console/"

// CSP allows only the console's own files and same-origin API calls: no
// inline script or style, no other host, no framing.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

//go:embed static
var static embed.FS

// file is one embedded file, ready to serve.
type file struct {
	body        []byte
	contentType string
	etag        string
}

// contentTypes lists the extensions the console ships; an embedded file with
// another extension is a build mistake that New reports.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// Handler serves the embedded files: Prefix is index.html, Prefix+name the
// file name, "/console" a redirect to Prefix, anything else 404.
type Handler struct {
	files   map[string]file // by path under Prefix ("" is index.html)
	modTime time.Time
}

// New reads the embedded files once.
func New() (*Handler, error) {
	return newHandler(static)
}

func newHandler(fsys fs.FS) (*Handler, error) {
	sub, err := fs.Sub(fsys, "static")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	h := &Handler{files: map[string]file{}}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			return fmt.Errorf("console: no content type for %s", p)
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		h.files[p] = file{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	index, ok := h.files["index.html"]
	if !ok {
		return nil, fmt.Errorf("console: no index.html")
	}
	h.files[""] = index
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, Prefix)
	f, found := h.files[name]
	if !ok || !found {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	// The files change with the binary, not with time: the browser keeps
	// them but asks again each load, and the ETag (their hash) makes the
	// answer a 304 until a new build ships different files.
	hd.Set("Cache-Control", "no-cache")
	hd.Set("Content-Type", f.contentType)
	hd.Set("ETag", f.etag)
	// ServeContent answers If-None-Match with 304, HEAD without a body and
	// ranges; the zero modification time leaves Last-Modified out.
	http.ServeContent(w, r, name, h.modTime, bytes.NewReader(f.body))
}
