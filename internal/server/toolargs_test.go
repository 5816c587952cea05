package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// TestZeroArgumentToolCallStream protects issue 13 on the wire: an
// anthropic provider calling a tool that takes no input (an empty
// partial_json, then content_block_stop) reaches a streaming OpenAI client
// with the arguments "{}", as the non-stream answer has them and as OpenAI
// streams them, never an accumulated "" that no client can parse.
func TestZeroArgumentToolCallStream(t *testing.T) {
	sse, err := os.ReadFile("../upstream/anthropic/testdata/streams/tool_no_args.sse")
	if err != nil {
		t.Fatal(err)
	}
	claude := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(sse)
	}))
	defer claude.Close()
	g := start(t, setup{routes: `
# unused mocks: %[1]s %[2]s%[3]s
providers:
  - { name: claude, format: anthropic, base_url: "` + claude.URL + `/v1", api_keys: ["${PRIMARY_KEY}"], max_concurrency: 2 }
models:
  - { name: gpt-4o-mini, candidates: [{ provider: claude }] }
`})
	resp, body := g.post(t, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"what time is it?"}],"tools":[{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{}}}}]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	// Accumulate the arguments per tool call index as a client does.
	args := map[int]string{}
	for _, d := range sseData(body) {
		if d == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Index    int `json:"index"`
						Function struct {
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %s: %v", d, err)
		}
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				args[tc.Index] += tc.Function.Arguments
			}
		}
	}
	if len(args) != 2 || args[0] != "{}" || args[1] != "{}" {
		t.Fatalf("accumulated arguments %v, want {} for both calls:\n%s", args, body)
	}
	if !strings.Contains(string(body), `"function":{"arguments":"{}"}`) {
		t.Fatalf("no {} arguments chunk on the wire:\n%s", body)
	}
}
