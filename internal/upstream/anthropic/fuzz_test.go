package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzStreamTranslator feeds arbitrary provider bytes, cut into events at
// blank lines as the gateway's reader cuts them. Whatever arrives, the
// translator must not panic, must only append to dst, and must leave the
// client a well-formed OpenAI stream: "data: X\n\n" frames whose X is one
// line of valid UTF-8 JSON, a chunk object of one stream id, or a final
// [DONE] exactly when Done reports the end.
func FuzzStreamTranslator(f *testing.F) {
	files, _ := filepath.Glob("testdata/streams/*.sse")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, true)
		f.Add([]byte(strings.ReplaceAll(string(b), "\n", "\r\n")), false)
		f.Add(b[:len(b)/2], true)
	}
	f.Add([]byte(evStart+"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\xff\\u2028\"}}\n\n"+evStop), true)
	f.Add([]byte(evStart+"data: {\"type\":\"content_block_start\",\"index\":99999999999999999,\"content_block\":{\"type\":\"tool_use\",\"id\":\"\\u0000\",\"name\":\"\"}}\n\n"), false)
	f.Fuzz(func(t *testing.T, stream []byte, includeUsage bool) {
		tr := NewStreamTranslator("gpt-\"4o\"\n", 1, includeUsage)
		var out []byte
		for _, ev := range splitEvents(string(stream), "\n\n") {
			next, err := feed(tr, out, []byte(ev))
			if !bytes.HasPrefix(next, out) {
				t.Fatalf("Event rewrote dst: %q -> %q", out, next)
			}
			out = next
			if err != nil {
				var se *StreamError
				if !errors.As(err, &se) && !errors.Is(err, ErrMalformed) {
					t.Fatalf("err = %v, want *StreamError or ErrMalformed", err)
				}
				break
			}
		}
		checkFrames(t, out, tr.Done())
		if u, ok := tr.Usage(); ok && u.TotalTokens != u.PromptTokens+u.CompletionTokens {
			t.Fatalf("usage %+v does not add up", u)
		}
	})
}

func checkFrames(t *testing.T, out []byte, done bool) {
	t.Helper()
	var id string
	sawDone := false
	for len(out) > 0 {
		rest, ok := bytes.CutPrefix(out, []byte("data: "))
		end := bytes.Index(rest, []byte("\n\n"))
		if !ok || end < 0 {
			t.Fatalf("not an SSE data frame: %q", out)
		}
		payload := rest[:end]
		out = rest[end+2:]
		if bytes.ContainsAny(payload, "\r\n") || !utf8.Valid(payload) {
			t.Fatalf("payload spans lines or is not UTF-8: %q", payload)
		}
		if string(payload) == "[DONE]" {
			if len(out) != 0 || !done {
				t.Fatalf("[DONE] not last (done=%v), followed by %q", done, out)
			}
			sawDone = true
			continue
		}
		var chunk struct {
			ID      *string           `json:"id"`
			Object  string            `json:"object"`
			Choices []json.RawMessage `json:"choices"`
		}
		if !json.Valid(payload) || json.Unmarshal(payload, &chunk) != nil {
			t.Fatalf("payload is not a JSON object: %q", payload)
		}
		if chunk.ID == nil || chunk.Object != "chat.completion.chunk" || chunk.Choices == nil {
			t.Fatalf("not a chat.completion.chunk: %q", payload)
		}
		if id == "" {
			id = *chunk.ID
		} else if *chunk.ID != id {
			t.Fatalf("chunk id %q, stream id %q", *chunk.ID, id)
		}
	}
	if done != sawDone {
		t.Fatalf("Done() = %v, [DONE] sent = %v", done, sawDone)
	}
}

// FuzzChatToMessages: any body either translates to a Messages API request
// the provider can accept in shape (valid JSON, max_tokens > 0, at least one
// turn, roles alternating, no empty turn, tool results first in a user turn)
// or is refused with a *FieldError; it never panics.
func FuzzChatToMessages(f *testing.F) {
	for _, tc := range loadJSON[[]requestCase](f, "requests.json") {
		f.Add([]byte(tc.Request))
	}
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:;base64,"}}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"tool","tool_call_id":"a","content":null},{"role":"user","content":"x"}],"max_tokens":9223372036854775807}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ChatToMessages(body, Options{Model: "claude"})
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want *FieldError", err)
			}
			return
		}
		if !json.Valid(req.Body) {
			t.Fatalf("invalid JSON: %s", req.Body)
		}
		var out struct {
			Model     string  `json:"model"`
			MaxTokens float64 `json:"max_tokens"`
			Messages  []struct {
				Role    string `json:"role"`
				Content []struct {
					Type string `json:"type"`
				} `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(req.Body, &out); err != nil {
			t.Fatalf("%v: %s", err, req.Body)
		}
		if out.Model != "claude" || out.MaxTokens <= 0 || len(out.Messages) == 0 {
			t.Fatalf("model %q, max_tokens %v, %d messages: %s", out.Model, out.MaxTokens, len(out.Messages), req.Body)
		}
		for i, m := range out.Messages {
			if (m.Role != "user" && m.Role != "assistant") || len(m.Content) == 0 {
				t.Fatalf("message %d: role %q with %d blocks: %s", i, m.Role, len(m.Content), req.Body)
			}
			if i > 0 && out.Messages[i-1].Role == m.Role {
				t.Fatalf("messages %d and %d share role %q: %s", i-1, i, m.Role, req.Body)
			}
			others := false
			for _, b := range m.Content {
				if b.Type != "tool_result" {
					others = true
				} else if others {
					t.Fatalf("message %d: tool_result after other content: %s", i, req.Body)
				}
			}
		}
	})
}
