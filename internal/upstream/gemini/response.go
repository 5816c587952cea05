package gemini

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Usage is the token accounting of a response in OpenAI's terms. Its fields
// are upstream.Usage's, in order, so the gateway converts with a plain
// upstream.Usage(u) without this package importing upstream, and applies
// upstream.CheckUsage to it before counting: this package reports what
// Gemini said (sums saturate at MaxInt64 rather than wrap), and the
// gateway's one rule refuses the impossible.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	CachedTokens     int64 `json:"-"` // cachedContentTokenCount, inside PromptTokens
	CacheWriteTokens int64 `json:"-"` // always 0: Gemini caches explicitly, billed apart
	ReasoningTokens  int64 `json:"-"` // thoughtsTokenCount, inside CompletionTokens
}

// usageMetadata is GenerateContentResponse.usageMetadata
// (https://ai.google.dev/api/generate-content#UsageMetadata). Counts are
// read as float64 so that a count written 1e15 decodes (and is then refused
// by the gateway's usage check) instead of failing the whole body.
type usageMetadata struct {
	PromptTokenCount        float64 `json:"promptTokenCount"`
	CandidatesTokenCount    float64 `json:"candidatesTokenCount"`
	CachedContentTokenCount float64 `json:"cachedContentTokenCount"`
	ThoughtsTokenCount      float64 `json:"thoughtsTokenCount"`
	ToolUsePromptTokenCount float64 `json:"toolUsePromptTokenCount"`
}

// openAI applies the usage rule (doc.go): prompt_tokens is promptTokenCount
// (which includes cached content) plus toolUsePromptTokenCount;
// completion_tokens is candidatesTokenCount plus thoughtsTokenCount, as
// OpenAI counts reasoning inside completion_tokens; cached and reasoning
// tokens are reported inside them. ok is false when a count is not a whole
// number within int64.
func (m usageMetadata) openAI() (Usage, bool) {
	var c [5]int64
	for i, f := range [...]float64{m.PromptTokenCount, m.CandidatesTokenCount, m.CachedContentTokenCount,
		m.ThoughtsTokenCount, m.ToolUsePromptTokenCount} {
		if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return Usage{}, false
		}
		c[i] = int64(f)
	}
	prompt := satAdd(c[0], c[4])
	completion := satAdd(c[1], c[3])
	return Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: satAdd(prompt, completion),
		CachedTokens: c[2], ReasoningTokens: c[3]}, true
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

type respPart struct {
	Text             *string `json:"text"`
	Thought          bool    `json:"thought"`
	ThoughtSignature string  `json:"thoughtSignature"`
	FunctionCall     *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
}

type candidate struct {
	Content *struct {
		Parts []respPart `json:"parts"`
	} `json:"content"`
	FinishReason string `json:"finishReason"`
	Index        int64  `json:"index"`
}

type generateResponse struct {
	Candidates     []candidate     `json:"candidates"`
	PromptFeedback *promptFeedback `json:"promptFeedback"`
	UsageMetadata  *usageMetadata  `json:"usageMetadata"`
	ResponseID     string          `json:"responseId"`
	Error          json.RawMessage `json:"error"`
}

type promptFeedback struct {
	BlockReason        string `json:"blockReason"`
	BlockReasonMessage string `json:"blockReasonMessage"`
}

// BodyUsage extracts usage from a generateContent body. ok is false without
// usageMetadata or when its counts are not whole numbers.
func BodyUsage(body []byte) (Usage, bool) {
	var v struct {
		UsageMetadata *usageMetadata `json:"usageMetadata"`
	}
	if json.Unmarshal(body, &v) != nil || v.UsageMetadata == nil {
		return Usage{}, false
	}
	return v.UsageMetadata.openAI()
}

// finishReason maps a Candidate.finishReason
// (https://ai.google.dev/api/generate-content#FinishReason). Gemini ends a
// turn that called functions with STOP; OpenAI says tool_calls. The safety
// family is content_filter; MALFORMED_FUNCTION_CALL, OTHER, LANGUAGE and
// reasons this package does not know end the answer as stop.
func finishReason(reason string, toolCalls bool) string {
	switch reason {
	case "MAX_TOKENS":
		return "length"
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
		return "content_filter"
	}
	if toolCalls {
		return "tool_calls"
	}
	return "stop"
}

// newID is a random id for an answer without a responseId.
func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's contract since Go 1.24)
	return hex.EncodeToString(b[:])
}

// callID names a tool call: Gemini's functionCall.id when it sends one,
// else derived from the response id and the call's position, unique
// within a conversation as response ids are.
func callID(given, responseID string, n int) string {
	if given != "" {
		return given
	}
	return "call_" + responseID + "_" + strconv.Itoa(n)
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
	Index    *int   `json:"index,omitempty"` // streams only
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
	ExtraContent *extraContent `json:"extra_content,omitempty"`
}

type chatUsage struct {
	Usage
	PromptTokensDetails     *cachedDetails    `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *reasoningDetails `json:"completion_tokens_details,omitempty"`
}

type cachedDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

type reasoningDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

func newChatUsage(u Usage) *chatUsage {
	cu := &chatUsage{Usage: u}
	if u.CachedTokens != 0 {
		cu.PromptTokensDetails = &cachedDetails{CachedTokens: u.CachedTokens}
	}
	if u.ReasoningTokens != 0 {
		cu.CompletionTokensDetails = &reasoningDetails{ReasoningTokens: u.ReasoningTokens}
	}
	return cu
}

func signature(sig string) *extraContent {
	if sig == "" {
		return nil
	}
	ec := &extraContent{Google: &struct {
		ThoughtSignature string `json:"thought_signature,omitempty"`
	}{ThoughtSignature: sig}}
	return ec
}

// toolCall maps a functionCall part; args is compact JSON, {} when absent.
func toolCall(p respPart, responseID string, n int) (replyToolCall, error) {
	tc := replyToolCall{ID: callID(p.FunctionCall.ID, responseID, n), Type: "function", ExtraContent: signature(p.ThoughtSignature)}
	tc.Function.Name = p.FunctionCall.Name
	args := p.FunctionCall.Args
	if len(args) == 0 || isNull(args) {
		tc.Function.Arguments = "{}"
		return tc, nil
	}
	if !isObject(args) {
		return tc, fmt.Errorf("%w: functionCall args is not an object", ErrMalformed)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, args); err != nil {
		return tc, fmt.Errorf("%w: functionCall args: %v", ErrMalformed, err)
	}
	tc.Function.Arguments = buf.String()
	return tc, nil
}

// GenerateToChat translates a generateContent body into an OpenAI
// chat.completion object. model is the name the client asked for and
// created the Unix time to report. The first candidate's text parts are
// joined into content (null when there is none; thought parts are left
// out), functionCall parts become tool_calls. A prompt Gemini blocked is a
// *BlockedError, an error object a *Error, and a body that is not a
// GenerateContentResponse an error wrapping ErrMalformed.
func GenerateToChat(body []byte, model string, created int64) ([]byte, error) {
	var r generateResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%w: response body: %v", ErrMalformed, err)
	}
	if r.Error != nil && !isNull(r.Error) {
		if e, ok := ParseError(0, body); ok {
			return nil, e
		}
		return nil, fmt.Errorf("%w: unreadable error object", ErrMalformed)
	}
	if len(r.Candidates) == 0 {
		if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
			return nil, &BlockedError{Reason: r.PromptFeedback.BlockReason, Message: r.PromptFeedback.BlockReasonMessage}
		}
		return nil, fmt.Errorf("%w: no candidate", ErrMalformed)
	}
	if r.ResponseID == "" {
		r.ResponseID = newID()
	}
	c := r.Candidates[0]
	reply := chatReply{Role: "assistant"}
	var text []byte
	sawText := false
	if c.Content != nil {
		for _, p := range c.Content.Parts {
			switch {
			case p.FunctionCall != nil:
				tc, err := toolCall(p, r.ResponseID, len(reply.ToolCalls))
				if err != nil {
					return nil, err
				}
				reply.ToolCalls = append(reply.ToolCalls, tc)
			case p.Text != nil && !p.Thought:
				text = append(text, *p.Text...)
				sawText = true
			}
		}
	}
	if sawText {
		s := string(text)
		reply.Content = &s
	}
	out := chatCompletion{
		ID: "chatcmpl-" + r.ResponseID, Object: "chat.completion", Created: created, Model: model,
		Choices: []chatChoice{{Message: reply, FinishReason: finishReason(c.FinishReason, len(reply.ToolCalls) > 0)}},
	}
	if r.UsageMetadata != nil {
		if u, ok := r.UsageMetadata.openAI(); ok {
			out.Usage = newChatUsage(u)
		}
	}
	b, err := encode(out)
	if err != nil {
		return nil, fmt.Errorf("gemini: encode response: %w", err)
	}
	return b, nil
}
