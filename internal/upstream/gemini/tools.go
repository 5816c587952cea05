package gemini

import (
	"encoding/json"
	"slices"
)

type chatTool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// convertTools maps function tools to one Tool of functionDeclarations and
// returns their names. A function without parameters (absent, null or {})
// is declared without a schema, as Gemini allows.
func convertTools(v json.RawMessage) ([]tool, []string, error) {
	if v == nil {
		return nil, nil, nil
	}
	var raw []json.RawMessage
	if json.Unmarshal(v, &raw) != nil {
		return nil, nil, &FieldError{Param: "tools", Message: "must be an array"}
	}
	if len(raw) == 0 {
		return nil, nil, nil
	}
	decls := make([]functionDeclaration, 0, len(raw))
	names := make([]string, 0, len(raw))
	for i, r := range raw {
		p := indexed("tools", i)
		var ct chatTool
		if json.Unmarshal(r, &ct) != nil {
			return nil, nil, &FieldError{Param: p, Message: "must be a function tool object"}
		}
		if ct.Type != "function" {
			return nil, nil, &FieldError{Param: p + ".type", Message: "only function tools are supported by this provider"}
		}
		if ct.Function == nil || ct.Function.Name == "" {
			return nil, nil, &FieldError{Param: p + ".function.name", Message: "is required"}
		}
		d := functionDeclaration{Name: ct.Function.Name, Description: ct.Function.Description}
		switch s := ct.Function.Parameters; {
		case s == nil || isNull(s) || isEmptyObject(s):
		case !isObject(s):
			return nil, nil, &FieldError{Param: p + ".function.parameters", Message: "must be a JSON Schema object"}
		default:
			d.ParametersJSONSchema = s
		}
		decls = append(decls, d)
		names = append(names, d.Name)
	}
	return []tool{{FunctionDeclarations: decls}}, names, nil
}

// convertToolChoice maps tool_choice to functionCallingConfig: "auto" →
// AUTO, "none" → NONE, "required" → ANY, a named function → ANY limited to
// that name. Without tools "auto" and "none" mean what sending no
// tool_choice means, and a demand for a tool is refused as OpenAI refuses
// it.
func convertToolChoice(v json.RawMessage, names []string) (*toolConfig, error) {
	if v == nil {
		return nil, nil
	}
	var cfg functionCallingConfig
	var s string
	if json.Unmarshal(v, &s) == nil {
		switch s {
		case "auto":
			cfg.Mode = "AUTO"
		case "none":
			cfg.Mode = "NONE"
		case "required":
			cfg.Mode = "ANY"
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
		if json.Unmarshal(v, &obj) != nil || obj.Type != "function" {
			return nil, &FieldError{Param: "tool_choice", Message: `only {"type":"function","function":{"name":...}} is supported by this provider`}
		}
		if obj.Function == nil || obj.Function.Name == "" {
			return nil, &FieldError{Param: "tool_choice.function.name", Message: "is required"}
		}
		if len(names) > 0 && !slices.Contains(names, obj.Function.Name) {
			return nil, &FieldError{Param: "tool_choice.function.name", Message: "names no function in tools"}
		}
		cfg = functionCallingConfig{Mode: "ANY", AllowedFunctionNames: []string{obj.Function.Name}}
	}
	if len(names) == 0 {
		if cfg.Mode == "ANY" {
			return nil, &FieldError{Param: "tool_choice", Message: "is only allowed when tools are specified"}
		}
		return nil, nil
	}
	return &toolConfig{FunctionCallingConfig: cfg}, nil
}
