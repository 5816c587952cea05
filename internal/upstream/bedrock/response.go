package bedrock

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
)

// Usage is the token accounting of an answer in OpenAI's terms. Its fields
// are upstream.Usage's, in order, so the gateway converts with a plain
// upstream.Usage(u) and applies its one usage check before counting.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	CachedTokens     int64 `json:"-"` // cacheReadInputTokens, inside PromptTokens
	CacheWriteTokens int64 `json:"-"` // cacheWriteInputTokens, inside PromptTokens
	ReasoningTokens  int64 `json:"-"` // Converse does not count them apart
}

// tokenUsage is Converse's TokenUsage. Counts are read as float64 so that a
// count written 1e15 decodes (and is then refused by the gateway's usage
// check) instead of failing the whole answer.
type tokenUsage struct {
	InputTokens           float64 `json:"inputTokens"`
	OutputTokens          float64 `json:"outputTokens"`
	CacheReadInputTokens  float64 `json:"cacheReadInputTokens"`
	CacheWriteInputTokens float64 `json:"cacheWriteInputTokens"`
}

// openAI: inputTokens counts only the prompt tokens neither read from nor
// written to the cache, so prompt_tokens adds both back, as OpenAI and
// the gateway's records count the whole prompt. ok is false when a count
// is not a whole number within int64.
func (u tokenUsage) openAI() (Usage, bool) {
	var c [4]int64
	for i, f := range [...]float64{u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheWriteInputTokens} {
		if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return Usage{}, false
		}
		c[i] = int64(f)
	}
	prompt := satAdd(satAdd(c[0], c[2]), c[3])
	return Usage{PromptTokens: prompt, CompletionTokens: c[1], TotalTokens: satAdd(prompt, c[1]),
		CachedTokens: c[2], CacheWriteTokens: c[3]}, true
}

// satAdd adds without wrapping, so two huge counts never sum to a
// plausible one.
func satAdd(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

type converseResponse struct {
	Output *struct {
		Message *struct {
			Role    string      `json:"role"`
			Content []respBlock `json:"content"`
		} `json:"message"`
	} `json:"output"`
	StopReason string      `json:"stopReason"`
	Usage      *tokenUsage `json:"usage"`
}

type respBlock struct {
	Text    *string `json:"text"`
	ToolUse *struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	} `json:"toolUse"`
}

// BodyUsage extracts usage from a Converse answer. ok is false without
// usage or when its counts are not whole numbers.
func BodyUsage(body []byte) (Usage, bool) {
	var v struct {
		Usage *tokenUsage `json:"usage"`
	}
	if json.Unmarshal(body, &v) != nil || v.Usage == nil {
		return Usage{}, false
	}
	return v.Usage.openAI()
}

// FinishReason maps a Converse stopReason. A stopReason this package does
// not know ends the answer as stop.
func FinishReason(reason string) string {
	switch reason {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "guardrail_intervened", "content_filtered":
		return "content_filter"
	}
	return "stop"
}

// newID is a random id: Converse answers carry none.
func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's contract since Go 1.24)
	return "chatcmpl-" + hex.EncodeToString(b[:])
}

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage,omitempty"`
}

type chatChoice struct {
	Index        int       `json:"index"`
	Message      chatReply `json:"message"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
}

type chatReply struct {
	Role      string          `json:"role"`
	Content   *string         `json:"content"`
	Refusal   *string         `json:"refusal"`
	ToolCalls []replyToolCall `json:"tool_calls,omitempty"`
}

type replyToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details,omitempty"`
}

func newChatUsage(u Usage) *chatUsage {
	c := &chatUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	if u.CachedTokens > 0 {
		c.PromptTokensDetails = &struct {
			CachedTokens int64 `json:"cached_tokens"`
		}{u.CachedTokens}
	}
	return c
}

// ConverseToChat translates a Converse answer into a chat.completion for a
// client that asked for model. An answer without output.message wraps
// ErrMalformed.
func ConverseToChat(body []byte, model string, created int64) ([]byte, error) {
	var r converseResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if r.Output == nil || r.Output.Message == nil {
		return nil, fmt.Errorf("%w: no output.message", ErrMalformed)
	}
	var text bytes.Buffer
	reply := chatReply{Role: "assistant"}
	for _, b := range r.Output.Message.Content {
		switch {
		case b.Text != nil:
			text.WriteString(*b.Text)
		case b.ToolUse != nil:
			tc, err := toolCallOf(b.ToolUse.ToolUseID, b.ToolUse.Name, b.ToolUse.Input)
			if err != nil {
				return nil, err
			}
			reply.ToolCalls = append(reply.ToolCalls, tc)
		}
	}
	if text.Len() > 0 || reply.ToolCalls == nil {
		s := text.String()
		reply.Content = &s
	}
	finish := FinishReason(r.StopReason)
	if finish == "stop" && reply.ToolCalls != nil {
		finish = "tool_calls"
	}
	out := chatCompletion{ID: newID(), Object: "chat.completion", Created: created, Model: model,
		Choices: []chatChoice{{Message: reply, FinishReason: finish}}}
	if r.Usage != nil {
		if u, ok := r.Usage.openAI(); ok {
			out.Usage = newChatUsage(u)
		}
	}
	return encode(out)
}

// toolCallOf is a toolUse as an OpenAI tool call: its input object as the
// arguments string.
func toolCallOf(id, name string, input json.RawMessage) (replyToolCall, error) {
	if id == "" || name == "" {
		return replyToolCall{}, fmt.Errorf("%w: toolUse without toolUseId or name", ErrMalformed)
	}
	tc := replyToolCall{ID: id, Type: "function"}
	tc.Function.Name = name
	args := bytes.TrimSpace(input)
	if len(args) == 0 || isNull(args) {
		args = []byte("{}")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, args); err != nil {
		return replyToolCall{}, fmt.Errorf("%w: toolUse input: %v", ErrMalformed, err)
	}
	tc.Function.Arguments = buf.String()
	return tc, nil
}
