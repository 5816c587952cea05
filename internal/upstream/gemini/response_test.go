package gemini

import (
	"encoding/json"
	"errors"
	"regexp"
	"testing"
)

type responseCase struct {
	Name      string          `json:"name"`
	Source    string          `json:"source"`
	Body      json.RawMessage `json:"body"`
	Want      json.RawMessage `json:"want"`
	Blocked   string          `json:"blocked"`
	Malformed bool            `json:"malformed"`
	Usage     map[string]int  `json:"usage"`
	NoUsage   bool            `json:"no_usage"`
}

func fixtureUsage(m map[string]int) Usage {
	return Usage{PromptTokens: int64(m["prompt_tokens"]), CompletionTokens: int64(m["completion_tokens"]),
		TotalTokens: int64(m["total_tokens"]), CachedTokens: int64(m["cached_tokens"]), ReasoningTokens: int64(m["reasoning_tokens"])}
}

// TestGenerateToChat runs testdata/responses.json: each Gemini body becomes
// exactly the chat completion of its fixture, or the typed error, and
// BodyUsage reports the fixture's usage.
func TestGenerateToChat(t *testing.T) {
	for _, tc := range loadJSON[[]responseCase](t, "responses.json") {
		t.Run(tc.Name, func(t *testing.T) {
			if tc.Source == "" {
				t.Fatal("fixture without a source")
			}
			out, err := GenerateToChat(tc.Body, "gpt-4o", 1700000000)
			var be *BlockedError
			switch {
			case tc.Blocked != "":
				if !errors.As(err, &be) || be.Reason != tc.Blocked {
					t.Fatalf("err = %v, want blocked %s", err, tc.Blocked)
				}
			case tc.Malformed:
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err = %v, want ErrMalformed", err)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				sameJSON(t, out, tc.Want)
			}
			u, ok := BodyUsage(tc.Body)
			if ok == tc.NoUsage || (ok && u != fixtureUsage(tc.Usage)) {
				t.Fatalf("BodyUsage = %+v, %v; want %v", u, ok, tc.Usage)
			}
		})
	}
}

// TestGeneratedIDs: without a responseId the answer still gets a chatcmpl
// id and its tool calls ids, random so two answers never share one.
func TestGeneratedIDs(t *testing.T) {
	body := []byte(`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"}}]},"finishReason":"STOP"}]}`)
	ids := map[string]bool{}
	for range 2 {
		out, err := GenerateToChat(body, "m", 1)
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			ID      string `json:"id"`
			Choices []struct {
				Message struct {
					ToolCalls []struct {
						ID string `json:"id"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(out, &c); err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`^chatcmpl-[0-9a-f]{24}$`).MatchString(c.ID) {
			t.Fatalf("id %q", c.ID)
		}
		tcID := c.Choices[0].Message.ToolCalls[0].ID
		if tcID != "call_"+c.ID[len("chatcmpl-"):]+"_0" || ids[tcID] {
			t.Fatalf("tool call id %q", tcID)
		}
		ids[tcID] = true
	}
}

func TestFinishReasons(t *testing.T) {
	for reason, want := range map[string]string{
		"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter", "RECITATION": "content_filter",
		"BLOCKLIST": "content_filter", "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter",
		"IMAGE_SAFETY": "content_filter", "OTHER": "stop", "MALFORMED_FUNCTION_CALL": "stop", "": "stop",
	} {
		if got := finishReason(reason, false); got != want {
			t.Errorf("%s → %s, want %s", reason, got, want)
		}
	}
	if finishReason("STOP", true) != "tool_calls" || finishReason("MAX_TOKENS", true) != "length" {
		t.Error("with tool calls")
	}
}

func TestSaturatingUsage(t *testing.T) {
	u, ok := usageMetadata{PromptTokenCount: 9e18, ToolUsePromptTokenCount: 9e18}.openAI()
	if !ok || u.PromptTokens != 1<<63-1 || u.TotalTokens != 1<<63-1 {
		t.Fatalf("%+v %v", u, ok)
	}
	if _, ok := (usageMetadata{PromptTokenCount: 1e19}).openAI(); ok {
		t.Fatal("a count beyond int64 decoded")
	}
}
