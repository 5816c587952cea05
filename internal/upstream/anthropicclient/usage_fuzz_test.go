package anthropicclient

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzUsage feeds one chat usage object to ChatToMessage (a chat body's)
// and to the stream translator (the usage chunk). Neither panics; the
// Anthropic client is never shown a negative count, its input_tokens plus
// cache_read_input_tokens are the prompt; and the Usage reported for the
// gateway's check is the provider's counts as sent (so a negative one is
// refused, not taken as 0), Invalid when a count is not a whole number,
// cache and reasoning counts included.
func FuzzUsage(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":1000,"completion_tokens":200,"total_tokens":1200,"prompt_tokens_details":{"cached_tokens":400},"completion_tokens_details":{"reasoning_tokens":50}}`,
		`{"prompt_tokens":1000000000000000,"completion_tokens":1}`, `{"prompt_tokens":-5,"completion_tokens":2}`,
		`{"prompt_tokens":12.0}`, `{"prompt_tokens":1.5}`, `{"completion_tokens":1e3}`, `{"completion_tokens":1E+400}`,
		`{"prompt_tokens":"3"}`, `{"prompt_tokens":5,"prompt_tokens":-5}`, `{"Prompt_Tokens":-5,"prompt_tokens":5}`,
		`{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":-4}}`, `{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":11}}`,
		`{"prompt_tokens":3,"prompt_tokens_details":"x","completion_tokens_details":[1]}`,
		`{"total_tokens":99999999999999999999}`, `{}`, `null`, `[]`, `5`, `{"prompt_tokens":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		b = bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("\n"), []byte(" ")), []byte("\r"), []byte(" "))
		body := `{"id":"chatcmpl-1","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":` +
			string(b) + "}"
		msg, u, err := ChatToMessage([]byte(body), "m")
		if err == nil {
			shown(t, "message", b, msg, u)
			var j struct {
				PromptTokens     int64 `json:"prompt_tokens"`
				CompletionTokens int64 `json:"completion_tokens"`
			}
			if json.Unmarshal(b, &j) == nil && !u.Invalid && (u.Prompt != j.PromptTokens || u.Completion != j.CompletionTokens) {
				t.Fatalf("usage of %q: %+v, the provider sent %+v", b, u, j)
			}
		}

		tr := NewStreamTranslator("m")
		var out []byte
		for _, d := range []string{
			`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`,
			`{"id":"c","object":"chat.completion.chunk","choices":[],"usage":` + string(b) + "}",
			"[DONE]",
		} {
			if out, err = tr.Data(out, []byte(d)); err != nil {
				return
			}
		}
		su, ok := tr.Usage()
		if !ok {
			return
		}
		if i := strings.LastIndex(string(out), "event: message_delta\ndata: "); i >= 0 {
			ev := string(out[i+len("event: message_delta\ndata: "):])
			shown(t, "message_delta", b, []byte(ev[:strings.Index(ev, "\n")]), su)
		}
		var plain struct {
			PromptTokens json.RawMessage `json:"prompt_tokens"`
		}
		if json.Unmarshal(b, &plain) == nil && len(plain.PromptTokens) > 0 && !bytes.Contains(b, []byte(`\`)) &&
			strings.Count(string(b), "rompt_tokens\"") == 1 {
			if p := string(plain.PromptTokens); strings.TrimLeft(p, "0123456789") != "" && p != "null" && !su.Invalid {
				t.Fatalf("stream usage of %q: prompt_tokens %s read as %d, not Invalid", b, p, su.Prompt)
			}
		}
	})
}

// shown checks the usage an Anthropic client is shown in msg against the
// usage u read from b.
func shown(t *testing.T, what string, b, msg []byte, u Usage) {
	t.Helper()
	var m struct {
		Usage struct {
			Input  int64  `json:"input_tokens"`
			Output int64  `json:"output_tokens"`
			Cached *int64 `json:"cache_read_input_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		t.Fatalf("%s for %q is not JSON: %v: %s", what, b, err, msg)
	}
	var cached int64
	if m.Usage.Cached != nil {
		cached = *m.Usage.Cached
	}
	if m.Usage.Input < 0 || m.Usage.Output < 0 || cached < 0 {
		t.Fatalf("%s for %q shows a negative count: %s", what, b, msg)
	}
	if !u.Invalid && m.Usage.Input+cached != max(u.Prompt, 0) {
		t.Fatalf("%s for %q: input %d + cached %d, the prompt %d", what, b, m.Usage.Input, cached, u.Prompt)
	}
}
