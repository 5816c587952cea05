package anthropicclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// messagesRequest is the part of an Anthropic Messages request that is
// translated; fields not named here are ignored (see doc.go). Polymorphic
// fields stay raw and are read by hand so an error can name the exact field.
type messagesRequest struct {
	Messages      []rawMessage    `json:"messages"`
	System        json.RawMessage `json:"system"`
	MaxTokens     json.RawMessage `json:"max_tokens"`
	Metadata      json.RawMessage `json:"metadata"`
	StopSequences json.RawMessage `json:"stop_sequences"`
	Stream        json.RawMessage `json:"stream"`
	Temperature   json.RawMessage `json:"temperature"`
	TopP          json.RawMessage `json:"top_p"`
	Tools         json.RawMessage `json:"tools"`
	ToolChoice    json.RawMessage `json:"tool_choice"`
	OutputConfig  json.RawMessage `json:"output_config"`
	OutputFormat  json.RawMessage `json:"output_format"` // the structured outputs beta's spelling
}

type rawMessage struct {
	Role    json.RawMessage `json:"role"`
	Content json.RawMessage `json:"content"`
}

// block is one Anthropic content block, any type; only the fields of its
// type are read.
type block struct {
	Type      string          `json:"type"`
	Text      json.RawMessage `json:"text"`
	Source    json.RawMessage `json:"source"`
	ID        json.RawMessage `json:"id"`
	Name      json.RawMessage `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID json.RawMessage `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   json.RawMessage `json:"is_error"`
}

type source struct {
	Type      string          `json:"type"`
	MediaType string          `json:"media_type"`
	Data      string          `json:"data"`
	URL       string          `json:"url"`
	Content   json.RawMessage `json:"content"`
}

// chatRequest is the OpenAI chat completions request produced.
type chatRequest struct {
	Model             string          `json:"model"`
	Messages          []chatMessage   `json:"messages"`
	MaxTokens         int64           `json:"max_tokens"`
	Temperature       json.RawMessage `json:"temperature,omitempty"`
	TopP              json.RawMessage `json:"top_p,omitempty"`
	Stop              []string        `json:"stop,omitempty"`
	User              string          `json:"user,omitempty"`
	Tools             []chatTool      `json:"tools,omitempty"`
	ToolChoice        any             `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	ResponseFormat    *responseFormat `json:"response_format,omitempty"`
	Stream            bool            `json:"stream,omitempty"`
	StreamOptions     *streamOptions  `json:"stream_options,omitempty"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is a string, a []chatPart, or nil (JSON null: an assistant
	// turn that only calls tools).
	Content    any            `json:"content"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// MessagesToChat translates an Anthropic Messages request body into an
// OpenAI chat completions request body for the upstream model, and reports
// whether the client asked for a stream. A request the translation refuses
// returns a *RequestError naming the field.
func MessagesToChat(body []byte, model string) (chat []byte, stream bool, err error) {
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, false, decodeError(err)
	}
	out := chatRequest{Model: model}
	if out.MaxTokens, err = maxTokens(req.MaxTokens); err != nil {
		return nil, false, err
	}
	if err := scalar(req.Stream, "stream", &out.Stream); err != nil {
		return nil, false, err
	}
	if out.Stream {
		out.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if out.Temperature, err = number(req.Temperature, "temperature"); err != nil {
		return nil, false, err
	}
	if out.TopP, err = number(req.TopP, "top_p"); err != nil {
		return nil, false, err
	}
	if err := scalar(req.StopSequences, "stop_sequences", &out.Stop); err != nil {
		return nil, false, err
	}
	if out.User, err = metadataUser(req.Metadata); err != nil {
		return nil, false, err
	}
	if err := systemMessage(req.System, &out.Messages, "system"); err != nil {
		return nil, false, err
	}
	if len(req.Messages) == 0 {
		return nil, false, reqErr("messages", "at least one message is required")
	}
	for i, m := range req.Messages {
		if err := appendMessage(&out.Messages, m, i); err != nil {
			return nil, false, err
		}
	}
	if out.Tools, err = tools(req.Tools); err != nil {
		return nil, false, err
	}
	if err := toolChoice(req.ToolChoice, &out); err != nil {
		return nil, false, err
	}
	if out.ResponseFormat, err = outputFormat(req.OutputConfig, req.OutputFormat); err != nil {
		return nil, false, err
	}
	var buf bytes.Buffer
	buf.Grow(len(body) + 256)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&out); err != nil {
		// Every value was decoded from JSON or built here; failing to encode
		// it is a bug, reported rather than hidden.
		return nil, false, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), out.Stream, nil
}

// decodeError names the field a type mismatch was found in; a body that is
// not JSON at all names none.
func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return reqErr(typeErr.Field, "expected %s, got JSON %s", typeErr.Type, typeErr.Value)
	}
	return &RequestError{Message: "request body is not valid JSON"}
}

// scalar decodes an optional field, null meaning absent.
func scalar[T any](v json.RawMessage, param string, dst *T) error {
	if isNull(v) {
		return nil
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return reqErr(param, "has the wrong type")
	}
	return nil
}

// maxTokens reads the required max_tokens, a positive integer. It is sent as
// max_tokens, which every OpenAI-compatible server reads; OpenAI's reasoning
// models want max_completion_tokens instead, which the provider's own
// request rewriting must supply.
func maxTokens(v json.RawMessage) (int64, error) {
	if isNull(v) {
		return 0, reqErr("max_tokens", "field required")
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 1 {
		return 0, reqErr("max_tokens", "must be a positive integer")
	}
	return n, nil
}

// number validates an optional number and returns it as written.
func number(v json.RawMessage, param string) (json.RawMessage, error) {
	if isNull(v) {
		return nil, nil
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		return nil, reqErr(param, "must be a number")
	}
	return v, nil
}

func metadataUser(v json.RawMessage) (string, error) {
	var md struct {
		UserID *string `json:"user_id"`
	}
	if err := scalar(v, "metadata", &md); err != nil {
		return "", err
	}
	if md.UserID == nil {
		return "", nil
	}
	return *md.UserID, nil
}

// systemMessage turns the system prompt, a string or a list of text blocks,
// into a leading system message; blocks are joined with a newline.
func systemMessage(v json.RawMessage, msgs *[]chatMessage, param string) error {
	if isNull(v) {
		return nil
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		var blocks []block
		if err := json.Unmarshal(v, &blocks); err != nil {
			return reqErr(param, "must be a string or a list of text blocks")
		}
		parts := make([]string, 0, len(blocks))
		for j, b := range blocks {
			if b.Type != "text" {
				return reqErr(param+"."+strconv.Itoa(j)+".type", "only text blocks are supported in a system prompt")
			}
			t, err := blockText(b.Text, param+"."+strconv.Itoa(j)+".text")
			if err != nil {
				return err
			}
			parts = append(parts, t)
		}
		s = strings.Join(parts, "\n")
	}
	if s != "" {
		*msgs = append(*msgs, chatMessage{Role: "system", Content: s})
	}
	return nil
}

func blockText(v json.RawMessage, param string) (string, error) {
	var s string
	if isNull(v) || json.Unmarshal(v, &s) != nil {
		return "", reqErr(param, "must be a string")
	}
	return s, nil
}

// appendMessage translates message i, appending one or more chat messages.
func appendMessage(msgs *[]chatMessage, m rawMessage, i int) error {
	param := "messages." + strconv.Itoa(i)
	var role string
	if err := scalar(m.Role, param+".role", &role); err != nil {
		return err
	}
	if role != "user" && role != "assistant" && role != "system" {
		return reqErr(param+".role", "must be \"user\", \"assistant\" or \"system\"")
	}
	if isNull(m.Content) {
		return reqErr(param+".content", "field required")
	}
	if role == "system" {
		// A system message among the turns (newer API versions allow it)
		// stays where it is, as chat completions allows too.
		return systemMessage(m.Content, msgs, param+".content")
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		*msgs = append(*msgs, chatMessage{Role: role, Content: s})
		return nil
	}
	var blocks []block
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return reqErr(param+".content", "must be a string or a list of content blocks")
	}
	if role == "assistant" {
		return appendAssistant(msgs, blocks, param+".content")
	}
	return appendUser(msgs, blocks, param+".content")
}
