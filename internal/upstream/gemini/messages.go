package gemini

import (
	"bytes"
	"encoding/json"
	"path"
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
	InputAudio *struct {
		Data   string `json:"data"`
		Format string `json:"format"`
	} `json:"input_audio"`
	File *struct {
		FileData string `json:"file_data"`
		FileID   string `json:"file_id"`
	} `json:"file"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function *struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
	ExtraContent *extraContent `json:"extra_content,omitempty"`
}

// extraContent is where Google's own OpenAI-compatible endpoint carries a
// function call's thought signature, which thinking models (Gemini 3
// always) require back on the functionCall part of later turns. The
// responses of this package write it there too, so a client that keeps the
// tool call as received sends it back.
type extraContent struct {
	Google *struct {
		ThoughtSignature string `json:"thought_signature,omitempty"`
	} `json:"google,omitempty"`
}

// convertMessages maps messages to systemInstruction and contents. System
// and developer messages go to systemInstruction, one text part each, in
// order; user, assistant and tool messages become turns (assistant →
// model, tool → user holding functionResponse parts), consecutive turns of
// one role merged into one, as parallel function responses must share one
// turn.
func convertMessages(v json.RawMessage) (*content, []content, error) {
	var msgs []json.RawMessage
	if json.Unmarshal(v, &msgs) != nil {
		return nil, nil, &FieldError{Param: "messages", Message: "must be an array"}
	}
	var system *content
	var turns []content
	callNames := map[string]string{} // tool call id → function name, from earlier assistant turns
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
		var parts []part
		var err error
		switch m.Role {
		case "system", "developer":
			if parts, err = textParts(p, m.Content); err != nil {
				return nil, nil, err
			}
			if len(parts) > 0 {
				if system == nil {
					system = &content{}
				}
				system.Parts = append(system.Parts, parts...)
			}
			continue
		case "user":
			role = "user"
			parts, err = userParts(p, m.Content)
		case "assistant":
			role = "model"
			parts, err = assistantParts(p, m, callNames)
		case "tool":
			role = "user"
			parts, err = toolParts(p, m, callNames)
		case "function":
			return nil, nil, &FieldError{Param: p + ".role", Message: "the legacy functions API is not supported by this provider; use tool messages"}
		default:
			return nil, nil, &FieldError{Param: p + ".role", Message: `must be "system", "developer", "user", "assistant" or "tool"`}
		}
		if err != nil {
			return nil, nil, err
		}
		if len(parts) == 0 {
			continue // Gemini refuses a turn without parts
		}
		if n := len(turns); n > 0 && turns[n-1].Role == role {
			turns[n-1].Parts = append(turns[n-1].Parts, parts...)
		} else {
			turns = append(turns, content{Role: role, Parts: parts})
		}
	}
	return system, turns, nil
}

func textPart(s string) part { return part{Text: &s} }

// contentParts decodes content: a string (one text part) or an array of
// parts; null or absent is no part.
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

// textParts reads content that may hold text only (system, developer).
// Empty texts are left out: Gemini refuses an empty part.
func textParts(p string, c json.RawMessage) ([]part, error) {
	s, ps, isString, err := contentParts(p, c)
	if err != nil {
		return nil, err
	}
	if isString {
		if s == "" {
			return nil, nil
		}
		return []part{textPart(s)}, nil
	}
	var out []part
	for j, cp := range ps {
		if cp.Type != "text" {
			return nil, &FieldError{Param: indexed(p+".content", j) + ".type", Message: `only "text" parts are supported in this message by this provider`}
		}
		if cp.Text != "" {
			out = append(out, textPart(cp.Text))
		}
	}
	return out, nil
}

func userParts(p string, c json.RawMessage) ([]part, error) {
	s, ps, isString, err := contentParts(p, c)
	if err != nil || isString {
		if s == "" {
			return nil, err
		}
		return []part{textPart(s)}, nil
	}
	var out []part
	for j, cp := range ps {
		q := indexed(p+".content", j)
		switch cp.Type {
		case "text":
			if cp.Text != "" {
				out = append(out, textPart(cp.Text))
			}
		case "image_url":
			if cp.ImageURL == nil || cp.ImageURL.URL == "" {
				return nil, &FieldError{Param: q + ".image_url.url", Message: "is required"}
			}
			pt, err := mediaPart(q+".image_url.url", cp.ImageURL.URL, true)
			if err != nil {
				return nil, err
			}
			out = append(out, pt)
		case "input_audio":
			if cp.InputAudio == nil || cp.InputAudio.Data == "" {
				return nil, &FieldError{Param: q + ".input_audio.data", Message: "is required"}
			}
			switch cp.InputAudio.Format {
			case "wav", "mp3":
				out = append(out, part{InlineData: &blob{MimeType: "audio/" + cp.InputAudio.Format, Data: cp.InputAudio.Data}})
			default:
				return nil, &FieldError{Param: q + ".input_audio.format", Message: `must be "wav" or "mp3"`}
			}
		case "file":
			if cp.File == nil || cp.File.FileData == "" {
				return nil, &FieldError{Param: q + ".file", Message: "only file_data (a base64 data URL) is supported by this provider, not file_id"}
			}
			pt, err := mediaPart(q+".file.file_data", cp.File.FileData, false)
			if err != nil {
				return nil, err
			}
			out = append(out, pt)
		default:
			return nil, &FieldError{Param: q + ".type", Message: `must be "text", "image_url", "input_audio" or "file"`}
		}
	}
	return out, nil
}

// imageTypes are the media types an image URL's extension names, for
// fileData, which requires one (https://ai.google.dev/gemini-api/docs/image-understanding).
var imageTypes = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
	".heic": "image/heic", ".heif": "image/heif", ".gif": "image/gif", ".pdf": "application/pdf",
}

// mediaPart maps a data URL to inlineData, and (when urls) an http(s) or
// gs:// URL to fileData with the media type its extension names. A URL
// whose type cannot be told is refused: Gemini requires the type, and a
// guess would fail there or be read wrongly.
func mediaPart(param, u string, urls bool) (part, error) {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		mime, isBase64 := strings.CutSuffix(meta, ";base64")
		if !ok || !isBase64 || mime == "" || data == "" {
			return part{}, &FieldError{Param: param, Message: "must be a base64 data URL (data:<media type>;base64,<data>)"}
		}
		return part{InlineData: &blob{MimeType: mime, Data: data}}, nil
	}
	if !urls {
		return part{}, &FieldError{Param: param, Message: "must be a base64 data URL"}
	}
	if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "gs://") {
		return part{}, &FieldError{Param: param, Message: "must be a data, http(s) or gs:// URL"}
	}
	noQuery, _, _ := strings.Cut(u, "?")
	noQuery, _, _ = strings.Cut(noQuery, "#")
	mime, ok := imageTypes[strings.ToLower(path.Ext(noQuery))]
	if !ok {
		return part{}, &FieldError{Param: param, Message: "cannot tell the image's media type from the URL (.png, .jpg, .jpeg, .webp, .heic, .heif, .gif, .pdf): send it as a data URL"}
	}
	return part{FileData: &fileData{MimeType: mime, FileURI: u}}, nil
}

func assistantParts(p string, m chatMessage, callNames map[string]string) ([]part, error) {
	s, ps, isString, err := contentParts(p, m.Content)
	if err != nil {
		return nil, err
	}
	var out []part
	if isString && s != "" {
		out = append(out, textPart(s))
	}
	for j, cp := range ps {
		switch cp.Type {
		case "text":
			if cp.Text != "" {
				out = append(out, textPart(cp.Text))
			}
		case "refusal":
			if cp.Refusal != "" {
				out = append(out, textPart(cp.Refusal))
			}
		default:
			return nil, &FieldError{Param: indexed(p+".content", j) + ".type", Message: `only "text" and "refusal" parts are supported in assistant messages`}
		}
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
		pt := part{FunctionCall: &functionCall{Name: tc.Function.Name, Args: buf.Bytes()}}
		if tc.ExtraContent != nil && tc.ExtraContent.Google != nil {
			pt.ThoughtSignature = tc.ExtraContent.Google.ThoughtSignature
		}
		out = append(out, pt)
		if tc.ID != "" {
			callNames[tc.ID] = tc.Function.Name
		}
	}
	return out, nil
}

// toolParts maps a tool message to a functionResponse, named after the
// earlier tool call it answers: Gemini matches responses to calls by name,
// and OpenAI's tool message carries only the call's id. Content that is a
// JSON object is the response as is; any other content is
// {"output": content}, the key Gemini reads a function's output from.
func toolParts(p string, m chatMessage, callNames map[string]string) ([]part, error) {
	if m.ToolCallID == nil || *m.ToolCallID == "" {
		return nil, &FieldError{Param: p + ".tool_call_id", Message: "is required"}
	}
	name, ok := callNames[*m.ToolCallID]
	if !ok {
		return nil, &FieldError{Param: p + ".tool_call_id", Message: "answers no tool call of an earlier assistant message"}
	}
	s, ps, isString, err := contentParts(p, m.Content)
	if err != nil {
		return nil, err
	}
	if !isString {
		var b strings.Builder
		for j, cp := range ps {
			if cp.Type != "text" {
				return nil, &FieldError{Param: indexed(p+".content", j) + ".type", Message: `only "text" parts are supported in tool messages`}
			}
			b.WriteString(cp.Text)
		}
		s = b.String()
	}
	var resp json.RawMessage
	if raw := json.RawMessage(s); isObject(raw) && json.Valid(raw) {
		var buf bytes.Buffer
		_ = json.Compact(&buf, raw)
		resp = buf.Bytes()
	} else {
		resp, err = encode(map[string]string{"output": s})
		if err != nil {
			return nil, err
		}
	}
	return []part{{FunctionResponse: &functionResponse{Name: name, Response: resp}}}, nil
}
