package responsesclient

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// request is what ResponsesToChat reads of a Responses request; every other
// member is dropped (doc.go).
type request struct {
	Input             json.RawMessage   `json:"input"`
	Instructions      json.RawMessage   `json:"instructions"`
	Tools             []json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls"`
	MaxOutputTokens   *int64            `json:"max_output_tokens"`
	Temperature       json.RawMessage   `json:"temperature"`
	TopP              json.RawMessage   `json:"top_p"`
	Text              *struct {
		Format json.RawMessage `json:"format"`
	} `json:"text"`
	Stream             bool            `json:"stream"`
	PreviousResponseID json.RawMessage `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	Background         *bool           `json:"background"`
	User               string          `json:"user"`
	SafetyIdentifier   string          `json:"safety_identifier"`
}

// chatRequest is the chat completions body, its members in the order a
// reader of the wire expects them.
type chatRequest struct {
	Model             string          `json:"model"`
	Messages          []chatMessage   `json:"messages"`
	Tools             []chatTool      `json:"tools,omitempty"`
	ToolChoice        any             `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	MaxTokens         *int64          `json:"max_completion_tokens,omitempty"`
	Temperature       json.RawMessage `json:"temperature,omitempty"`
	TopP              json.RawMessage `json:"top_p,omitempty"`
	ResponseFormat    any             `json:"response_format,omitempty"`
	User              string          `json:"user,omitempty"`
	Stream            bool            `json:"stream,omitempty"`
	StreamOptions     *streamOptions  `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role       string     `json:"role"`
	Content    any        `json:"content"`
	ToolCalls  []chatCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type chatCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string      `json:"type"`
	Function chatToolDef `json:"function"`
}

type chatToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

type chatPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// ResponsesToChat translates a Responses request body into a chat
// completions body for model, its item_reference inputs resolved from
// stored (items.go). What cannot be expressed is a *RequestError naming the
// field (doc.go lists them).
func ResponsesToChat(body []byte, model string, stored Items) ([]byte, error) {
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, &RequestError{Message: "request body does not match the Responses API: " + err.Error()}
	}
	if !isNull(req.PreviousResponseID) {
		return nil, &RequestError{Param: "previous_response_id", Message: "this model's providers do not store responses; send the whole conversation in input"}
	}
	if !isNull(req.Conversation) {
		return nil, &RequestError{Param: "conversation", Message: "this model's providers do not store conversations; send the whole conversation in input"}
	}
	if req.Background != nil && *req.Background {
		return nil, &RequestError{Param: "background", Message: "background responses are not supported for this model"}
	}
	out := chatRequest{Model: model, Temperature: nonNull(req.Temperature), TopP: nonNull(req.TopP),
		MaxTokens: req.MaxOutputTokens, Stream: req.Stream, User: req.User}
	if out.User == "" {
		out.User = req.SafetyIdentifier
	}
	if req.Stream {
		out.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if !isNull(req.Instructions) {
		var s string
		if err := json.Unmarshal(req.Instructions, &s); err != nil {
			return nil, &RequestError{Param: "instructions", Message: "must be a string"}
		}
		if s != "" {
			out.Messages = append(out.Messages, chatMessage{Role: "system", Content: s})
		}
	}
	msgs, err := inputMessages(req.Input, stored)
	if err != nil {
		return nil, err
	}
	out.Messages = append(out.Messages, msgs...)
	for i, raw := range req.Tools {
		t, err := tool(raw, i)
		if err != nil {
			return nil, err
		}
		out.Tools = append(out.Tools, t)
	}
	if len(out.Tools) > 0 {
		// OpenAI refuses tool_choice and parallel_tool_calls without tools.
		out.ParallelToolCalls = req.ParallelToolCalls
		if out.ToolChoice, err = toolChoice(req.ToolChoice); err != nil {
			return nil, err
		}
	}
	if req.Text != nil && !isNull(req.Text.Format) {
		if out.ResponseFormat, err = responseFormat(req.Text.Format); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode chat request: %w", err)
	}
	return b, nil
}

func isNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

func nonNull(v json.RawMessage) json.RawMessage {
	if isNull(v) {
		return nil
	}
	return v
}

// tool translates tools[i]: only function tools have a chat form; the
// built-in ones run inside OpenAI's service.
func tool(raw json.RawMessage, i int) (chatTool, error) {
	var t struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	}
	param := fmt.Sprintf("tools[%d]", i)
	if err := json.Unmarshal(raw, &t); err != nil {
		return chatTool{}, &RequestError{Param: param, Message: "must be a tool object"}
	}
	if t.Type != "function" {
		return chatTool{}, &RequestError{Param: param + ".type", Message: fmt.Sprintf("tool type %q runs inside OpenAI's service and is not available for this model; only function tools are", t.Type)}
	}
	if t.Name == "" {
		return chatTool{}, &RequestError{Param: param + ".name", Message: "a function tool needs a name"}
	}
	return chatTool{Type: "function", Function: chatToolDef{Name: t.Name, Description: t.Description,
		Parameters: nonNull(t.Parameters), Strict: t.Strict}}, nil
}

// toolChoice translates tool_choice: the strings pass, a function choice
// becomes chat's {"type":"function","function":{"name":...}}.
func toolChoice(raw json.RawMessage) (any, error) {
	if isNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none", "required":
			return s, nil
		}
		return nil, &RequestError{Param: "tool_choice", Message: fmt.Sprintf("%q is not one of auto, none, required", s)}
	}
	var c struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &c) != nil || c.Type != "function" || c.Name == "" {
		return nil, &RequestError{Param: "tool_choice", Message: "only auto, none, required and {\"type\":\"function\",\"name\":...} are available for this model"}
	}
	return map[string]any{"type": "function", "function": map[string]string{"name": c.Name}}, nil
}

// responseFormat translates text.format.
func responseFormat(raw json.RawMessage) (any, error) {
	var f struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, &RequestError{Param: "text.format", Message: "must be a format object"}
	}
	switch f.Type {
	case "text", "":
		return nil, nil
	case "json_object":
		return map[string]string{"type": "json_object"}, nil
	case "json_schema":
		if isNull(f.Schema) {
			return nil, &RequestError{Param: "text.format.schema", Message: "a json_schema format needs a schema"}
		}
		name := f.Name
		if name == "" {
			name = "output"
		}
		js := map[string]any{"name": name, "schema": f.Schema}
		if f.Description != "" {
			js["description"] = f.Description
		}
		if f.Strict != nil {
			js["strict"] = *f.Strict
		}
		return map[string]any{"type": "json_schema", "json_schema": js}, nil
	}
	return nil, &RequestError{Param: "text.format.type", Message: fmt.Sprintf("format %q is not available for this model", f.Type)}
}
