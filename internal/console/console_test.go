package console

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func serve(t *testing.T, method, path string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestServe: each file with its content type, the CSP and revalidation;
// /console redirects; unknown files and other methods are refused.
func TestServe(t *testing.T) {
	tests := []struct {
		method, path string
		status       int
		contentType  string
		bodyHas      string
	}{
		{"GET", "/console/", 200, "text/html; charset=utf-8", `<script type="module" src="app.js">`},
		{"GET", "/console/index.html", 200, "text/html; charset=utf-8", "Admin token"},
		{"GET", "/console/app.js", 200, "text/javascript; charset=utf-8", "visibilitychange"},
		{"GET", "/console/request.js", 200, "text/javascript; charset=utf-8", "export class RequestView"},
		{"GET", "/console/spend.js", 200, "text/javascript; charset=utf-8", "export class SpendView"},
		{"GET", "/console/keys.js", 200, "text/javascript; charset=utf-8", "export class KeysView"},
		{"GET", "/console/console.css", 200, "text/css; charset=utf-8", ":focus-visible"},
		{"GET", "/console/favicon.svg", 200, "image/svg+xml", "<svg"},
		{"HEAD", "/console/app.js", 200, "text/javascript; charset=utf-8", ""},
		{"GET", "/console", 301, "", ""},
		{"GET", "/console/nope.js", 404, "", ""},
		{"GET", "/console/static/app.js", 404, "", ""},
		{"GET", "/console/requests/abc", 404, "", ""},
		{"GET", "/consolex", 404, "", ""},
		{"POST", "/console/", 405, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			rec := serve(t, tt.method, tt.path)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body.String())
			}
			switch tt.status {
			case 301:
				if loc := rec.Header().Get("Location"); loc != "/console/" {
					t.Fatalf("Location %q", loc)
				}
				return
			case 200:
			default:
				return
			}
			if got := rec.Header().Get("Content-Type"); got != tt.contentType {
				t.Fatalf("Content-Type %q, want %q", got, tt.contentType)
			}
			if got := rec.Header().Get("Content-Security-Policy"); got != CSP {
				t.Fatalf("CSP %q", got)
			}
			for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache", "Referrer-Policy": "no-referrer"} {
				if got := rec.Header().Get(k); got != want {
					t.Fatalf("%s %q, want %q", k, got, want)
				}
			}
			if rec.Header().Get("ETag") == "" {
				t.Fatal("no ETag")
			}
			if tt.method == "HEAD" && rec.Body.Len() != 0 {
				t.Fatalf("HEAD answered a body of %d bytes", rec.Body.Len())
			}
			if !strings.Contains(rec.Body.String(), tt.bodyHas) {
				t.Fatalf("body lacks %q", tt.bodyHas)
			}
		})
	}
}

// TestCSPIsStrict: the policy allows no inline script, no eval and no other
// origin, and API calls only to the page's own origin.
func TestCSPIsStrict(t *testing.T) {
	for _, want := range []string{"default-src 'none'", "script-src 'self';", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(CSP+";", want) {
			t.Errorf("CSP lacks %q", want)
		}
	}
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "http:", "https:", "*", "data:"} {
		if strings.Contains(CSP, bad) {
			t.Errorf("CSP allows %q", bad)
		}
	}
}

// TestRevalidation: a browser holding the current file gets 304, a stale
// one the new file.
func TestRevalidation(t *testing.T) {
	etag := serve(t, "GET", "/console/app.js").Header().Get("ETag")
	if rec := serve(t, "GET", "/console/app.js", "If-None-Match", etag); rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Fatalf("same ETag: %d with %d bytes, want 304 and none", rec.Code, rec.Body.Len())
	}
	if rec := serve(t, "GET", "/console/app.js", "If-None-Match", `"stale"`); rec.Code != http.StatusOK {
		t.Fatalf("stale ETag: %d, want 200", rec.Code)
	}
	if other := serve(t, "GET", "/console/dom.js").Header().Get("ETag"); other == etag {
		t.Fatal("two different files share an ETag")
	}
}

// remote finds a reference to another host: an absolute http(s) URL, or a
// protocol-relative //host after a quote, parenthesis, equals sign or
// whitespace (comments are written "// text", with a space).
var remote = regexp.MustCompile(`(?i)https?://[^\s"'<>)]*|(?:^|["'(=\s])//[a-z0-9-]+(?:\.[a-z0-9-]+)+`)

// namespaces are XML namespace names: identifiers that name a vocabulary
// and are never fetched, which SVG requires.
var namespaces = map[string]bool{"http://www.w3.org/2000/svg": true}

func remoteRefs(src string) []string {
	var out []string
	for _, m := range remote.FindAllString(src, -1) {
		m = strings.TrimLeft(m, "\"'(= \t\r\n")
		if !namespaces[m] {
			out = append(out, m)
		}
	}
	return out
}

// TestRemoteRefsDetector: the scan below would catch each way of naming
// another host, and lets the files' ordinary text through.
func TestRemoteRefsDetector(t *testing.T) {
	tests := []struct {
		src  string
		want bool
	}{
		{`<script src="https://cdn.example.com/x.js">`, true},
		{`<link href="//fonts.example.com/css">`, true},
		{`url(//fonts.example.net/a.woff2)`, true},
		{`fetch('http://10.0.0.1:8080/admin')`, true},
		{`@import "HTTPS://example.org/a.css";`, true},
		{`xmlns="http://www.w3.org/2000/svg/extra"`, true},
		{`const SVG_NS = 'http://www.w3.org/2000/svg';`, false},
		{`// The console's shell`, false},
		{`<a href="#/requests">`, false},
		{`fetch('/admin/health')`, false},
		{`/* comment */ a { b: c; }`, false},
	}
	for _, tt := range tests {
		if got := len(remoteRefs(tt.src)) > 0; got != tt.want {
			t.Errorf("%q: found %v, want %v", tt.src, got, tt.want)
		}
	}
}

// TestNoRemoteReferences: nothing the console ships names another host, so
// the page works offline and leaks nothing (no CDN, no remote font).
func TestNoRemoteReferences(t *testing.T) {
	n := 0
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(static, p)
		if err != nil {
			return err
		}
		n++
		for _, ref := range remoteRefs(string(b)) {
			t.Errorf("%s names another host: %s", p, ref)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Fatalf("scanned %d files, want the whole console", n)
	}
}

// TestReferencesResolve: every file index.html loads and every module a
// script imports is embedded, so no screen 404s on its own code.
func TestReferencesResolve(t *testing.T) {
	ref := regexp.MustCompile(`(?:src|href)="([^"#]+)"|from '\./([^']+)'`)
	for _, name := range []string{"index.html", "app.js", "api.js", "overview.js", "requests.js", "request.js", "spend.js", "keys.js", "dom.js"} {
		b, err := fs.ReadFile(static, "static/"+name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			target := m[1] + m[2]
			if rec := serve(t, "GET", "/console/"+target); rec.Code != http.StatusOK {
				t.Errorf("%s refers to %s: %d", name, target, rec.Code)
			}
		}
	}
}
