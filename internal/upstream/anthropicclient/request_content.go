package anthropicclient

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// appendAssistant makes one assistant message: its text joined, its tool_use
// blocks as tool_calls. Thinking blocks are dropped: they are the model's
// own reasoning, which chat completions has no field for and no provider
// could verify.
func appendAssistant(msgs *[]chatMessage, blocks []block, param string) error {
	var texts []string
	var calls []chatToolCall
	for j, b := range blocks {
		bp := param + "." + strconv.Itoa(j)
		switch b.Type {
		case "text":
			t, err := blockText(b.Text, bp+".text")
			if err != nil {
				return err
			}
			texts = append(texts, t)
		case "tool_use":
			call, err := toolCall(b, bp)
			if err != nil {
				return err
			}
			calls = append(calls, call)
		case "thinking", "redacted_thinking":
		default:
			return unsupportedBlock(b.Type, bp)
		}
	}
	msg := chatMessage{Role: "assistant", ToolCalls: calls}
	if text := strings.Join(texts, "\n"); text != "" || len(calls) == 0 {
		msg.Content = text
	}
	*msgs = append(*msgs, msg)
	return nil
}

func toolCall(b block, param string) (chatToolCall, error) {
	var id, name string
	if err := scalar(b.ID, param+".id", &id); err != nil || id == "" {
		return chatToolCall{}, reqErr(param+".id", "must be a non-empty string")
	}
	if err := scalar(b.Name, param+".name", &name); err != nil || name == "" {
		return chatToolCall{}, reqErr(param+".name", "must be a non-empty string")
	}
	args := "{}"
	if !isNull(b.Input) {
		if b.Input[0] != '{' {
			return chatToolCall{}, reqErr(param+".input", "must be an object")
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, b.Input); err != nil {
			return chatToolCall{}, reqErr(param+".input", "must be an object")
		}
		args = buf.String()
	}
	return chatToolCall{ID: id, Type: "function", Function: chatFunction{Name: name, Arguments: args}}, nil
}

// appendUser makes the tool messages for the tool_result blocks, in order,
// then one user message with the rest. OpenAI requires the tool messages
// right after the assistant turn that called them, so they go first even if
// the client put text before them.
func appendUser(msgs *[]chatMessage, blocks []block, param string) error {
	var parts []chatPart
	results := 0
	for j, b := range blocks {
		bp := param + "." + strconv.Itoa(j)
		if b.Type == "tool_result" {
			msg, images, err := toolResult(b, bp)
			if err != nil {
				return err
			}
			*msgs = append(*msgs, msg)
			parts = append(parts, images...)
			results++
			continue
		}
		part, err := userPart(b, bp)
		if err != nil {
			return err
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 && results > 0 {
		return nil
	}
	*msgs = append(*msgs, chatMessage{Role: "user", Content: partsContent(parts)})
	return nil
}

// partsContent is a plain string when every part is text (joined with a
// newline), which every OpenAI-compatible server accepts, and the part list
// otherwise.
func partsContent(parts []chatPart) any {
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type != "text" {
			return parts
		}
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n")
}

// userPart translates a text, image or text document block.
func userPart(b block, param string) (chatPart, error) {
	switch b.Type {
	case "text":
		t, err := blockText(b.Text, param+".text")
		return chatPart{Type: "text", Text: t}, err
	case "image":
		u, err := imageSource(b.Source, param+".source")
		return chatPart{Type: "image_url", ImageURL: &imageURL{URL: u}}, err
	case "document":
		t, err := documentText(b.Source, param+".source")
		return chatPart{Type: "text", Text: t}, err
	}
	return chatPart{}, unsupportedBlock(b.Type, param)
}

func unsupportedBlock(typ, param string) error {
	if typ == "" {
		return reqErr(param+".type", "field required")
	}
	return reqErr(param+".type", "content block type %q is not supported by this model's provider", typ)
}

// imageSource renders an image source as the image_url OpenAI takes: a data:
// URL for base64, the URL itself for url. File references (the Files API)
// have no meaning to another provider.
func imageSource(v json.RawMessage, param string) (string, error) {
	var s source
	if err := scalar(v, param, &s); err != nil || isNull(v) {
		return "", reqErr(param, "field required")
	}
	switch s.Type {
	case "base64":
		if s.MediaType == "" || s.Data == "" {
			return "", reqErr(param, "base64 source needs media_type and data")
		}
		return "data:" + s.MediaType + ";base64," + s.Data, nil
	case "url":
		if s.URL == "" {
			return "", reqErr(param+".url", "field required")
		}
		return s.URL, nil
	}
	return "", reqErr(param+".type", "image source type %q is not supported", s.Type)
}

// documentText reads a plain-text document (source text, or content of text
// blocks). PDF and file documents are refused rather than silently dropped:
// OpenAI-compatible servers have no common way to take them.
func documentText(v json.RawMessage, param string) (string, error) {
	var s source
	if err := scalar(v, param, &s); err != nil || isNull(v) {
		return "", reqErr(param, "field required")
	}
	switch s.Type {
	case "text":
		return s.Data, nil
	case "content":
		var str string
		if json.Unmarshal(s.Content, &str) == nil {
			return str, nil
		}
		var blocks []block
		if json.Unmarshal(s.Content, &blocks) != nil {
			return "", reqErr(param+".content", "must be a string or a list of text blocks")
		}
		texts := make([]string, 0, len(blocks))
		for j, b := range blocks {
			t, err := blockText(b.Text, param+".content."+strconv.Itoa(j)+".text")
			if err != nil || b.Type != "text" {
				return "", reqErr(param+".content."+strconv.Itoa(j), "only text blocks are supported")
			}
			texts = append(texts, t)
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", reqErr(param+".type", "document source type %q is not supported by this model's provider", s.Type)
}

// toolResult makes the tool message for a tool_result block. Its text
// blocks are joined with a newline; its images cannot ride in a tool message
// (text only) and are returned for the user message that follows. is_error
// is kept as an "Error: " prefix, since a tool message has no flag for it
// and the model should know the tool failed.
func toolResult(b block, param string) (chatMessage, []chatPart, error) {
	var id string
	if err := scalar(b.ToolUseID, param+".tool_use_id", &id); err != nil || id == "" {
		return chatMessage{}, nil, reqErr(param+".tool_use_id", "must be a non-empty string")
	}
	var isError bool
	if err := scalar(b.IsError, param+".is_error", &isError); err != nil {
		return chatMessage{}, nil, err
	}
	var text string
	var images []chatPart
	if !isNull(b.Content) && json.Unmarshal(b.Content, &text) != nil {
		var blocks []block
		if json.Unmarshal(b.Content, &blocks) != nil {
			return chatMessage{}, nil, reqErr(param+".content", "must be a string or a list of content blocks")
		}
		texts := make([]string, 0, len(blocks))
		for j, inner := range blocks {
			part, err := userPart(inner, param+".content."+strconv.Itoa(j))
			if err != nil {
				return chatMessage{}, nil, err
			}
			if part.Type == "text" {
				texts = append(texts, part.Text)
			} else {
				images = append(images, part)
			}
		}
		text = strings.Join(texts, "\n")
	}
	if isError {
		text = "Error: " + text
	}
	return chatMessage{Role: "tool", ToolCallID: id, Content: text}, images, nil
}
