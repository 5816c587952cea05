package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// itemsRoutes: an anthropic-only model and an openai one, passed through,
// and two clients.
var itemsRoutes = `
providers:
  - { name: an, format: anthropic, base_url: "%[1]s/v1", api_keys: ["${PRIMARY_KEY}"], max_concurrency: 8 }
  - { name: oa, base_url: "%[2]s/v1", api_keys: ["${BACKUP_KEY}"], max_concurrency: 8 }
%[3]s
models:
  - { name: claude-only, candidates: [{ provider: an, model: claude-up }] }
  - { name: openai-only, candidates: [{ provider: oa, model: up-backup-mini }] }
clients:
  - { name: a, key_sha256: "` + sha(itemsToken) + `" }
  - { name: b, key_sha256: "` + sha(itemsOtherToken) + `" }
`

const (
	itemsToken      = "items-client-a-SENTINEL-token"
	itemsOtherToken = "items-client-b-SENTINEL-token"
)

// outputItem is what the tests read of a Response's output item.
type outputItem struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	CallID  string `json:"call_id"`
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
}

// postItems posts a Responses body as the client holding token, and
// returns the status, the body and the output items of a 200 (read from
// the JSON, or from a stream's response.completed event).
func postItems(t *testing.T, g *gateway, token, body string) (int, []byte, []outputItem) {
	t.Helper()
	resp, b, err := g.postStream(t, "/v1/responses", body, "Authorization", "Bearer "+token)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, b, nil
	}
	data := b
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		_, after, ok := bytes.Cut(b, []byte("event: response.completed\ndata: "))
		if !ok {
			t.Fatalf("no response.completed: %s", b)
		}
		data, _, _ = bytes.Cut(after, []byte("\n"))
	}
	var v struct {
		Output   []outputItem `json:"output"`
		Response struct {
			Output []outputItem `json:"output"`
		} `json:"response"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	if len(v.Output) == 0 {
		v.Output = v.Response.Output
	}
	return resp.StatusCode, b, v.Output
}

// refusedParam is the param of a 400's OpenAI-shaped error, "" when the
// status or shape is another.
func refusedParam(status int, b []byte) (param, msg string) {
	var v struct {
		Error struct {
			Type    string `json:"type"`
			Param   string `json:"param"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if status != http.StatusBadRequest || json.Unmarshal(b, &v) != nil || v.Error.Type != "invalid_request_error" {
		return "", ""
	}
	return v.Error.Param, v.Error.Message
}

// TestResponsesItemReferences protects a Responses client's default store
// toward a provider that stores nothing (the Vercel AI SDK's tool round
// trip): the items of a translated answer, stream and not, a message and a
// function call, resolve the item_references of the same client's next
// request, which reach the provider as its own assistant text and tool_use
// blocks; another client's reference to them is refused (400, the item
// named, nothing sent upstream), and so is a reference to the items of an
// answer asked with store: false. Passed through to OpenAI, a reference is
// sent as it came.
func TestResponsesItemReferences(t *testing.T) {
	g := start(t, setup{routes: itemsRoutes})
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "stream"}[stream]
		st := `,"stream":` + map[bool]string{false: "false", true: "true"}[stream]

		// A text answer: the next request names its message.
		g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", Chunks: 3})
		status, b, items := postItems(t, g, itemsToken, `{"model":"claude-only","input":"hi"`+st+`}`)
		if status != http.StatusOK || len(items) != 1 || items[0].Type != "message" || len(items[0].Content) != 1 {
			t.Fatalf("%s: first answer %d, items %+v: %s", name, status, items, b)
		}
		msg, text := items[0].ID, items[0].Content[0].Text
		next := `{"model":"claude-only","input":[{"role":"user","content":"hi"},{"type":"item_reference","id":"` + msg + `"},{"role":"user","content":"and?"}]` + st + `}`
		if status, b, _ := postItems(t, g, itemsToken, next); status != http.StatusOK {
			t.Fatalf("%s: the reference to %s: %d %s", name, msg, status, b)
		}
		last, _ := g.Primary.LastRequestAt("/v1/messages")
		want, _ := json.Marshal(text)
		wantIn(t, name+": the provider's request", string(last.Body), `"role":"assistant","content":`, string(want[1:len(want)-1]), `"and?"`)

		// Another client names it: not found.
		before := g.Primary.Stats().Requests
		status, b, _ = postItems(t, g, itemsOtherToken, next)
		if p, m := refusedParam(status, b); p != "input[1].id" || !strings.Contains(m, msg) {
			t.Errorf("%s: client b's reference to a's item: %d %s, want 400 naming input[1].id", name, status, b)
		}
		if n := g.Primary.Stats().Requests; n != before {
			t.Errorf("%s: a refused reference reached the provider", name)
		}

		// A tool call: the next request names the call and sends its result.
		g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", Chunks: 3, ToolUse: mockupstream.ToolUseFirst})
		status, b, items = postItems(t, g, itemsToken, `{"model":"claude-only","input":"use the lookup tool"`+responsesTools+st+`}`)
		if status != http.StatusOK || len(items) == 0 || items[len(items)-1].Type != "function_call" {
			t.Fatalf("%s: tool answer %d, items %+v: %s", name, status, items, b)
		}
		refs := ""
		for _, it := range items {
			refs += `{"type":"item_reference","id":"` + it.ID + `"},`
		}
		call := items[len(items)-1].CallID
		status, b, _ = postItems(t, g, itemsToken, `{"model":"claude-only","input":[{"role":"user","content":"use the lookup tool"},`+refs+
			`{"type":"function_call_output","call_id":"`+call+`","output":"forty-two"}]`+responsesTools+st+`}`)
		if status != http.StatusOK {
			t.Fatalf("%s: the reference to the call: %d %s", name, status, b)
		}
		last, _ = g.Primary.LastRequestAt("/v1/messages")
		wantIn(t, name+": the provider's request", string(last.Body), `"type":"tool_use","id":"`+call+`"`, `"type":"tool_result","tool_use_id":"`+call+`"`, "forty-two")

		// store: false keeps nothing.
		g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", Chunks: 3})
		status, b, items = postItems(t, g, itemsToken, `{"model":"claude-only","store":false,"input":"hi"`+st+`}`)
		if status != http.StatusOK || len(items) != 1 {
			t.Fatalf("%s: store false answer %d: %s", name, status, b)
		}
		status, b, _ = postItems(t, g, itemsToken, `{"model":"claude-only","input":[{"type":"item_reference","id":"`+items[0].ID+`"},{"role":"user","content":"and?"}]`+st+`}`)
		if p, _ := refusedParam(status, b); p != "input[0].id" {
			t.Errorf("%s: a reference to a store: false answer's item: %d %s, want 400 naming input[0].id", name, status, b)
		}
	}

	// Passed through: OpenAI holds the item; the reference goes as it came.
	body := `{"model":"openai-only","input":[{"role":"user","content":"hi"},{"type":"item_reference","id":"msg_openai_own"},{"role":"user","content":"and?"}]}`
	if status, b, _ := postItems(t, g, itemsToken, body); status != http.StatusOK {
		t.Fatalf("pass-through: %d %s", status, b)
	}
	last, _ := g.Backup.LastRequestAt("/v1/responses")
	wantIn(t, "the pass-through request", string(last.Body), `{"type":"item_reference","id":"msg_openai_own"}`)
	g.assertIdle(t)
}

// wantIn fails unless s contains every one of want.
func wantIn(t *testing.T, what, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("%s: %q not in %s", what, w, s)
		}
	}
}
