package gemini_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/upstream"
	"github.com/llmgw/gateway/internal/upstream/gemini"
)

// reply is what a client makes of an answer: content, tool calls, finish
// reason.
type reply struct {
	Content   string
	ToolCalls []string // id name args, one string each
	Finish    string
}

// TestStreamAgreesWithBody: for each stream fixture that ends, the chunks
// a client reassembles say what the non-streaming translation of one body
// holding the same parts says, and both count the same usage, so a client
// sees one answer whether it streams or not.
func TestStreamAgreesWithBody(t *testing.T) {
	for _, tc := range loadJSON[[]streamCase](t, "streams.json") {
		if tc.Error != "" {
			continue
		}
		t.Run(tc.Name, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/streams/" + tc.SSE)
			if err != nil {
				t.Fatal(err)
			}
			tr := gemini.NewStreamTranslator("m", 1, false)
			out, err := relay(tr, bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			streamed := reassemble(t, out)
			body := mergeEvents(t, raw)
			whole, err := gemini.GenerateToChat(body, "m", 1)
			if err != nil {
				t.Fatal(err)
			}
			var c struct {
				Choices []struct {
					Message struct {
						Content   *string `json:"content"`
						ToolCalls []struct {
							ID       string `json:"id"`
							Function struct {
								Name      string `json:"name"`
								Arguments string `json:"arguments"`
							} `json:"function"`
						} `json:"tool_calls"`
					} `json:"message"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(whole, &c); err != nil {
				t.Fatal(err)
			}
			m := c.Choices[0].Message
			want := reply{Finish: c.Choices[0].FinishReason}
			if m.Content != nil {
				want.Content = *m.Content
			}
			for _, tc := range m.ToolCalls {
				want.ToolCalls = append(want.ToolCalls, tc.ID+" "+tc.Function.Name+" "+tc.Function.Arguments)
			}
			su, sok := tr.Usage()
			bu, bok := gemini.BodyUsage(body)
			if su != bu || sok != bok {
				t.Fatalf("stream usage %+v %v, body usage %+v %v", su, sok, bu, bok)
			}
			if strings.Join(streamed.ToolCalls, "|") != strings.Join(want.ToolCalls, "|") ||
				streamed.Content != want.Content || streamed.Finish != want.Finish {
				t.Fatalf("streamed %+v\nwhole    %+v", streamed, want)
			}
		})
	}
}

// mergeEvents makes one GenerateContentResponse of a stream's events up to
// and including the first with a finishReason: their parts in order, that
// finishReason, and the last usage.
func mergeEvents(t *testing.T, raw []byte) []byte {
	t.Helper()
	var parts []json.RawMessage
	var finish, id string
	var usage json.RawMessage
	r := upstream.NewEventReader(bytes.NewReader(raw))
	defer r.Close()
	for {
		ev, _, err := r.Next()
		if err != nil {
			break
		}
		f := upstream.ParseEvent(ev)
		if !f.HasData {
			continue
		}
		var e struct {
			Candidates []struct {
				Content struct {
					Parts []json.RawMessage `json:"parts"`
				} `json:"content"`
				FinishReason string `json:"finishReason"`
			} `json:"candidates"`
			UsageMetadata json.RawMessage `json:"usageMetadata"`
			ResponseID    string          `json:"responseId"`
		}
		if err := json.Unmarshal(f.Data, &e); err != nil {
			t.Fatal(err)
		}
		if e.UsageMetadata != nil {
			usage = e.UsageMetadata
		}
		if id == "" {
			id = e.ResponseID
		}
		if len(e.Candidates) > 0 && finish == "" {
			parts = append(parts, e.Candidates[0].Content.Parts...)
			finish = e.Candidates[0].FinishReason
		}
	}
	if parts == nil {
		parts = []json.RawMessage{}
	}
	b, err := json.Marshal(map[string]any{
		"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "finishReason": finish}},
		"usageMetadata": usage, "responseId": id,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reassemble reads OpenAI chunks as a client does.
func reassemble(t *testing.T, out []byte) reply {
	t.Helper()
	var r reply
	type call struct{ id, name, args string }
	var calls []call
	for _, fr := range strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n") {
		data := strings.TrimPrefix(fr, "data: ")
		if data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) == 0 {
			continue
		}
		ch := c.Choices[0]
		r.Content += ch.Delta.Content
		for _, tc := range ch.Delta.ToolCalls {
			for len(calls) <= tc.Index {
				calls = append(calls, call{})
			}
			if tc.ID != "" {
				calls[tc.Index].id, calls[tc.Index].name = tc.ID, tc.Function.Name
			}
			calls[tc.Index].args += tc.Function.Arguments
		}
		if ch.FinishReason != nil {
			r.Finish = *ch.FinishReason
		}
	}
	for _, c := range calls {
		r.ToolCalls = append(r.ToolCalls, c.id+" "+c.name+" "+c.args)
	}
	return r
}
