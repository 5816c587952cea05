package mockupstream

import (
	"encoding/json"
	"sort"
	"strings"
)

// Tool calls on the OpenAI endpoints (chat completions and Responses), so that an
// agent SDK pointed at the mock runs a tool. The decision is deterministic and
// read from the request alone:
//
//   - tool_choice "none", or no tools declared: never a call;
//   - the last input is a tool's result (a chat "tool" message, a Responses
//     "function_call_output" item): the answer is text, so an agent loop ends;
//   - tool_choice names a function: a call to it;
//   - tool_choice "required": a call to the first declared tool;
//   - otherwise ("auto" or absent) a call when the last user message asks for a
//     declared tool by name, "use the <name> tool" or "call <name>" (ASCII case
//     ignored), to the first such tool in declaration order.
//
// The arguments are a JSON object with one member per property the tool's
// parameters schema lists in "required", in that order, each a placeholder of the
// property's type: its first enum value, else "mock" (string), 1 (integer, number),
// true (boolean), [] (array), {} (object), null (anything else). A schema with no
// required properties gives {}.

// toolCall is the call an answer makes; name "" means a text answer.
type toolCall struct {
	name string
	args []byte // a compact JSON object
}

// chatTools is what a chat request says about tools, read only when it declares any.
type chatTools struct {
	Tools []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	Messages   []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// chatToolCall decides the tool call of a chat request whose body has "tools".
func chatToolCall(body []byte) toolCall {
	var req chatTools
	if json.Unmarshal(body, &req) != nil || len(req.Tools) == 0 || len(req.Messages) == 0 {
		return toolCall{}
	}
	tools := make([]declaredTool, len(req.Tools))
	for i, t := range req.Tools {
		tools[i] = declaredTool{t.Function.Name, t.Function.Parameters}
	}
	last := req.Messages[len(req.Messages)-1]
	lastUser := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			lastUser = contentText(req.Messages[i].Content)
			break
		}
	}
	return decideToolCall(tools, req.ToolChoice, last.Role == "tool", lastUser, chatChoiceName)
}

// responsesTools is what a Responses request says about tools.
type responsesTools struct {
	Tools []struct {
		Type       string          `json:"type"`
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	Input      json.RawMessage `json:"input"`
}

// responsesToolCall decides the tool call of a Responses request whose body has
// "tools". Only function tools count.
func responsesToolCall(body []byte) toolCall {
	var req responsesTools
	if json.Unmarshal(body, &req) != nil {
		return toolCall{}
	}
	var tools []declaredTool
	for _, t := range req.Tools {
		if t.Type == "function" && t.Name != "" {
			tools = append(tools, declaredTool{t.Name, t.Parameters})
		}
	}
	if len(tools) == 0 {
		return toolCall{}
	}
	var text string
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	toolResult := false
	if json.Unmarshal(req.Input, &text) != nil {
		if json.Unmarshal(req.Input, &items) != nil || len(items) == 0 {
			return toolCall{}
		}
		toolResult = items[len(items)-1].Type == "function_call_output"
		for i := len(items) - 1; i >= 0; i-- {
			if items[i].Role == "user" {
				text = contentText(items[i].Content)
				break
			}
		}
	}
	return decideToolCall(tools, req.ToolChoice, toolResult, text, responsesChoiceName)
}

type declaredTool struct {
	name   string
	params json.RawMessage
}

// decideToolCall applies the rules of the file comment. choiceName reads the
// function a tool_choice object names, in its endpoint's shape.
func decideToolCall(tools []declaredTool, choice json.RawMessage, toolResult bool, lastUser string, choiceName func(json.RawMessage) string) toolCall {
	var mode string
	_ = json.Unmarshal(choice, &mode)
	if mode == "none" || toolResult {
		return toolCall{}
	}
	pick := -1
	switch name := choiceName(choice); {
	case name != "":
		for i, t := range tools {
			if t.name == name {
				pick = i
				break
			}
		}
	case mode == "required":
		pick = 0
	default:
		lower := strings.ToLower(lastUser)
		for i, t := range tools {
			n := strings.ToLower(t.name)
			if n != "" && (strings.Contains(lower, "use the "+n+" tool") || strings.Contains(lower, "call "+n)) {
				pick = i
				break
			}
		}
	}
	if pick < 0 || tools[pick].name == "" {
		return toolCall{}
	}
	return toolCall{name: tools[pick].name, args: placeholderArgs(tools[pick].params)}
}

// chatChoiceName reads {"type":"function","function":{"name":N}}.
func chatChoiceName(choice json.RawMessage) string {
	var c struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	_ = json.Unmarshal(choice, &c)
	return c.Function.Name
}

// responsesChoiceName reads {"type":"function","name":N}.
func responsesChoiceName(choice json.RawMessage) string {
	var c struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(choice, &c)
	return c.Name
}

// contentText is a message's text: a string, or the text of its parts.
func contentText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
		b.WriteByte(' ')
	}
	return b.String()
}

// placeholderArgs builds the arguments object from a parameters schema.
func placeholderArgs(params json.RawMessage) []byte {
	var schema struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Type any   `json:"type"` // a string, or a list of them
			Enum []any `json:"enum"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(params, &schema)
	out := []byte{'{'}
	for i, name := range schema.Required {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(appendJSONString(out, name), ':')
		p := schema.Properties[name]
		if len(p.Enum) > 0 {
			v, _ := json.Marshal(p.Enum[0])
			out = append(out, v...)
			continue
		}
		typ, _ := p.Type.(string)
		if list, ok := p.Type.([]any); ok {
			types := make([]string, 0, len(list))
			for _, t := range list {
				if s, ok := t.(string); ok && s != "null" {
					types = append(types, s)
				}
			}
			sort.Strings(types) // deterministic whatever the order sent
			if len(types) > 0 {
				typ = types[0]
			}
		}
		switch typ {
		case "string":
			out = append(out, `"mock"`...)
		case "integer", "number":
			out = append(out, '1')
		case "boolean":
			out = append(out, "true"...)
		case "array":
			out = append(out, "[]"...)
		case "object":
			out = append(out, "{}"...)
		default:
			out = append(out, "null"...)
		}
	}
	return append(out, '}')
}

// The tool results of the other vendors' bodies, read to end an agent loop the
// way a chat "tool" message does (Behavior.ToolUse).

// anyBlock reports whether content (a message's content: a string or an array
// of blocks) has a block that is accepts.
func anyBlock(content json.RawMessage, is func(json.RawMessage) bool) bool {
	var blocks []json.RawMessage
	if json.Unmarshal(content, &blocks) != nil {
		return false // a string: text only
	}
	return anyRawBlock(blocks, is)
}

func anyRawBlock(blocks []json.RawMessage, is func(json.RawMessage) bool) bool {
	for _, b := range blocks {
		if is(b) {
			return true
		}
	}
	return false
}

// isAnthropicToolResult: {"type":"tool_result",...}.
func isAnthropicToolResult(block json.RawMessage) bool {
	var b struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(block, &b) == nil && b.Type == "tool_result"
}

// isConverseToolResult: {"toolResult":{...}}.
func isConverseToolResult(block json.RawMessage) bool {
	return hasMember(block, "toolResult")
}

// isGeminiFunctionResponse: {"functionResponse":{...}}.
func isGeminiFunctionResponse(part json.RawMessage) bool {
	return hasMember(part, "functionResponse")
}

func hasMember(object json.RawMessage, name string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(object, &m) != nil {
		return false
	}
	_, ok := m[name]
	return ok
}
