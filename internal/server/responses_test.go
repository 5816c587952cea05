package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// responsesRoutes: the primary mock as an anthropic provider, the backup
// as a gemini one and as an openai one, for models served by one format
// each and by an anthropic candidate with a backup of the other formats.
const responsesRoutes = `
providers:
  - name: an
    format: anthropic
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
%[3]s
  - name: gem
    format: gemini
    base_url: %[2]s/v1beta
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
  - name: oa
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
models:
  - { name: claude-only, candidates: [{ provider: an, model: claude-up }] }
  - { name: gemini-only, candidates: [{ provider: gem, model: gemini-2.5-flash }] }
  - name: claude-or-gemini
    candidates:
      - { provider: an, model: claude-up, priority: 0 }
      - { provider: gem, model: gemini-2.5-flash, priority: 1 }
  - name: claude-or-openai
    candidates:
      - { provider: an, model: claude-up, priority: 0 }
      - { provider: oa, model: up-backup-mini, priority: 1 }
`

const responsesTools = `,"tools":[{"type":"function","name":"lookup","description":"Look it up","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}]`

// responsesCase drives one Responses request through the gateway and
// checks what a client notices: 200, the answer's shape and text, the
// tool call when asked for, and the request row's tokens.
func responsesCase(t *testing.T, g *gateway, model, provider string, stream, tools bool, rows ...string) {
	t.Helper()
	body := `{"model":"` + model + `","instructions":"Be brief.","input":[{"role":"user","content":"hi"}],"max_output_tokens":200`
	if stream {
		body += `,"stream":true`
	}
	if tools {
		body += responsesTools
	}
	resp, b, err := g.postStream(t, "/v1/responses", body+"}")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %v: %s", resp.StatusCode, err, b)
	}
	s := string(b)
	want := []string{`"object":"response"`, `"status":"completed"`, `"type":"output_text"`, `"input_tokens":`}
	if provider != "oa" {
		// A translated answer names the client's model; a passed-through
		// one is the provider's bytes, naming its own.
		want = append(want, `"model":"`+model+`"`)
	}
	if stream {
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Errorf("content type %q", ct)
		}
		want = append(want, "event: response.created\n", "event: response.output_text.delta\n", "event: response.completed\n")
	} else {
		var v struct {
			Object string `json:"object"`
			Output []struct {
				Type string `json:"type"`
			} `json:"output"`
		}
		if json.Unmarshal(b, &v) != nil || v.Object != "response" || len(v.Output) == 0 {
			t.Fatalf("not a Response object: %s", b)
		}
	}
	if tools {
		want = append(want, `"type":"function_call"`, `"name":"lookup"`)
		if stream {
			want = append(want, "event: response.function_call_arguments.done\n")
		}
	}
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("%s not in the answer: %s", w, s)
		}
	}
	req, got := g.ledger(t, resp.Header.Get("X-Request-Id"))
	wantRows(t, got, rows...)
	if req.PromptTokens == nil || *req.PromptTokens == 0 || req.TotalTokens == nil || *req.TotalTokens <= *req.PromptTokens {
		t.Fatalf("request row tokens: prompt %s total %s", ip(req.PromptTokens), ip(req.TotalTokens))
	}
}

// TestResponsesOverAnthropic: a Responses client, stream and not, with and
// without a tool call, is answered by an anthropic-only model; the
// provider got a Messages request and the rows hold its usage.
func TestResponsesOverAnthropic(t *testing.T) {
	g := start(t, setup{routes: responsesRoutes, db: true})
	for _, stream := range []bool{false, true} {
		responsesCase(t, g, "claude-only", "an", stream, false, "success/200/(an)")
	}
	last, ok := g.Primary.LastRequestAt("/v1/messages")
	if !ok || !strings.Contains(string(last.Body), `"system":"Be brief."`) || !strings.Contains(string(last.Body), `"max_tokens":200`) {
		t.Fatalf("the provider's request: %v %s", ok, last.Body)
	}
	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", ToolUse: mockupstream.ToolUseFirst})
	for _, stream := range []bool{false, true} {
		responsesCase(t, g, "claude-only", "an", stream, true, "success/200/(an)")
	}
	if n := g.Backup.Stats().Requests; n != 0 {
		t.Fatalf("the backup got %d requests", n)
	}
}

// TestResponsesOverGemini: the same through a gemini-only model.
func TestResponsesOverGemini(t *testing.T) {
	g := start(t, setup{routes: responsesRoutes, db: true})
	for _, stream := range []bool{false, true} {
		responsesCase(t, g, "gemini-only", "gem", stream, false, "success/200/(gem)")
	}
	if _, ok := g.Backup.LastRequestAt("/v1beta/models/gemini-2.5-flash:streamGenerateContent"); !ok {
		t.Fatal("no streamGenerateContent request")
	}
	g.Backup.SetBehavior(mockupstream.Behavior{Identity: "backup", ToolUse: mockupstream.ToolUseFirst})
	for _, stream := range []bool{false, true} {
		responsesCase(t, g, "gemini-only", "gem", stream, true, "success/200/(gem)")
	}
}

// TestResponsesRefusesBuiltinTools: a built-in tool has no equivalent on a
// translated provider: 400 naming tools[0].type, nothing sent upstream.
func TestResponsesRefusesBuiltinTools(t *testing.T) {
	g := start(t, setup{routes: responsesRoutes})
	for _, model := range []string{"claude-only", "gemini-only"} {
		resp, b, _ := g.postStream(t, "/v1/responses", `{"model":"`+model+`","input":"hi","tools":[{"type":"web_search"}]}`)
		var v struct {
			Error struct {
				Type  string `json:"type"`
				Param string `json:"param"`
			} `json:"error"`
		}
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(b, &v) != nil ||
			v.Error.Param != "tools[0].type" || v.Error.Type != "invalid_request_error" {
			t.Fatalf("%s: %d %s", model, resp.StatusCode, b)
		}
	}
	if n := g.Primary.Stats().Requests + g.Backup.Stats().Requests; n != 0 {
		t.Fatalf("%d requests went upstream", n)
	}
}

// TestResponsesFailoverAcrossFormats: an anthropic candidate answering 503
// fails over to a gemini one, or an openai one passed through, stream and
// not; the rows say so.
func TestResponsesFailoverAcrossFormats(t *testing.T) {
	for _, backup := range []string{"gem", "oa"} {
		model := map[string]string{"gem": "claude-or-gemini", "oa": "claude-or-openai"}[backup]
		for _, stream := range []bool{false, true} {
			// A gateway each: a 503 cools the anthropic candidate, and the
			// next request would skip it.
			g := start(t, setup{routes: responsesRoutes, db: true, primary: mockupstream.Behavior{Status: http.StatusServiceUnavailable}})
			responsesCase(t, g, model, backup, stream, false, "failed/503/upstream_http_error(an)", "success/200/("+backup+")")
			if _, ok := g.Backup.LastRequestAt("/v1/responses"); ok != (backup == "oa") {
				t.Fatalf("backup %s: the openai pass-through asked: %v", backup, ok)
			}
		}
	}
}
