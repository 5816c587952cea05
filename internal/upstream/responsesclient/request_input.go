package responsesclient

import (
	"encoding/json"
	"fmt"
	"strings"
)

// item is one element of a Responses input list: a message (with or
// without "type"), a function call the model made, or its output.
type item struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// inputMessages translates input: a string is one user message; a list is
// translated item by item, an item_reference as the stored item it names.
func inputMessages(raw json.RawMessage, stored Items) ([]chatMessage, error) {
	if isNull(raw) {
		return nil, &RequestError{Param: "input", Message: "you must provide an input"}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []chatMessage{{Role: "user", Content: s}}, nil
	}
	var items []item
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, &RequestError{Param: "input", Message: "must be a string or a list of input items"}
	}
	var out []chatMessage
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		if it.Type == "item_reference" {
			var err error
			if it, err = resolve(it, stored, param); err != nil {
				return nil, err
			}
		}
		switch it.Type {
		case "message", "":
			m, err := message(it, param)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		case "function_call":
			c := chatCall{ID: it.CallID, Type: "function", Function: chatFunction{Name: it.Name, Arguments: it.Arguments}}
			if c.Function.Arguments == "" {
				c.Function.Arguments = "{}"
			}
			// Consecutive calls are one assistant turn, as chat has them;
			// a call after the assistant's text joins that turn too.
			if n := len(out); n > 0 && out[n-1].Role == "assistant" {
				out[n-1].ToolCalls = append(out[n-1].ToolCalls, c)
				continue
			}
			out = append(out, chatMessage{Role: "assistant", ToolCalls: []chatCall{c}})
		case "function_call_output":
			text, err := toolOutputText(it.Output, param+".output")
			if err != nil {
				return nil, err
			}
			out = append(out, chatMessage{Role: "tool", ToolCallID: it.CallID, Content: text})
		case "reasoning":
			// Dropped: its encrypted content is for the OpenAI model that
			// wrote it, and no other provider can read it.
		default:
			return nil, &RequestError{Param: param + ".type", Message: fmt.Sprintf("input item type %q is not available for this model", it.Type)}
		}
	}
	if len(out) == 0 {
		return nil, &RequestError{Param: "input", Message: "the input has no message"}
	}
	return out, nil
}

// message translates a message item. User content keeps its parts when it
// has an image; otherwise every role's content is its text joined.
func message(it item, param string) (chatMessage, error) {
	role := it.Role
	switch role {
	case "user", "assistant", "system":
	case "developer":
		role = "system" // chat's providers here know no developer role
	default:
		return chatMessage{}, &RequestError{Param: param + ".role", Message: fmt.Sprintf("role %q is not one of user, assistant, system, developer", it.Role)}
	}
	var s string
	if json.Unmarshal(it.Content, &s) == nil {
		return chatMessage{Role: role, Content: s}, nil
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Refusal  string `json:"refusal"`
		ImageURL string `json:"image_url"`
		FileID   string `json:"file_id"`
		Detail   string `json:"detail"`
	}
	if err := json.Unmarshal(it.Content, &parts); err != nil {
		return chatMessage{}, &RequestError{Param: param + ".content", Message: "must be a string or a list of content parts"}
	}
	var out []chatPart
	image := false
	for j, p := range parts {
		pp := fmt.Sprintf("%s.content[%d]", param, j)
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, chatPart{Type: "text", Text: p.Text})
		case "refusal":
			out = append(out, chatPart{Type: "text", Text: p.Refusal})
		case "input_image":
			if role != "user" {
				return chatMessage{}, &RequestError{Param: pp + ".type", Message: "images are only taken in user messages"}
			}
			if p.ImageURL == "" {
				return chatMessage{}, &RequestError{Param: pp + ".image_url", Message: "only images given by image_url (a URL or a data URL) are available for this model; file_id is not"}
			}
			image = true
			d := p.Detail
			if d == "auto" {
				d = ""
			}
			out = append(out, chatPart{Type: "image_url", ImageURL: &imageURL{URL: p.ImageURL, Detail: d}})
		default:
			return chatMessage{}, &RequestError{Param: pp + ".type", Message: fmt.Sprintf("content type %q is not available for this model", p.Type)}
		}
	}
	if image {
		return chatMessage{Role: role, Content: out}, nil
	}
	texts := make([]string, len(out))
	for i, p := range out {
		texts[i] = p.Text
	}
	return chatMessage{Role: role, Content: strings.Join(texts, "\n")}, nil
}

// toolOutputText is a function_call_output's output as a tool message's text:
// a string as is, a list of text parts joined (tool messages carry text).
func toolOutputText(raw json.RawMessage, param string) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", &RequestError{Param: param, Message: "must be a string or a list of content parts"}
	}
	texts := make([]string, 0, len(parts))
	for j, p := range parts {
		if p.Type != "input_text" && p.Type != "output_text" {
			return "", &RequestError{Param: fmt.Sprintf("%s[%d].type", param, j), Message: fmt.Sprintf("a tool output of type %q is not available for this model; only text is", p.Type)}
		}
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n"), nil
}
