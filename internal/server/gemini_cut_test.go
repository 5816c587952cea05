package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// geminiCutRoutes: per route, a model whose gemini primary commits at its
// first event and one (-held) whose primary holds ten, each with its own
// providers so that no case's failures cool another's; the backup is the
// openai mock.
func geminiCutRoutes() string {
	var b strings.Builder
	b.WriteString("# %[3]s\nproviders:\n")
	models := []string{"chat", "chat-held", "messages", "messages-held"}
	for _, m := range models {
		fmt.Fprintf(&b, "  - { name: %s-p, format: gemini, base_url: \"%%[1]s/v1beta\", api_keys: [\"${PRIMARY_KEY}\"], max_concurrency: 4", m)
		if strings.HasSuffix(m, "-held") {
			b.WriteString(", stream_commit: { events: 10 }")
		}
		fmt.Fprintf(&b, " }\n  - { name: %s-b, base_url: \"%%[2]s/v1\", api_keys: [\"${BACKUP_KEY}\"], max_concurrency: 4 }\n", m)
	}
	b.WriteString("models:\n")
	for _, m := range models {
		fmt.Fprintf(&b, "  - { name: %s, candidates: [{ provider: %s-p, model: gemini-2.5-flash }, { provider: %s-b, model: up, priority: 1 }] }\n", m, m, m)
	}
	return b.String()
}

// TestGeminiStreamWithoutFinishReason: Gemini has no last event, so a
// stream that ends before any finishReason was cut: before the commit
// point it fails over to the backup, after it the client gets its route's
// error frame (never a [DONE] or a message_stop) and the row is
// stream_interrupted, as for an anthropic provider.
func TestGeminiStreamWithoutFinishReason(t *testing.T) {
	g := start(t, setup{db: true, routes: geminiCutRoutes(),
		primary: mockupstream.Behavior{Identity: "primary", Chunks: 5, EndAfterChunks: 2},
		backup:  mockupstream.Behavior{Identity: "backup", Chunks: 2}})
	for _, c := range []struct{ route, path, body, frame, final string }{
		{"chat", "/v1/chat/completions", `{"model":%q,"messages":[{"role":"user","content":"hi"}],"stream":true}`,
			`"code":"stream_interrupted"`, "[DONE]"},
		{"messages", "/v1/messages", `{"model":%q,"max_tokens":64,"messages":[{"role":"user","content":"hi"}],"stream":true}`,
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\"", "message_stop"},
	} {
		t.Run(c.route+"/before commit", func(t *testing.T) {
			m := c.route + "-held"
			resp, body, err := g.postStream(t, c.path, fmt.Sprintf(c.body, m))
			if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Hello from backup") ||
				strings.Contains(string(body), "primary") || !strings.Contains(string(body), c.final) {
				t.Fatalf("%d %v: the client did not get the backup's whole answer alone:\n%s", resp.StatusCode, err, body)
			}
			_, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
			wantRows(t, rows, "failed/502/stream_interrupted("+m+"-p)", "success/200/("+m+"-b)")
		})
		t.Run(c.route+"/after commit", func(t *testing.T) {
			resp, body, _ := g.postStream(t, c.path, fmt.Sprintf(c.body, c.route))
			s := string(body)
			if resp.StatusCode != http.StatusOK || !strings.Contains(s, "Hello from primary") || !strings.Contains(s, c.frame) ||
				strings.Contains(s, c.final) || strings.Contains(s, "end_turn") || strings.Contains(s, `"finish_reason":"stop"`) {
				t.Fatalf("%d: the cut stream did not end with the error frame alone:\n%s", resp.StatusCode, s)
			}
			req, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
			wantRows(t, rows, "failed/502/stream_interrupted("+c.route+"-p)", "unused/0/("+c.route+"-b)")
			if req.Status != "failed" || *req.StatusCode != http.StatusBadGateway {
				t.Fatalf("request %s %d, want failed 502", req.Status, *req.StatusCode)
			}
		})
	}
}

// TestGeminiBlockedPrompt: a prompt Gemini blocks (promptFeedback with a
// blockReason and no candidate), whole or streamed, is the client's 400 in
// its own shape, and no other candidate is tried: another Gemini key
// would block it too, and the client must learn why.
func TestGeminiBlockedPrompt(t *testing.T) {
	const blocked = `{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":5,"totalTokenCount":5}}`
	gem := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasSuffix(r.URL.Path, ":streamGenerateContent") {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: "+blocked+"\r\n\r\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, blocked)
	}))
	t.Cleanup(gem.Close)
	routes := strings.Replace(geminiRoutes, "base_url: %[1]s/v1beta", "base_url: "+gem.URL+"/v1beta\n    # %[1]s", 1)
	g := start(t, setup{db: true, routes: routes})
	for _, c := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"gemini-2.5-flash","messages":[{"role":"user","content":"hi"}]}`, `"code":"content_filter"`},
		{"/v1/chat/completions", `{"model":"gemini-2.5-flash","stream":true,"messages":[{"role":"user","content":"hi"}]}`, `"code":"content_filter"`},
		{"/v1/messages", `{"model":"gemini-2.5-flash","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`, `"type":"error"`},
		{"/v1/messages", `{"model":"gemini-2.5-flash","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, `"type":"error"`},
	} {
		resp, body, _ := g.postStream(t, c.path, c.body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), c.want) ||
			!strings.Contains(string(body), "PROHIBITED_CONTENT") {
			t.Fatalf("%s %s: %d %s", c.path, c.body, resp.StatusCode, body)
		}
		_, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
		wantRows(t, rows, "failed/400/upstream_http_error(gem)", "unused/0/(backup)")
	}
	if n := g.Backup.Stats().Requests; n != 0 {
		t.Fatalf("the backup got %d requests", n)
	}
}

// TestGeminiBadKeyFailsOver: Gemini answers a bad key 400 INVALID_ARGUMENT
// with the reason API_KEY_INVALID. That is the key's fault, not the
// client's: the request fails over (to the openai backup here) instead of
// relaying a 400 the client could do nothing about.
func TestGeminiBadKeyFailsOver(t *testing.T) {
	gem := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT",`+
			`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`)
	}))
	t.Cleanup(gem.Close)
	routes := strings.Replace(geminiRoutes, "base_url: %[1]s/v1beta", "base_url: "+gem.URL+"/v1beta\n    # %[1]s", 1)
	g := start(t, setup{db: true, routes: routes})
	resp, body := g.post(t, `{"model":"gemini-2.5-flash","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Hello from backup") {
		t.Fatalf("%d: %s", resp.StatusCode, body)
	}
	_, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
	wantRows(t, rows, "failed/400/upstream_http_error(gem)", "success/200/(backup)")
	if h := g.target(t, "gem", 0); h.CooldownUntil == nil {
		t.Fatalf("the refused key did not cool, as a 401's does: %s", h)
	}
}
