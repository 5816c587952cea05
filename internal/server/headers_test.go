package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// lastSent is the headers the mock at base got on its last chat request,
// read through its /mock/last-request route.
func lastSent(t *testing.T, base string) http.Header {
	t.Helper()
	resp, err := http.Get(base + "/mock/last-request?path=/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var last struct {
		Headers http.Header `json:"headers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&last); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/mock/last-request: %d %v", resp.StatusCode, err)
	}
	return last.Headers
}

// TestClientHeadersAllowList: only the headers of the provider's format
// reach it. A client's OpenAI-Organization, cookie, user agent or any other
// header it makes up stay at the gateway, so none of them can make the
// provider refuse the gateway's shared key (here: the mock's X-Mock-Status,
// which would answer 401).
func TestClientHeadersAllowList(t *testing.T) {
	g := start(t, setup{})
	resp, body := g.post(t, chatBody(false), "OpenAI-Organization", "org-bogus", "OpenAI-Project", "proj-bogus",
		"X-Mock-Status", "401", "Cookie", "s=1", "User-Agent", "client-ua/1", "OpenAI-Beta", "assistants=v2")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Mock-Identity") != "primary" {
		t.Fatalf("%d by %q: %s, want 200 from primary", resp.StatusCode, resp.Header.Get("X-Mock-Identity"), body)
	}
	sent := lastSent(t, g.PrimaryURL)
	for _, k := range []string{"Openai-Organization", "Openai-Project", "X-Mock-Status", "Cookie"} {
		if v := sent.Get(k); v != "" {
			t.Errorf("the provider got the client's %s: %q", k, v)
		}
	}
	if ua := sent.Get("User-Agent"); ua == "client-ua/1" {
		t.Errorf("the provider got the client's User-Agent")
	}
	if sent.Get("Openai-Beta") != "assistants=v2" || sent.Get("Authorization") != "Bearer "+primaryKey {
		t.Errorf("format header or key missing: %v", sent)
	}
}

// TestClientChosenHeaderDoesNotCoolKey: with forward_headers allowing
// OpenAI-Organization (and the mock's X-Mock-Status, to make the provider
// refuse), a 401 the client's headers provoked fails over to the backup but
// leaves the shared key healthy: the next client is served by it.
func TestClientChosenHeaderDoesNotCoolKey(t *testing.T) {
	g := start(t, setup{primaryExtra: "    forward_headers: [OpenAI-Organization, X-Mock-Status]"})
	resp, body := g.post(t, chatBody(false), "OpenAI-Organization", "org-bogus", "X-Mock-Status", "401")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Mock-Identity") != "backup" {
		t.Fatalf("%d by %q: %s, want the 401 failed over to backup", resp.StatusCode, resp.Header.Get("X-Mock-Identity"), body)
	}
	if got := lastSent(t, g.PrimaryURL).Get("Openai-Organization"); got != "org-bogus" {
		t.Fatalf("allowed OpenAI-Organization not forwarded: %q", got)
	}
	assertHealthy(t, g.target(t, "primary", 0), "after a 401 the client's header provoked")
	resp, body = g.post(t, chatBody(false))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Mock-Identity") != "primary" {
		t.Fatalf("next client: %d by %q: %s, want primary", resp.StatusCode, resp.Header.Get("X-Mock-Identity"), body)
	}
}

// hostileRoutes: primary is a test server of the test's own, backup the
// mock. %[1]s and %[3]s are consumed by the comment.
const hostileRoutes = `
# %[1]s %[3]s
providers:
  - name: primary
    base_url: PRIMARY/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
  - name: backup
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
models:
  - name: gpt-4o-mini
    candidates:
      - { provider: primary, priority: 0 }
      - { provider: backup, priority: 1 }
`

// TestProviderContentServedSafely: what a provider's odd answer becomes on
// the gateway's origin. A 400 page (text/html) reaches the client as the
// route's JSON error with the provider's status; a 200 page and a header
// block of 1 MB are provider faults that fail over to the backup; a pile of
// response headers is relayed only within the budget. Every answer carries
// nosniff, and the candidate rows say what happened.
func TestProviderContentServedSafely(t *testing.T) {
	var mode atomic.Value
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch mode.Load().(string) {
		case "400 html":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, "<html><script>alert(document.cookie)</script></html>")
		case "200 html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, "<html><script>alert(document.cookie)</script></html>")
		case "1 MB header":
			w.Header().Set("X-Big", strings.Repeat("a", 1<<20))
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[]}`)
		case "many headers":
			for i := range 200 {
				w.Header().Set("X-Pile-"+strings.Repeat("p", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26)), "v")
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Content-Type-Options", "sniff-me")
			_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[]}`)
		}
	}))
	defer hostile.Close()
	g := start(t, setup{db: true, routes: strings.Replace(hostileRoutes, "PRIMARY", hostile.URL, 1)})

	tests := []struct {
		mode, path, body string
		status           int
		by               string // X-Mock-Identity: "" when the gateway answered itself
		errorShape       string // "openai", "anthropic" or "" for a success
		rows             []string
	}{
		{"400 html", "/v1/chat/completions", chatBody(false), 400, "", "openai",
			[]string{"failed/400/upstream_http_error(primary)", "unused/0/(backup)"}},
		{"400 html", "/v1/messages", `{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, 400, "", "anthropic",
			[]string{"failed/400/upstream_http_error(primary)", "unused/0/(backup)"}},
		{"200 html", "/v1/chat/completions", chatBody(false), 200, "backup", "",
			[]string{"failed/502/upstream_protocol_error(primary)", "success/200/(backup)"}},
		{"1 MB header", "/v1/chat/completions", chatBody(false), 200, "backup", "",
			[]string{"failed/502/upstream_connect_error(primary)", "success/200/(backup)"}},
		{"many headers", "/v1/chat/completions", chatBody(false), 200, "", "",
			[]string{"success/200/(primary)", "unused/0/(backup)"}},
	}
	for _, tt := range tests {
		t.Run(tt.mode+" "+tt.path, func(t *testing.T) {
			mode.Store(tt.mode)
			req, _ := http.NewRequest(http.MethodPost, g.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := g.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || resp.Header.Get("X-Mock-Identity") != tt.by {
				t.Fatalf("%d by %q: %s, want %d by %q", resp.StatusCode, resp.Header.Get("X-Mock-Identity"), b, tt.status, tt.by)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q, want JSON", ct)
			}
			if got := resp.Header.Values("X-Content-Type-Options"); len(got) != 1 || got[0] != "nosniff" {
				t.Errorf("X-Content-Type-Options %q, want nosniff", got)
			}
			if strings.Contains(string(b), "<script>") {
				t.Errorf("the provider's page reached the client: %s", b)
			}
			var shape struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			_ = json.Unmarshal(b, &shape)
			switch tt.errorShape {
			case "openai":
				if shape.Type != "" || shape.Error.Type != "invalid_request_error" || !strings.Contains(shape.Error.Message, "text/html") {
					t.Errorf("not an OpenAI error naming the answer's type: %s", b)
				}
			case "anthropic":
				if shape.Type != "error" || shape.Error.Type != "invalid_request_error" || !strings.Contains(shape.Error.Message, "text/html") {
					t.Errorf("not an Anthropic error naming the answer's type: %s", b)
				}
			}
			if tt.mode == "many headers" {
				piled := 0
				for k := range resp.Header {
					if strings.HasPrefix(k, "X-Pile-") {
						piled++
					}
				}
				if piled == 0 || piled > 64 {
					t.Errorf("%d of the provider's 200 headers relayed, want some and at most 64", piled)
				}
			}
			_, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
			wantRows(t, rows, tt.rows...)
		})
	}
}

// TestNosniffEverywhere: the gateway's own answers carry nosniff too, on
// the routes chi serves as well as the API's: a health check, the model
// list, an unknown path, a refused request, the console.
func TestNosniffEverywhere(t *testing.T) {
	g := start(t, setup{})
	for _, path := range []string{"/healthz", "/v1/models", "/nope", "/console/"} {
		resp, err := g.client.Get(g.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if got := resp.Header.Values("X-Content-Type-Options"); len(got) != 1 || got[0] != "nosniff" {
			t.Errorf("GET %s (%d): X-Content-Type-Options %q, want nosniff", path, resp.StatusCode, got)
		}
	}
	resp, _ := g.post(t, `{"model":"nope","messages":[]}`)
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("refused request: %d, X-Content-Type-Options %q", resp.StatusCode, resp.Header.Get("X-Content-Type-Options"))
	}
}
