package anthropic

import (
	"encoding/json"
	"slices"
	"strings"
)

// message is one Messages API turn. Content is always a block list, so turns
// of the same role can be merged.
type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is any content block this translation writes: text, image,
// tool_use, tool_result. Empty fields are left out; a text block is never
// empty, as the Messages API refuses empty text.
type block struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	Source       *imageSource    `json:"source,omitempty"`
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Content      any             `json:"content,omitempty"` // tool_result: string or []block
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type imageSource struct {
	Type      string `json:"type"` // "base64" or "url"
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type chatMessage struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	ToolCalls    []chatToolCall  `json:"tool_calls"`
	ToolCallID   string          `json:"tool_call_id"`
	FunctionCall json.RawMessage `json:"function_call"`
	Audio        json.RawMessage `json:"audio"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type contentPart struct {
	Type     string  `json:"type"`
	Text     *string `json:"text"`
	Refusal  *string `json:"refusal"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
	// cache_control is Anthropic's prompt caching mark; clients that know
	// their provider (LiteLLM's convention) put it on OpenAI parts.
	CacheControl json.RawMessage `json:"cache_control"`
}

// convertMessages maps the OpenAI messages: system and developer messages to
// the top-level system, every other message to a turn, consecutive turns of
// one role merged because the Messages API requires user and assistant to
// alternate. The result holds at least one turn, or an error says why not.
func convertMessages(v json.RawMessage) (system any, msgs []message, err error) {
	var raw []json.RawMessage
	if json.Unmarshal(v, &raw) != nil {
		return nil, nil, &FieldError{Param: "messages", Message: "must be an array of message objects"}
	}
	var sys []block
	for i, r := range raw {
		p := indexed("messages", i)
		var m chatMessage
		if err := json.Unmarshal(r, &m); err != nil || !isObject(r) {
			return nil, nil, &FieldError{Param: p, Message: "must be a message object with a string role"}
		}
		if !isNull(m.FunctionCall) && m.FunctionCall != nil {
			return nil, nil, &FieldError{Param: p + ".function_call", Message: "the legacy functions API is not supported by this provider; use tool_calls"}
		}
		if !isNull(m.Audio) && m.Audio != nil {
			return nil, nil, &FieldError{Param: p + ".audio", Message: "audio is not supported by this provider"}
		}
		var role string
		var blocks []block
		switch m.Role {
		case "system", "developer":
			b, err := contentBlocks(m.Content, p, "text")
			if err != nil {
				return nil, nil, err
			}
			sys = append(sys, b...)
			continue
		case "user":
			role = "user"
			blocks, err = contentBlocks(m.Content, p, "text", "image_url")
		case "assistant":
			role = "assistant"
			blocks, err = contentBlocks(m.Content, p, "text", "refusal")
			if err == nil {
				blocks, err = appendToolUses(blocks, m.ToolCalls, p)
			}
		case "tool":
			role = "user"
			blocks, err = toolResult(m, p)
		case "function":
			return nil, nil, &FieldError{Param: p + ".role", Message: "the legacy functions API is not supported by this provider; use role \"tool\""}
		default:
			return nil, nil, &FieldError{Param: p + ".role", Message: "must be system, developer, user, assistant or tool"}
		}
		if err != nil {
			return nil, nil, err
		}
		if len(blocks) == 0 {
			continue // an empty turn: the Messages API refuses it, and it says nothing
		}
		if n := len(msgs); n > 0 && msgs[n-1].Role == role {
			msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
		} else {
			msgs = append(msgs, message{Role: role, Content: blocks})
		}
	}
	if len(msgs) == 0 {
		return nil, nil, &FieldError{Param: "messages", Message: "must hold at least one user, assistant or tool message with content"}
	}
	for i := range msgs {
		if msgs[i].Role == "user" {
			resultsFirst(msgs[i].Content)
		}
	}
	switch {
	case len(sys) == 1 && sys[0].CacheControl == nil:
		system = sys[0].Text
	case len(sys) > 0:
		system = sys // each message's text kept apart, not joined with a guessed separator
	}
	return system, msgs, nil
}

// resultsFirst moves tool_result blocks before the other blocks of a user
// turn, keeping each group's order: the Messages API requires the results to
// come first, and a tool message merged after a user message would otherwise
// break that.
func resultsFirst(bs []block) {
	sorted := make([]block, 0, len(bs))
	for _, b := range bs {
		if b.Type == "tool_result" {
			sorted = append(sorted, b)
		}
	}
	if len(sorted) == 0 || len(sorted) == len(bs) {
		return
	}
	for _, b := range bs {
		if b.Type != "tool_result" {
			sorted = append(sorted, b)
		}
	}
	copy(bs, sorted)
}

// contentBlocks reads a message's content: a string, or an array of parts of
// the allowed types. Empty text is left out.
func contentBlocks(v json.RawMessage, p string, allowed ...string) ([]block, error) {
	if v == nil || isNull(v) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []block{{Type: "text", Text: s}}, nil
	}
	var parts []json.RawMessage
	if json.Unmarshal(v, &parts) != nil {
		return nil, &FieldError{Param: p + ".content", Message: "must be a string or an array of content parts"}
	}
	blocks := make([]block, 0, len(parts))
	for j, r := range parts {
		pp := indexed(p+".content", j)
		var part contentPart
		if json.Unmarshal(r, &part) != nil {
			return nil, &FieldError{Param: pp, Message: "must be a content part object"}
		}
		if !slices.Contains(allowed, part.Type) {
			return nil, &FieldError{Param: pp + ".type", Message: "content part type " + quote(part.Type) + " is not supported here by this provider (allowed: " + strings.Join(allowed, ", ") + ")"}
		}
		var b block
		switch part.Type {
		case "text":
			if part.Text == nil {
				return nil, &FieldError{Param: pp + ".text", Message: "is required"}
			}
			b = block{Type: "text", Text: *part.Text}
		case "refusal":
			if part.Refusal == nil {
				return nil, &FieldError{Param: pp + ".refusal", Message: "is required"}
			}
			b = block{Type: "text", Text: *part.Refusal}
		case "image_url":
			if part.ImageURL == nil {
				return nil, &FieldError{Param: pp + ".image_url.url", Message: "is required"}
			}
			src, err := imageSourceOf(part.ImageURL.URL, pp+".image_url.url")
			if err != nil {
				return nil, err
			}
			b = block{Type: "image", Source: src}
		}
		if b.Type == "text" && b.Text == "" {
			continue
		}
		if !isNull(part.CacheControl) {
			b.CacheControl = part.CacheControl
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// imageSourceOf maps an image_url: a base64 data URL to a base64 source, an
// http(s) URL to a url source the provider fetches itself.
func imageSourceOf(u, param string) (*imageSource, error) {
	lower := strings.ToLower(u[:min(len(u), 8)])
	switch {
	case strings.HasPrefix(lower, "data:"):
		meta, data, ok := strings.Cut(u[len("data:"):], ",")
		mediaType, params, _ := strings.Cut(meta, ";")
		if !ok || !strings.HasSuffix(strings.ToLower(params), "base64") || mediaType == "" || data == "" {
			return nil, &FieldError{Param: param, Message: "a data URL must be base64 with a media type (data:image/png;base64,...)"}
		}
		return &imageSource{Type: "base64", MediaType: strings.ToLower(mediaType), Data: data}, nil
	case strings.HasPrefix(lower, "https://"), strings.HasPrefix(lower, "http://"):
		return &imageSource{Type: "url", URL: u}, nil
	}
	return nil, &FieldError{Param: param, Message: "must be an http(s) URL or a base64 data URL"}
}

// appendToolUses maps an assistant's tool_calls to tool_use blocks. The
// arguments string must hold a JSON object, the Messages API's input; an
// empty string, which some models emit for a call without parameters, is {}.
func appendToolUses(blocks []block, calls []chatToolCall, p string) ([]block, error) {
	for j, c := range calls {
		pp := indexed(p+".tool_calls", j)
		if c.Type != "" && c.Type != "function" {
			return nil, &FieldError{Param: pp + ".type", Message: "only function tool calls are supported by this provider"}
		}
		if c.ID == "" {
			return nil, &FieldError{Param: pp + ".id", Message: "is required"}
		}
		if c.Function.Name == "" {
			return nil, &FieldError{Param: pp + ".function.name", Message: "is required"}
		}
		args := json.RawMessage(strings.TrimSpace(c.Function.Arguments))
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		if !json.Valid(args) {
			return nil, &FieldError{Param: pp + ".function.arguments", Message: "is not valid JSON"}
		}
		if !isObject(args) {
			return nil, &FieldError{Param: pp + ".function.arguments", Message: "must be a JSON object"}
		}
		blocks = append(blocks, block{Type: "tool_use", ID: c.ID, Name: c.Function.Name, Input: args})
	}
	return blocks, nil
}

// toolResult maps a tool message to a tool_result block for a user turn.
func toolResult(m chatMessage, p string) ([]block, error) {
	if m.ToolCallID == "" {
		return nil, &FieldError{Param: p + ".tool_call_id", Message: "is required"}
	}
	b := block{Type: "tool_result", ToolUseID: m.ToolCallID}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		if s != "" {
			b.Content = s
		}
	} else {
		texts, err := contentBlocks(m.Content, p, "text")
		if err != nil {
			return nil, err
		}
		if len(texts) > 0 {
			b.Content = texts
		}
	}
	return []block{b}, nil
}

func quote(s string) string { return string(appendString(nil, s)) }
