package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzChatToGemini: whatever the client sends, the translator does not
// panic, refuses only with a *FieldError, and what it accepts is a JSON
// object with contents, ready for Gemini.
func FuzzChatToGemini(f *testing.F) {
	for _, tc := range loadJSON[[]requestCase](f, "requests.json") {
		f.Add([]byte(tc.Body))
	}
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:;base64,"}}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","tool_calls":[{"id":"","type":"function","function":{"name":"f","arguments":" "}}]},{"role":"tool","tool_call_id":"","content":null}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := ChatToGemini(body, Options{Model: "gemini-2.5-flash"})
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *FieldError", err)
			}
			return
		}
		var out struct {
			Contents []json.RawMessage `json:"contents"`
		}
		if json.Unmarshal(res.Body, &out) != nil || len(out.Contents) == 0 {
			t.Fatalf("accepted %q as %q", body, res.Body)
		}
	})
}

// FuzzGenerateToChat: whatever Gemini answers, the translator does not
// panic, fails only with its typed errors, and what it writes is one line
// holding one chat.completion object whose usage adds up.
func FuzzGenerateToChat(f *testing.F) {
	for _, tc := range loadJSON[[]responseCase](f, "responses.json") {
		f.Add([]byte(tc.Body))
	}
	f.Add([]byte(`{"error":{"code":500,"status":"INTERNAL"}}`))
	f.Add([]byte(`{"candidates":[{"content":{"parts":[{"text":"\u2028\ud800"}]}}],"usageMetadata":{"promptTokenCount":-1e300}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := GenerateToChat(body, "gpt-4o", 1)
		if err != nil {
			var be *BlockedError
			var ge *Error
			if !errors.Is(err, ErrMalformed) && !errors.As(err, &be) && !errors.As(err, &ge) {
				t.Fatalf("err = %v", err)
			}
			return
		}
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if json.Unmarshal(out, &c) != nil || c.Object != "chat.completion" || len(c.Choices) != 1 || c.Choices[0].FinishReason == "" {
			t.Fatalf("wrote %q", out)
		}
		if bytes.ContainsAny(out, "\n") {
			t.Fatalf("not one line: %q", out)
		}
		if u, ok := BodyUsage(body); ok && u.TotalTokens != satAdd(u.PromptTokens, u.CompletionTokens) {
			t.Fatalf("usage %+v does not add up", u)
		}
	})
}
