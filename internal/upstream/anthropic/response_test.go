package anthropic

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

type responseCase struct {
	Name      string          `json:"name"`
	Message   json.RawMessage `json:"message"`
	Raw       *string         `json:"raw"`
	Want      json.RawMessage `json:"want"`
	Usage     *fixtureUsage   `json:"usage"`
	Malformed bool            `json:"malformed"`
}

// fixtureUsage is a Usage as the test data writes it: the cache counts,
// which the chat usage object nests, named on their own.
type fixtureUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	ReasoningTokens  int64 `json:"reasoning_tokens"`
}

// TestMessageToChat drives the non-streaming mapping from
// testdata/responses.json: content joining, tool calls, finish reasons,
// usage with cache tokens, and bodies that are not a message.
func TestMessageToChat(t *testing.T) {
	for _, tc := range loadJSON[[]responseCase](t, "responses.json") {
		t.Run(tc.Name, func(t *testing.T) {
			body := []byte(tc.Message)
			if tc.Raw != nil {
				body = []byte(*tc.Raw)
			}
			got, err := MessageToChat(body, "gpt-4o", 1700000000)
			if tc.Malformed {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err = %v, want ErrMalformed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g, w := decoded(t, got), decoded(t, tc.Want); !reflect.DeepEqual(g, w) {
				t.Fatalf("chat completion:\n got %s\nwant %s", got, tc.Want)
			}
			u, ok := BodyUsage(body)
			if !ok || u != Usage(*tc.Usage) {
				t.Fatalf("BodyUsage = %+v, %v; want %+v", u, ok, *tc.Usage)
			}
		})
	}
}

func TestBodyUsageAbsent(t *testing.T) {
	for _, body := range []string{`{"type":"message","content":[]}`, `{"usage":null}`, `not json`, ``} {
		if u, ok := BodyUsage([]byte(body)); ok {
			t.Errorf("BodyUsage(%q) = %+v, true; want false", body, u)
		}
	}
}

// TestFinishReason covers every stop_reason the API documents, and an
// unknown one, which must still end the answer normally.
func TestFinishReason(t *testing.T) {
	for in, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "max_tokens": "length",
		"model_context_window_exceeded": "length", "tool_use": "tool_calls", "refusal": "content_filter",
		"": "stop", "something_new": "stop",
	} {
		if got := FinishReason(in); got != want {
			t.Errorf("FinishReason(%q) = %q, want %q", in, got, want)
		}
	}
}
