package bedrock

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

type chatOut struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		TotalTokens         int64 `json:"total_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// TestConverseToChat: the reference's answers (text with cache counts, and
// a tool call) become chat.completions with usage counting the whole
// prompt, cache reads and writes in it.
func TestConverseToChat(t *testing.T) {
	text, err := ConverseToChat(readFixture(t, "converse_text.json"), "claude", 7)
	if err != nil {
		t.Fatal(err)
	}
	var c chatOut
	if err := json.Unmarshal(text, &c); err != nil {
		t.Fatal(err)
	}
	ch := c.Choices[0]
	if c.Object != "chat.completion" || c.Model != "claude" || *ch.Message.Content != "Hello! How can I help you today?" || ch.FinishReason != "stop" {
		t.Errorf("text answer: %s", text)
	}
	if u := c.Usage; u == nil || u.PromptTokens != 22 || u.CompletionTokens != 9 || u.TotalTokens != 31 || u.PromptTokensDetails.CachedTokens != 8 {
		t.Errorf("usage: %s", text)
	}
	u, ok := BodyUsage(readFixture(t, "converse_text.json"))
	if want := (Usage{PromptTokens: 22, CompletionTokens: 9, TotalTokens: 31, CachedTokens: 8, CacheWriteTokens: 2}); !ok || u != want {
		t.Errorf("BodyUsage: got %+v, want %+v", u, want)
	}

	tool, err := ConverseToChat(readFixture(t, "converse_tool.json"), "claude", 7)
	if err != nil {
		t.Fatal(err)
	}
	c = chatOut{}
	if err := json.Unmarshal(tool, &c); err != nil {
		t.Fatal(err)
	}
	ch = c.Choices[0]
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("tool answer: %s", tool)
	}
	tc := ch.Message.ToolCalls[0]
	if tc.ID != "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q" || tc.Type != "function" || tc.Function.Name != "get_weather" ||
		tc.Function.Arguments != `{"city":"Seattle","unit":"celsius"}` {
		t.Errorf("tool call: %+v", tc)
	}
	if _, err := ConverseToChat([]byte(`{"stopReason":"end_turn"}`), "m", 1); !errors.Is(err, ErrMalformed) {
		t.Errorf("no output: got %v", err)
	}
}

// TestFinishReason: every stopReason of the reference maps as documented.
func TestFinishReason(t *testing.T) {
	for in, want := range map[string]string{"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
		"tool_use": "tool_calls", "guardrail_intervened": "content_filter", "content_filtered": "content_filter", "new_reason": "stop"} {
		if got := FinishReason(in); got != want {
			t.Errorf("%s: got %s, want %s", in, got, want)
		}
	}
}

// TestParseError: the type comes from the header, else the body's
// __type, reduced to the exception's name; the classes are the contract's.
func TestParseError(t *testing.T) {
	for _, tc := range []struct {
		header, body, typ, msg string
		key, model, long       bool
	}{
		{"ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/", `{"message":"Too many requests"}`, TypeThrottling, "Too many requests", true, false, false},
		{"", `{"__type":"com.amazon.coral.service#UnrecognizedClientException","Message":"bad token"}`, TypeUnrecognizedClient, "bad token", true, false, false},
		{"AccessDeniedException", `{"message":"no access"}`, TypeAccessDenied, "no access", true, false, false},
		{"ModelStreamErrorException", `{"message":"broke"}`, TypeModelStream, "broke", false, true, false},
		{"ValidationException", `{"message":"Input is too long for requested model."}`, TypeValidation, "Input is too long for requested model.", false, false, true},
		{"ValidationException", `{"message":"Malformed input request"}`, TypeValidation, "Malformed input request", false, false, false},
		{"", `<html>`, "", "", false, false, false},
	} {
		e, ok := ParseError(tc.header, []byte(tc.body))
		if ok != (tc.typ != "") || e.Type != tc.typ || e.Message != tc.msg || e.KeyScoped() != tc.key || e.ModelFault() != tc.model || e.TooLong() != tc.long {
			t.Errorf("%q %s: got %+v ok %v", tc.header, tc.body, e, ok)
		}
	}
	if got := TypeName("throttlingException"); got != TypeThrottling {
		t.Errorf("stream member: got %s", got)
	}
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixtureEvent is one line of a stream fixture: the frame's :event-type
// and its payload.
type fixtureEvent struct {
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

// FixtureEvents reads a .jsonl stream fixture.
func fixtureEvents(t *testing.T, name string) []fixtureEvent {
	t.Helper()
	var out []fixtureEvent
	sc := bufio.NewScanner(bytes.NewReader(readFixture(t, name)))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var e fixtureEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, e)
	}
	return out
}
