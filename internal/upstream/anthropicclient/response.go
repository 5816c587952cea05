package anthropicclient

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// Usage is the token accounting of one translated response, in the chat
// completions sense: Prompt counts every input token, cached or not
// (Cached of them read from the cache), Completion every output token
// (Reasoning of them). The counts are the provider's as sent, negative
// ones included, for the gateway's check of them; the translated message
// shows them clamped to 0. Invalid: a count was not a whole number.
type Usage struct {
	Prompt     int64
	Completion int64
	Total      int64
	Cached     int64
	Reasoning  int64
	Invalid    bool
}

type chatCompletion struct {
	ID      string          `json:"id"`
	Choices []chatChoice    `json:"choices"`
	Usage   json.RawMessage `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type chatChoice struct {
	Index   int `json:"index"`
	Message struct {
		Content      json.RawMessage  `json:"content"`
		Refusal      *string          `json:"refusal"`
		ToolCalls    []chatToolCallIn `json:"tool_calls"`
		FunctionCall *chatFunctionIn  `json:"function_call"`
	} `json:"message"`
	FinishReason *string `json:"finish_reason"`
}

type chatToolCallIn struct {
	ID       string         `json:"id"`
	Function chatFunctionIn `json:"function"`
}

type chatFunctionIn struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type chatUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	// Decoded on their own: a details value the gateway cannot read
	// costs only its count, as on the pass-through.
	PromptTokensDetails     json.RawMessage `json:"prompt_tokens_details"`
	CompletionTokensDetails json.RawMessage `json:"completion_tokens_details"`
}

// message is the Anthropic message produced.
type message struct {
	ID           string       `json:"id"`
	Type         string       `json:"type"`
	Role         string       `json:"role"`
	Model        string       `json:"model"`
	Content      []any        `json:"content"`
	StopReason   string       `json:"stop_reason"`
	StopSequence *string      `json:"stop_sequence"`
	Usage        messageUsage `json:"usage"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type toolUseBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// messageUsage splits the prompt the Anthropic way: input_tokens excludes
// the tokens read from the prompt cache, which are counted apart.
type messageUsage struct {
	InputTokens          int64  `json:"input_tokens"`
	OutputTokens         int64  `json:"output_tokens"`
	CacheReadInputTokens *int64 `json:"cache_read_input_tokens,omitempty"`
}

// ChatToMessage translates an OpenAI chat.completion body into an Anthropic
// message body. model is the model the client asked for, echoed back as
// Anthropic does. A body that is an error object returns a *ProviderError;
// one that cannot be read returns an error wrapping ErrBadResponse.
func ChatToMessage(body []byte, model string) (msg []byte, usage Usage, err error) {
	var cc chatCompletion
	if err := json.Unmarshal(body, &cc); err != nil {
		return nil, Usage{}, fmt.Errorf("%w: %v", ErrBadResponse, err)
	}
	if len(cc.Choices) == 0 {
		if !isNull(cc.Error) {
			return nil, Usage{}, providerError(cc.Error)
		}
		return nil, Usage{}, fmt.Errorf("%w: no choices", ErrBadResponse)
	}
	choice := cc.Choices[0]
	for _, c := range cc.Choices {
		if c.Index == 0 {
			choice = c
			break
		}
	}
	out := message{
		ID:      messageID(cc.ID),
		Type:    "message",
		Role:    "assistant",
		Model:   model,
		Content: []any{},
	}
	text := contentText(choice.Message.Content)
	refused := false
	if text == "" && choice.Message.Refusal != nil && *choice.Message.Refusal != "" {
		text, refused = *choice.Message.Refusal, true
	}
	if text != "" {
		out.Content = append(out.Content, textBlock{Type: "text", Text: text})
	}
	calls := choice.Message.ToolCalls
	if len(calls) == 0 && choice.Message.FunctionCall != nil {
		calls = []chatToolCallIn{{Function: *choice.Message.FunctionCall}}
	}
	for _, c := range calls {
		id := c.ID
		if id == "" {
			id = randomID("toolu_")
		}
		out.Content = append(out.Content, toolUseBlock{Type: "tool_use", ID: id, Name: c.Function.Name, Input: toolInput(c.Function.Arguments)})
	}
	finish := ""
	if choice.FinishReason != nil {
		finish = *choice.FinishReason
	}
	out.StopReason = stopReason(finish, len(calls) > 0, refused)
	usage, out.Usage = readUsage(cc.Usage)

	var buf bytes.Buffer
	buf.Grow(len(body) + 128)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&out); err != nil {
		return nil, Usage{}, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), usage, nil
}

// contentText reads message content: a string, or (some servers) a list of
// text parts, joined.
func contentText(v json.RawMessage) string {
	if isNull(v) {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(v, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// toolInput parses a tool call's arguments into the input object. OpenAI
// sends them as a JSON string, a few servers as an object. Arguments that
// are empty, not JSON, or not an object (a truncated call at max_tokens, a
// small model's mistake) become {}: Anthropic's schema requires an object,
// and a client SDK that cannot decode the message would lose the whole
// answer rather than one bad call.
func toolInput(v json.RawMessage) json.RawMessage {
	raw := []byte(v)
	if isString(raw) {
		raw = []byte(unquote(raw))
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return json.RawMessage("{}")
	}
	return raw
}

// stopReason maps finish_reason to stop_reason: stop end_turn (OpenAI does
// not say whether a stop sequence ended the turn, so stop_sequence is never
// reported), length max_tokens, tool_calls and function_call tool_use,
// content_filter refusal (the nearest Anthropic reason: the provider
// withheld output). A turn that called tools is tool_use even when the
// provider said stop, as several OpenAI-compatible servers do, because agent
// loops run tools only on tool_use. Unknown or missing reasons are end_turn.
func stopReason(finish string, calledTools, refused bool) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "content_filter":
		return "refusal"
	case "tool_calls", "function_call":
		return "tool_use"
	}
	switch {
	case calledTools:
		return "tool_use"
	case refused:
		return "refusal"
	}
	return "end_turn"
}

func readUsage(v json.RawMessage) (Usage, messageUsage) {
	var u chatUsage
	if isNull(v) {
		return Usage{}, messageUsage{}
	}
	if json.Unmarshal(v, &u) != nil {
		return Usage{Invalid: true}, messageUsage{}
	}
	var pd struct {
		CachedTokens int64 `json:"cached_tokens"`
	}
	var cd struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	}
	if json.Unmarshal(u.PromptTokensDetails, &pd) != nil {
		pd.CachedTokens = 0
	}
	if json.Unmarshal(u.CompletionTokensDetails, &cd) != nil {
		cd.ReasoningTokens = 0
	}
	cached, reasoning := pd.CachedTokens, cd.ReasoningTokens
	return usageFrom(u.PromptTokens, u.CompletionTokens, u.TotalTokens, cached, reasoning)
}

// usageFrom is the provider's counts as sent (Usage, total made up when
// absent) and as the Anthropic client is shown them, clamped to 0.
func usageFrom(prompt, completion, total, cached, reasoning int64) (Usage, messageUsage) {
	raw := Usage{Prompt: prompt, Completion: completion, Total: total, Cached: cached, Reasoning: reasoning}
	if raw.Total == 0 {
		raw.Total = prompt + completion
	}
	prompt, completion = max(prompt, 0), max(completion, 0)
	mu := messageUsage{InputTokens: prompt, OutputTokens: completion}
	if cached > 0 && cached <= prompt {
		mu.InputTokens = prompt - cached
		mu.CacheReadInputTokens = &cached
	}
	return raw, mu
}

// messageID derives the message id from the completion id, so the two can
// be matched in logs: "chatcmpl-abc" becomes "msg_abc". A provider that
// sends no id gets a random one.
func messageID(chatID string) string {
	id := strings.TrimPrefix(chatID, "chatcmpl-")
	if id == "" {
		return randomID("msg_")
	}
	return "msg_" + id
}

func randomID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails: crypto/rand panics instead
	return prefix + hex.EncodeToString(b[:])
}
