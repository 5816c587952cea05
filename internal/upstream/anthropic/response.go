package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Usage is the token accounting of a response in OpenAI's terms. Its fields
// are upstream.Usage's, in order, so the gateway converts with a plain
// upstream.Usage(u) without this package importing upstream.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	// Cache reads and writes, inside PromptTokens; ReasoningTokens stays
	// 0 (Anthropic counts thinking as output). upstream.Usage's shape.
	CachedTokens     int64 `json:"-"`
	CacheWriteTokens int64 `json:"-"`
	ReasoningTokens  int64 `json:"-"`
}

// messageUsage is the Messages API's usage object. input_tokens counts only
// the uncached part of the prompt; cache writes and reads are counted apart.
type messageUsage struct {
	InputTokens   int64 `json:"input_tokens"`
	OutputTokens  int64 `json:"output_tokens"`
	CacheCreation int64 `json:"cache_creation_input_tokens"`
	CacheRead     int64 `json:"cache_read_input_tokens"`
}

// openAI reports the whole prompt as prompt_tokens, as OpenAI does, cached
// tokens included: a client that budgets on prompt_tokens sees every token
// the model read.
func (u messageUsage) openAI() Usage {
	prompt := u.InputTokens + u.CacheCreation + u.CacheRead
	return Usage{PromptTokens: prompt, CompletionTokens: u.OutputTokens, TotalTokens: prompt + u.OutputTokens,
		CachedTokens: u.CacheRead, CacheWriteTokens: u.CacheCreation}
}

// BodyUsage extracts usage from a non-streaming Messages API body.
func BodyUsage(body []byte) (Usage, bool) {
	var v struct {
		Usage *messageUsage `json:"usage"`
	}
	if json.Unmarshal(body, &v) != nil || v.Usage == nil {
		return Usage{}, false
	}
	return v.Usage.openAI(), true
}

// FinishReason maps a stop_reason to OpenAI's finish_reason. pause_turn (a
// server tool paused a long turn) ends this answer normally; refusal is the
// classifier stopping the model, which OpenAI calls content_filter.
func FinishReason(stopReason string) string {
	switch stopReason {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop" // end_turn, stop_sequence, pause_turn, and any new reason
}

// chatID derives the OpenAI id from the message id, keeping it traceable in
// the provider's logs.
func chatID(messageID string) string { return "chatcmpl-" + messageID }

type messageResponse struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	StopReason string `json:"stop_reason"`
	Content    []struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content"`
	Usage *messageUsage `json:"usage"`
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
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatUsage struct {
	Usage
	PromptTokensDetails *cachedDetails `json:"prompt_tokens_details,omitempty"`
}

type cachedDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// MessageToChat translates a non-streaming Messages API body into an OpenAI
// chat.completion object. model is the name the client asked for and created
// the Unix time to report. Text blocks are joined into content (null when
// there is none), tool_use blocks become tool_calls, and thinking and server
// tool blocks are left out. A body that is not a message is an error
// wrapping ErrMalformed.
func MessageToChat(body []byte, model string, created int64) ([]byte, error) {
	var m messageResponse
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("%w: response body: %v", ErrMalformed, err)
	}
	if m.Type != "message" {
		return nil, fmt.Errorf("%w: response type %q, want \"message\"", ErrMalformed, m.Type)
	}
	reply := chatReply{Role: "assistant"}
	var text []byte
	sawText := false
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text...)
			sawText = true
		case "tool_use":
			tc := replyToolCall{ID: b.ID, Type: "function"}
			tc.Function.Name = b.Name
			args, err := compactObject(b.Input)
			if err != nil {
				return nil, fmt.Errorf("%w: tool_use input: %v", ErrMalformed, err)
			}
			tc.Function.Arguments = args
			reply.ToolCalls = append(reply.ToolCalls, tc)
		}
	}
	if sawText {
		s := string(text)
		reply.Content = &s
	}
	out := chatCompletion{
		ID: chatID(m.ID), Object: "chat.completion", Created: created, Model: model,
		Choices: []chatChoice{{Message: reply, FinishReason: FinishReason(m.StopReason)}},
	}
	if m.Usage != nil {
		out.Usage = &chatUsage{Usage: m.Usage.openAI()}
		if m.Usage.CacheRead > 0 {
			out.Usage.PromptTokensDetails = &cachedDetails{CachedTokens: m.Usage.CacheRead}
		}
	}
	b, err := encode(out)
	if err != nil {
		return nil, fmt.Errorf("anthropic: encode response: %w", err)
	}
	return b, nil
}

// compactObject renders a tool_use input as the arguments string: compact
// JSON, {} when absent.
func compactObject(in json.RawMessage) (string, error) {
	if len(in) == 0 || isNull(in) {
		return "{}", nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, in); err != nil {
		return "", err
	}
	return buf.String(), nil
}
