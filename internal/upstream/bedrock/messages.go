package bedrock

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID *string         `json:"tool_call_id"`
	Function   json.RawMessage `json:"function_call"`
	Audio      json.RawMessage `json:"audio"`
}

type chatPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function *struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// convertMessages maps messages to the system blocks and the Converse
// messages: system and developer messages are system blocks, in order;
// user, assistant and tool messages are messages (a tool message a user
// message holding a toolResult), consecutive ones of a role merged, as
// Converse wants the roles to alternate and parallel tool results in one
// message.
func convertMessages(v json.RawMessage) ([]systemBlock, []message, error) {
	var msgs []json.RawMessage
	if json.Unmarshal(v, &msgs) != nil {
		return nil, nil, &FieldError{Param: "messages", Message: "must be an array"}
	}
	var system []systemBlock
	var out []message
	for i, raw := range msgs {
		p := indexed("messages", i)
		var m chatMessage
		if json.Unmarshal(raw, &m) != nil {
			return nil, nil, &FieldError{Param: p, Message: "must be a message object"}
		}
		if m.Function != nil && !isNull(m.Function) {
			return nil, nil, &FieldError{Param: p + ".function_call", Message: "the legacy functions API is not supported by this provider; use tool_calls"}
		}
		if m.Audio != nil && !isNull(m.Audio) {
			return nil, nil, &FieldError{Param: p + ".audio", Message: "audio references are not supported by this provider"}
		}
		var role string
		var blocks []block
		var err error
		switch m.Role {
		case "system", "developer":
			texts, err := textsOf(p, m.Content, false)
			if err != nil {
				return nil, nil, err
			}
			for _, t := range texts {
				system = append(system, systemBlock{Text: t})
			}
			continue
		case "user":
			role = "user"
			blocks, err = userBlocks(p, m.Content)
		case "assistant":
			role = "assistant"
			blocks, err = assistantBlocks(p, m)
		case "tool":
			role = "user"
			blocks, err = toolBlocks(p, m)
		case "function":
			return nil, nil, &FieldError{Param: p + ".role", Message: "the legacy functions API is not supported by this provider; use tool messages"}
		default:
			return nil, nil, &FieldError{Param: p + ".role", Message: `must be "system", "developer", "user", "assistant" or "tool"`}
		}
		if err != nil {
			return nil, nil, err
		}
		if len(blocks) == 0 {
			continue // Converse refuses a message without content
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
		} else {
			out = append(out, message{Role: role, Content: blocks})
		}
	}
	return system, out, nil
}

func textBlock(s string) block { return block{Text: &s} }

// contentParts decodes content: a string or an array of parts; null or
// absent is no part.
func contentParts(p string, c json.RawMessage) (string, []chatPart, bool, error) {
	if c == nil || isNull(c) {
		return "", nil, false, nil
	}
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s, nil, true, nil
	}
	var ps []chatPart
	if json.Unmarshal(c, &ps) != nil {
		return "", nil, false, &FieldError{Param: p + ".content", Message: "must be a string or an array of content parts"}
	}
	return "", ps, false, nil
}

// textsOf reads content that may hold text only (system, developer, tool;
// with refusals, assistant). Empty texts are left out: Converse refuses a
// blank text block.
func textsOf(p string, c json.RawMessage, refusals bool) ([]string, error) {
	s, ps, isString, err := contentParts(p, c)
	if err != nil {
		return nil, err
	}
	if isString {
		if s == "" {
			return nil, nil
		}
		return []string{s}, nil
	}
	var out []string
	for j, cp := range ps {
		t := cp.Text
		switch {
		case cp.Type == "text":
		case cp.Type == "refusal" && refusals:
			t = cp.Refusal
		default:
			return nil, &FieldError{Param: indexed(p+".content", j) + ".type", Message: `only "text" parts are supported in this message by this provider`}
		}
		if t != "" {
			out = append(out, t)
		}
	}
	return out, nil
}

// imageFormats are the image media types Converse takes, by its format name.
var imageFormats = map[string]string{"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif", "image/webp": "webp"}

func userBlocks(p string, c json.RawMessage) ([]block, error) {
	s, ps, isString, err := contentParts(p, c)
	if err != nil || isString {
		if s == "" {
			return nil, err
		}
		return []block{textBlock(s)}, nil
	}
	var out []block
	for j, cp := range ps {
		q := indexed(p+".content", j)
		switch cp.Type {
		case "text":
			if cp.Text != "" {
				out = append(out, textBlock(cp.Text))
			}
		case "image_url":
			if cp.ImageURL == nil || cp.ImageURL.URL == "" {
				return nil, &FieldError{Param: q + ".image_url.url", Message: "is required"}
			}
			b, err := imageOf(q+".image_url.url", cp.ImageURL.URL)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		default:
			return nil, &FieldError{Param: q + ".type", Message: `must be "text" or "image_url" for this provider`}
		}
	}
	return out, nil
}

// imageOf maps a base64 data URL to an image block. Converse takes image
// bytes or an S3 location, never a URL to fetch, so any other URL is
// refused rather than fetched by the gateway.
func imageOf(param, u string) (block, error) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return block{}, &FieldError{Param: param, Message: "must be a base64 data URL: this provider takes no image URLs"}
	}
	meta, data, ok := strings.Cut(rest, ",")
	mime, isBase64 := strings.CutSuffix(meta, ";base64")
	if !ok || !isBase64 || data == "" {
		return block{}, &FieldError{Param: param, Message: "must be a base64 data URL (data:<media type>;base64,<data>)"}
	}
	f, ok := imageFormats[strings.ToLower(mime)]
	if !ok {
		return block{}, &FieldError{Param: param, Message: "must be a PNG, JPEG, GIF or WebP image for this provider"}
	}
	img := &imageBlock{Format: f}
	img.Source.Bytes = data
	return block{Image: img}, nil
}

func assistantBlocks(p string, m chatMessage) ([]block, error) {
	texts, err := textsOf(p, m.Content, true)
	if err != nil {
		return nil, err
	}
	var out []block
	for _, t := range texts {
		out = append(out, textBlock(t))
	}
	if m.ToolCalls == nil || isNull(m.ToolCalls) {
		return out, nil
	}
	var calls []chatToolCall
	if json.Unmarshal(m.ToolCalls, &calls) != nil {
		return nil, &FieldError{Param: p + ".tool_calls", Message: "must be an array of tool calls"}
	}
	for j, tc := range calls {
		q := indexed(p+".tool_calls", j)
		if tc.Type != "function" || tc.Function == nil {
			return nil, &FieldError{Param: q + ".type", Message: "only function tool calls are supported by this provider"}
		}
		if tc.ID == "" {
			return nil, &FieldError{Param: q + ".id", Message: "is required"}
		}
		if tc.Function.Name == "" {
			return nil, &FieldError{Param: q + ".function.name", Message: "is required"}
		}
		args := json.RawMessage(tc.Function.Arguments)
		if len(bytes.TrimSpace(args)) == 0 {
			args = json.RawMessage("{}")
		}
		if !json.Valid(args) || !isObject(args) {
			return nil, &FieldError{Param: q + ".function.arguments", Message: "must be a JSON object"}
		}
		var buf bytes.Buffer
		_ = json.Compact(&buf, args) // valid, checked above
		out = append(out, block{ToolUse: &toolUse{ToolUseID: tc.ID, Name: tc.Function.Name, Input: buf.Bytes()}})
	}
	return out, nil
}

// toolBlocks maps a tool message to a toolResult for its call: content that
// is a JSON object is a json block, any other a text block.
func toolBlocks(p string, m chatMessage) ([]block, error) {
	if m.ToolCallID == nil || *m.ToolCallID == "" {
		return nil, &FieldError{Param: p + ".tool_call_id", Message: "is required"}
	}
	texts, err := textsOf(p, m.Content, false)
	if err != nil {
		return nil, err
	}
	s := strings.Join(texts, "")
	var rb resultBlock
	if raw := json.RawMessage(s); isObject(raw) && json.Valid(raw) {
		var buf bytes.Buffer
		_ = json.Compact(&buf, raw)
		rb.JSON = buf.Bytes()
	} else {
		rb.Text = &s
	}
	return []block{{ToolResult: &toolResult{ToolUseID: *m.ToolCallID, Content: []resultBlock{rb}}}}, nil
}

func usesTools(msgs []message) bool {
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.ToolUse != nil || b.ToolResult != nil {
				return true
			}
		}
	}
	return false
}

// declaredByCalls declares the tools the conversation's earlier calls
// named, each with an open object schema.
func declaredByCalls(msgs []message) *toolConfig {
	var names []string
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.ToolUse != nil && !slices.Contains(names, b.ToolUse.Name) {
				names = append(names, b.ToolUse.Name)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	tc := &toolConfig{}
	for _, n := range names {
		e := toolEntry{ToolSpec: toolSpec{Name: n}}
		e.ToolSpec.InputSchema.JSON = json.RawMessage(`{"type":"object"}`)
		tc.Tools = append(tc.Tools, e)
	}
	return tc
}

type chatTool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// convertTools maps tools and tool_choice to toolConfig. tool_choice
// "auto" → {"auto":{}}, "required" → {"any":{}}, a named function →
// {"tool":{"name":...}}. Converse has no "none": with tools it is refused
// (the model could still call one), without tools it asks for nothing.
func convertTools(v, choice json.RawMessage) (*toolConfig, error) {
	var raw []json.RawMessage
	if v != nil && json.Unmarshal(v, &raw) != nil {
		return nil, &FieldError{Param: "tools", Message: "must be an array"}
	}
	tc := &toolConfig{}
	var names []string
	for i, r := range raw {
		p := indexed("tools", i)
		var ct chatTool
		if json.Unmarshal(r, &ct) != nil {
			return nil, &FieldError{Param: p, Message: "must be a function tool object"}
		}
		if ct.Type != "function" {
			return nil, &FieldError{Param: p + ".type", Message: "only function tools are supported by this provider"}
		}
		if ct.Function == nil || ct.Function.Name == "" {
			return nil, &FieldError{Param: p + ".function.name", Message: "is required"}
		}
		e := toolEntry{ToolSpec: toolSpec{Name: ct.Function.Name, Description: ct.Function.Description}}
		switch s := ct.Function.Parameters; {
		case s == nil || isNull(s):
			e.ToolSpec.InputSchema.JSON = json.RawMessage(`{"type":"object","properties":{}}`)
		case !isObject(s):
			return nil, &FieldError{Param: p + ".function.parameters", Message: "must be a JSON Schema object"}
		default:
			e.ToolSpec.InputSchema.JSON = s
		}
		tc.Tools = append(tc.Tools, e)
		names = append(names, e.ToolSpec.Name)
	}
	if choice != nil {
		var s string
		if json.Unmarshal(choice, &s) == nil {
			switch s {
			case "auto":
				tc.ToolChoice = json.RawMessage(`{"auto":{}}`)
			case "required":
				tc.ToolChoice = json.RawMessage(`{"any":{}}`)
			case "none":
				if len(names) > 0 {
					return nil, &FieldError{Param: "tool_choice", Message: `"none" is not supported by this provider with tools; leave the tools out instead`}
				}
			default:
				return nil, &FieldError{Param: "tool_choice", Message: `must be "auto", "required", "none" or a function object`}
			}
		} else {
			var obj struct {
				Type     string `json:"type"`
				Function *struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if json.Unmarshal(choice, &obj) != nil || obj.Type != "function" {
				return nil, &FieldError{Param: "tool_choice", Message: `only {"type":"function","function":{"name":...}} is supported by this provider`}
			}
			if obj.Function == nil || obj.Function.Name == "" {
				return nil, &FieldError{Param: "tool_choice.function.name", Message: "is required"}
			}
			if !slices.Contains(names, obj.Function.Name) {
				return nil, &FieldError{Param: "tool_choice.function.name", Message: "names no function in tools"}
			}
			b, _ := encode(map[string]map[string]string{"tool": {"name": obj.Function.Name}})
			tc.ToolChoice = b
		}
		if len(names) == 0 && tc.ToolChoice != nil && string(tc.ToolChoice) != `{"auto":{}}` {
			return nil, &FieldError{Param: "tool_choice", Message: "is only allowed when tools are specified"}
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	return tc, nil
}
