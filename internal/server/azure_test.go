package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// azureRoutes: the primary mock as an Azure OpenAI deployment (tier 0)
// and as the same resource's v1 API, the backup as plain OpenAI (tier 1).
const azureRoutes = `
providers:
  - name: az
    base_url: %[1]s
    api_keys: ["${PRIMARY_KEY}"]
    azure: { deployment: gpt-4o-prod, api_version: "2024-10-21" }
    max_concurrency: 8
  - name: az-v1
    base_url: %[1]s
    api_keys: ["${PRIMARY_KEY}"]
    azure: {}
    max_concurrency: 8
  - name: backup
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
models:
  - name: gpt-4o
    candidates:
      - { provider: az, model: gpt-4o, priority: 0 }
      - { provider: backup, model: up-backup-mini, priority: 1 }
  - name: gpt-4o-v1
    candidates:
      - { provider: az-v1, model: gpt-4o }
`

// TestAzureProvider: chat completions (stream and not) and Anthropic
// clients reach an Azure deployment at its path with its api-version and
// the key in api-key (no Authorization header); the v1 API is plain
// OpenAI under /openai/v1, Responses included; a deployment serves no
// Responses API; and a 429 from the deployment fails over.
func TestAzureProvider(t *testing.T) {
	g := start(t, setup{routes: azureRoutes, db: true})
	for _, tc := range []struct{ name, path, body, want string }{
		{"chat", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, `"finish_reason":"stop"`},
		{"chat stream", "/v1/chat/completions", `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "data: [DONE]"},
		{"messages", "/v1/messages", `{"model":"gpt-4o","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, `"stop_reason":"end_turn"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body, err := g.postStream(t, tc.path, tc.body)
			if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), tc.want) || !strings.Contains(string(body), "primary") {
				t.Fatalf("%d %v: %s", resp.StatusCode, err, body)
			}
			_, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
			wantRows(t, rows, "success/200/(az)", "unused/0/(backup)")
			last, ok := g.Primary.LastRequestAt("")
			if !ok {
				t.Fatal("the mock saw no request")
			}
			if last.Path != "/openai/deployments/gpt-4o-prod/chat/completions" || last.Query.Get("api-version") != "2024-10-21" {
				t.Fatalf("the deployment was called at %s?%s", last.Path, last.Query.Encode())
			}
			if last.Header.Get("Api-Key") != primaryKey || last.Header.Get("Authorization") != "" {
				t.Fatalf("api-key %q, Authorization %q: want the key in api-key alone", last.Header.Get("Api-Key"), last.Header.Get("Authorization"))
			}
		})
	}

	// A deployment has no Responses API: the backup serves the route's
	// Responses requests, the v1 provider its own.
	resp, body := g.postStreamOK(t, "/v1/responses", `{"model":"gpt-4o","input":"hi"}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "backup") {
		t.Fatalf("responses on a deployment's route: %d %s", resp.StatusCode, body)
	}
	if _, ok := g.Primary.LastRequestAt("/responses"); ok {
		t.Fatal("the deployment was sent a Responses request")
	}
	resp, body = g.postStreamOK(t, "/v1/responses", `{"model":"gpt-4o-v1","input":"hi"}`)
	if last, _ := g.Primary.LastRequestAt(""); resp.StatusCode != http.StatusOK || last.Path != "/openai/v1/responses" || last.Query.Has("api-version") {
		t.Fatalf("responses on the v1 API: %d %s (called at %s?%s)", resp.StatusCode, body, last.Path, last.Query.Encode())
	}

	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", ErrorKind: mockupstream.ErrorRequestsExhausted})
	resp, body = g.postStreamOK(t, "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "backup") {
		t.Fatalf("after the deployment's 429: %d %s", resp.StatusCode, body)
	}
	_, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
	wantRows(t, rows, "failed/429/upstream_http_error(az)", "success/200/(backup)")
}

// postStreamOK is postStream for a body read whole: a read error fails
// the test.
func (g *gateway) postStreamOK(t *testing.T, path, body string) (*http.Response, []byte) {
	t.Helper()
	resp, b, err := g.postStream(t, path, body)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return resp, b
}
