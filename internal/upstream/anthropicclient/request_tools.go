package anthropicclient

import (
	"encoding/json"
	"strconv"
)

type chatTool struct {
	Type     string      `json:"type"`
	Function chatToolDef `json:"function"`
}

type chatToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type namedChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type responseFormat struct {
	Type       string           `json:"type"`
	JSONSchema jsonSchemaFormat `json:"json_schema"`
}

type jsonSchemaFormat struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// tools translates client tools into functions. Anthropic's server tools
// (web search, code execution, computer use, ...) run inside Anthropic's
// API; another provider cannot run them, so they are refused.
func tools(v json.RawMessage) ([]chatTool, error) {
	var defs []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if err := scalar(v, "tools", &defs); err != nil {
		return nil, err
	}
	out := make([]chatTool, 0, len(defs))
	for i, d := range defs {
		param := "tools." + strconv.Itoa(i)
		if d.Type != "" && d.Type != "custom" {
			return nil, reqErr(param+".type", "tool type %q runs only on Anthropic's servers", d.Type)
		}
		if d.Name == "" {
			return nil, reqErr(param+".name", "field required")
		}
		def := chatToolDef{Name: d.Name, Description: d.Description}
		if !isNull(d.InputSchema) {
			if d.InputSchema[0] != '{' {
				return nil, reqErr(param+".input_schema", "must be an object")
			}
			def.Parameters = d.InputSchema
		}
		out = append(out, chatTool{Type: "function", Function: def})
	}
	return out, nil
}

// toolChoice maps tool_choice. OpenAI refuses tool_choice and
// parallel_tool_calls in a request without tools, so both are dropped when
// the request has none.
func toolChoice(v json.RawMessage, out *chatRequest) error {
	var tc struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
	}
	if err := scalar(v, "tool_choice", &tc); err != nil || isNull(v) {
		return err
	}
	switch tc.Type {
	case "auto":
		out.ToolChoice = "auto"
	case "any":
		out.ToolChoice = "required"
	case "none":
		out.ToolChoice = "none"
	case "tool":
		if tc.Name == "" {
			return reqErr("tool_choice.name", "field required")
		}
		named := namedChoice{Type: "function"}
		named.Function.Name = tc.Name
		out.ToolChoice = named
	default:
		return reqErr("tool_choice.type", "must be one of auto, any, tool, none")
	}
	if len(out.Tools) == 0 {
		out.ToolChoice = nil
		return nil
	}
	if tc.DisableParallelToolUse && tc.Type != "none" {
		f := false
		out.ParallelToolCalls = &f
	}
	return nil
}

// outputFormat maps structured outputs (output_config.format, or the beta's
// top-level output_format) to response_format json_schema. strict is not
// set: OpenAI's strict mode demands schema features (additionalProperties
// false, every property required) an Anthropic schema need not have, and a
// refused request helps no one. output_config.effort is dropped: few
// chat completions servers take reasoning_effort, and it is a hint.
func outputFormat(config, beta json.RawMessage) (*responseFormat, error) {
	var cfg struct {
		Format json.RawMessage `json:"format"`
	}
	if err := scalar(config, "output_config", &cfg); err != nil {
		return nil, err
	}
	v, param := cfg.Format, "output_config.format"
	if isNull(v) {
		v, param = beta, "output_format"
	}
	var f struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	if err := scalar(v, param, &f); err != nil || isNull(v) {
		return nil, err
	}
	if f.Type != "json_schema" {
		return nil, reqErr(param+".type", "must be json_schema")
	}
	if isNull(f.Schema) || f.Schema[0] != '{' {
		return nil, reqErr(param+".schema", "must be an object")
	}
	return &responseFormat{Type: "json_schema", JSONSchema: jsonSchemaFormat{Name: "output", Schema: f.Schema}}, nil
}
