package responsesclient

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// The Response object, as the Responses API returns it and its SDKs read
// it; the request settings it echoes are left out but for the model.
type response struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	CreatedAt         int64        `json:"created_at"`
	Status            string       `json:"status"`
	Error             *struct{}    `json:"error"` // always null: a failed answer is an HTTP error
	IncompleteDetails *incomplete  `json:"incomplete_details"`
	Model             string       `json:"model"`
	Output            []outputItem `json:"output"`
	Usage             *usage       `json:"usage"`
}

type incomplete struct {
	Reason string `json:"reason"`
}

// outputItem is a message or a function_call item; the fields of the other
// kind are left out.
type outputItem struct {
	ID        string        `json:"id"`
	Type      string        `json:"type"`
	Status    string        `json:"status"`
	Role      string        `json:"role,omitempty"`
	Content   *[]outputText `json:"content,omitempty"`
	CallID    string        `json:"call_id,omitempty"`
	Name      string        `json:"name,omitempty"`
	Arguments *string       `json:"arguments,omitempty"`
}

type outputText struct {
	Type        string     `json:"type"`
	Text        string     `json:"text"`
	Annotations []struct{} `json:"annotations"`
}

type usage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// chatUsage is a chat completion's usage object.
type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (c *chatUsage) responses() *usage {
	if c == nil {
		return nil
	}
	u := &usage{InputTokens: c.PromptTokens, OutputTokens: c.CompletionTokens, TotalTokens: c.TotalTokens}
	if c.PromptTokensDetails != nil {
		u.InputTokensDetails.CachedTokens = c.PromptTokensDetails.CachedTokens
	}
	if c.CompletionTokensDetails != nil {
		u.OutputTokensDetails.ReasoningTokens = c.CompletionTokensDetails.ReasoningTokens
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.InputTokens + u.OutputTokens
	}
	return u
}

// status is a response's status for a chat finish_reason: an answer cut by
// the token limit or a filter is incomplete, and says why.
func status(finish string) (string, *incomplete) {
	switch finish {
	case "length":
		return "incomplete", &incomplete{Reason: "max_output_tokens"}
	case "content_filter":
		return "incomplete", &incomplete{Reason: "content_filter"}
	}
	return "completed", nil
}

// chatCompletion is what ChatToResponse reads of a chat.completion.
type chatCompletion struct {
	Created int64           `json:"created"`
	Error   json.RawMessage `json:"error"`
	Choices []struct {
		Message struct {
			Content   *string `json:"content"`
			Refusal   *string `json:"refusal"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
}

// ChatToResponse translates a chat.completion body into a Response object
// answering a client that asked for model. A body carrying an error object
// is a *ProviderError; one that is not a completion wraps ErrBadResponse.
func ChatToResponse(body []byte, model string) ([]byte, error) {
	r, err := chatToResponse(body, model)
	if err != nil {
		return nil, err
	}
	return encodeResponse(r)
}

// ChatToResponseItems is ChatToResponse, with the output items of the
// Response it returns, for a client whose items are kept (items.go).
func ChatToResponseItems(body []byte, model string) ([]byte, []Item, error) {
	r, err := chatToResponse(body, model)
	if err != nil {
		return nil, nil, err
	}
	b, err := encodeResponse(r)
	if err != nil {
		return nil, nil, err
	}
	return b, r.items(), nil
}

func encodeResponse(r *response) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode response: %w", err)
	}
	return b, nil
}

func chatToResponse(body []byte, model string) (*response, error) {
	var c chatCompletion
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadResponse, err)
	}
	if !isNull(c.Error) {
		return nil, &ProviderError{Data: bytes.TrimSpace(c.Error)}
	}
	if len(c.Choices) == 0 {
		return nil, fmt.Errorf("%w: no choices", ErrBadResponse)
	}
	ch := c.Choices[0]
	r := newResponse(model, c.Created)
	r.Status, r.IncompleteDetails = status(ch.FinishReason)
	text := ""
	if m := ch.Message; m.Content != nil {
		text = *m.Content
	} else if m.Refusal != nil {
		text = *m.Refusal
	}
	if text != "" {
		r.Output = append(r.Output, messageItem(newID("msg_"), "completed", text))
	}
	for _, tc := range ch.Message.ToolCalls {
		args := string(tc.Function.Arguments)
		var s string
		if json.Unmarshal(tc.Function.Arguments, &s) == nil {
			args = s // arguments are a JSON string; a server that sent an object sent it whole
		} else if isNull(tc.Function.Arguments) {
			args = "{}"
		}
		r.Output = append(r.Output, callItem(newID("fc_"), "completed", tc.ID, tc.Function.Name, args))
	}
	r.Usage = c.Usage.responses()
	return &r, nil
}

func newResponse(model string, created int64) response {
	if created == 0 {
		created = time.Now().Unix()
	}
	return response{ID: newID("resp_"), Object: "response", CreatedAt: created, Status: "in_progress",
		Model: model, Output: []outputItem{}}
}

func messageItem(id, status, text string) outputItem {
	return outputItem{ID: id, Type: "message", Status: status, Role: "assistant",
		Content: &[]outputText{{Type: "output_text", Text: text, Annotations: []struct{}{}}}}
}

func callItem(id, status, callID, name, args string) outputItem {
	if callID == "" {
		callID = newID("call_")
	}
	return outputItem{ID: id, Type: "function_call", Status: status, CallID: callID, Name: name, Arguments: &args}
}

// newID is an id of the gateway's: prefix and 24 random bytes in hex, as
// long as OpenAI's.
func newID(prefix string) string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
