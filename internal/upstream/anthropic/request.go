package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// DefaultMaxTokens is the max_tokens sent when neither the client nor the
// provider's configuration sets one: the Messages API requires the field.
const DefaultMaxTokens = 4096

// Options are the provider's side of a translation.
type Options struct {
	Model string // upstream model name, sent as "model"
	// MaxTokens is used when the client sets neither max_tokens nor
	// max_completion_tokens; 0 means DefaultMaxTokens.
	MaxTokens int64
}

// Request is a translated request.
type Request struct {
	Body []byte // Messages API JSON, for POST {base_url}/messages
	// Stream is the client's "stream"; IncludeUsage its
	// stream_options.include_usage, which asks for a last chunk with usage.
	Stream       bool
	IncludeUsage bool
}

// The Messages API request, as far as this translation writes it.
type messagesRequest struct {
	Model         string          `json:"model"`
	System        any             `json:"system,omitempty"` // string or []block
	Messages      []message       `json:"messages"`
	MaxTokens     int64           `json:"max_tokens"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Temperature   json.RawMessage `json:"temperature,omitempty"`
	TopP          json.RawMessage `json:"top_p,omitempty"`
	TopK          json.RawMessage `json:"top_k,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	Metadata      *metadata       `json:"metadata,omitempty"`
	Tools         []tool          `json:"tools,omitempty"`
	ToolChoice    *toolChoice     `json:"tool_choice,omitempty"`
}

type metadata struct {
	UserID string `json:"user_id"`
}

type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type toolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

// droppedFields have no Messages API equivalent and are ignored, as LiteLLM
// does: sampling hints (penalties, seed) and OpenAI platform features
// (stored completions, service tiers, cache keys, predicted outputs) that do
// not change what a conforming answer looks like. doc.go gives the reasons.
var droppedFields = map[string]bool{
	"frequency_penalty": true, "presence_penalty": true, "seed": true,
	"store": true, "metadata": true, "service_tier": true,
	"prompt_cache_key": true, "prediction": true,
}

// ChatToMessages translates an OpenAI chat completions body into a Messages
// API body for opts.Model. A field the translation cannot honour is refused
// with a *FieldError naming it, never dropped in silence; doc.go lists every
// field and what becomes of it.
func ChatToMessages(body []byte, opts Options) (Request, error) {
	if opts.Model == "" {
		return Request{}, errors.New("anthropic: no upstream model given")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return Request{}, &FieldError{Message: "request body must be a JSON object"}
	}
	keys := make([]string, 0, len(top))
	for k, v := range top {
		if !isNull(v) { // null is absent, for every field
			keys = append(keys, k)
		}
	}
	slices.Sort(keys) // the first refused field is the same on every run

	out := messagesRequest{Model: opts.Model}
	var res Request
	var maxTokens, maxCompletion int64
	var userID, safetyID string
	var chatTools, choice json.RawMessage
	parallel := true
	for _, k := range keys {
		v := top[k]
		var err error
		switch k {
		case "model": // the route chose the upstream model
		case "messages":
			out.System, out.Messages, err = convertMessages(v)
		case "max_tokens":
			maxTokens, err = positiveInt(k, v)
		case "max_completion_tokens":
			maxCompletion, err = positiveInt(k, v)
		case "stop":
			out.StopSequences, err = stopSequences(v)
		case "temperature":
			out.Temperature, err = unitNumber(k, v, "between 0 and 1 for this provider")
		case "top_p":
			out.TopP, err = unitNumber(k, v, "between 0 and 1")
		case "top_k":
			_, err = positiveInt(k, v)
			out.TopK = v
		case "stream":
			err = decodeField(k, v, &res.Stream, "must be a boolean")
		case "stream_options":
			var so struct {
				IncludeUsage bool `json:"include_usage"`
			}
			err = decodeField(k, v, &so, "must be an object")
			res.IncludeUsage = so.IncludeUsage
		case "user":
			err = decodeField(k, v, &userID, "must be a string")
		case "safety_identifier":
			err = decodeField(k, v, &safetyID, "must be a string")
		case "tools":
			chatTools = v
		case "tool_choice":
			choice = v
		case "parallel_tool_calls":
			err = decodeField(k, v, &parallel, "must be a boolean")
		default:
			err = checkUnsupported(k, v)
		}
		if err != nil {
			return Request{}, err
		}
	}
	if out.Messages == nil { // convertMessages never returns an empty list
		return Request{}, &FieldError{Param: "messages", Message: "you must provide a messages parameter"}
	}
	switch {
	case maxTokens > 0:
		out.MaxTokens = maxTokens
	case maxCompletion > 0:
		out.MaxTokens = maxCompletion
	case opts.MaxTokens > 0:
		out.MaxTokens = opts.MaxTokens
	default:
		out.MaxTokens = DefaultMaxTokens
	}
	if userID == "" {
		userID = safetyID // the field OpenAI now prefers to "user"
	}
	if userID != "" {
		out.Metadata = &metadata{UserID: userID}
	}
	var err error
	if out.Tools, err = convertTools(chatTools); err != nil {
		return Request{}, err
	}
	if out.ToolChoice, err = convertToolChoice(choice, len(out.Tools) > 0, parallel); err != nil {
		return Request{}, err
	}
	out.Stream = res.Stream
	if !res.Stream {
		res.IncludeUsage = false
	}
	if res.Body, err = encode(out); err != nil {
		return Request{}, fmt.Errorf("anthropic: encode request: %w", err)
	}
	return res, nil
}

// checkUnsupported decides a field the translation does not carry: dropped,
// accepted because its value asks for nothing (n 1, logprobs false), or
// refused.
func checkUnsupported(k string, v json.RawMessage) error {
	if droppedFields[k] {
		return nil
	}
	refuse := func(msg string) error { return &FieldError{Param: k, Message: msg} }
	switch k {
	case "n":
		var n int64
		if json.Unmarshal(v, &n) != nil || n != 1 {
			return refuse("only n=1 is supported by this provider: the Messages API returns one choice")
		}
	case "logprobs":
		var b bool
		if json.Unmarshal(v, &b) != nil || b {
			return refuse("log probabilities are not available from this provider")
		}
	case "top_logprobs":
		var n int64
		if json.Unmarshal(v, &n) != nil || n != 0 {
			return refuse("log probabilities are not available from this provider")
		}
	case "response_format":
		var rf struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(v, &rf) != nil || rf.Type != "text" {
			return refuse("only response_format type \"text\" is supported by this provider: JSON mode and json_schema cannot be enforced")
		}
	case "modalities":
		var m []string
		if json.Unmarshal(v, &m) != nil || slices.ContainsFunc(m, func(s string) bool { return s != "text" }) {
			return refuse("only the \"text\" modality is supported by this provider")
		}
	case "logit_bias":
		var m map[string]json.RawMessage
		if json.Unmarshal(v, &m) != nil || len(m) > 0 {
			return refuse("logit_bias is not supported by this provider")
		}
	case "verbosity":
		var s string
		if json.Unmarshal(v, &s) != nil || s != "medium" {
			return refuse("only verbosity \"medium\" (the default) is supported by this provider")
		}
	case "functions", "function_call":
		return refuse("the legacy functions API is not supported by this provider; use tools and tool_choice")
	case "audio":
		return refuse("audio output is not supported by this provider")
	case "reasoning_effort":
		return refuse("reasoning_effort is not supported by this provider")
	case "web_search_options":
		return refuse("web search is not supported by this provider")
	default:
		return refuse("unrecognized request argument supplied: " + k)
	}
	return nil
}

func isNull(v json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

func decodeField(param string, v json.RawMessage, dst any, msg string) error {
	if err := json.Unmarshal(v, dst); err != nil {
		return &FieldError{Param: param, Message: msg}
	}
	return nil
}

func positiveInt(param string, v json.RawMessage) (int64, error) {
	var n int64
	if json.Unmarshal(v, &n) != nil || n < 1 {
		return 0, &FieldError{Param: param, Message: "must be a positive integer"}
	}
	return n, nil
}

// unitNumber accepts a number in [0, 1] and returns it as the client wrote
// it, so no float formatting changes the value. OpenAI allows temperature up
// to 2; the Messages API refuses above 1, and rescaling would silently change
// the sampling the client chose.
func unitNumber(param string, v json.RawMessage, rng string) (json.RawMessage, error) {
	var f float64
	if json.Unmarshal(v, &f) != nil || f < 0 || f > 1 {
		return nil, &FieldError{Param: param, Message: "must be a number " + rng}
	}
	return v, nil
}

func stopSequences(v json.RawMessage) ([]string, error) {
	var one string
	if json.Unmarshal(v, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if json.Unmarshal(v, &many) != nil {
		return nil, &FieldError{Param: "stop", Message: "must be a string or an array of strings"}
	}
	return many, nil
}

type chatTool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// emptySchema stands for a function without parameters: the Messages API
// requires input_schema.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

func convertTools(v json.RawMessage) ([]tool, error) {
	if v == nil {
		return nil, nil
	}
	var raw []json.RawMessage
	if json.Unmarshal(v, &raw) != nil {
		return nil, &FieldError{Param: "tools", Message: "must be an array"}
	}
	tools := make([]tool, 0, len(raw))
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
		schema := ct.Function.Parameters
		switch {
		case schema == nil || isNull(schema):
			schema = emptySchema
		case !isObject(schema):
			return nil, &FieldError{Param: p + ".function.parameters", Message: "must be a JSON Schema object"}
		case isEmptyObject(schema):
			schema = emptySchema
		}
		tools = append(tools, tool{Name: ct.Function.Name, Description: ct.Function.Description, InputSchema: schema})
	}
	return tools, nil
}

// convertToolChoice maps tool_choice and parallel_tool_calls. Without tools
// there is nothing to choose: "auto" and "none" then mean what sending no
// tool_choice means, and a demand for a tool is refused as OpenAI refuses it.
func convertToolChoice(v json.RawMessage, haveTools, parallel bool) (*toolChoice, error) {
	var tc *toolChoice
	if v != nil {
		var s string
		if json.Unmarshal(v, &s) == nil {
			switch s {
			case "auto":
				tc = &toolChoice{Type: "auto"}
			case "required":
				tc = &toolChoice{Type: "any"}
			case "none":
				tc = &toolChoice{Type: "none"}
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
			tc = &toolChoice{Type: "tool", Name: obj.Function.Name}
		}
	}
	if !haveTools {
		if tc != nil && tc.Type != "auto" && tc.Type != "none" {
			return nil, &FieldError{Param: "tool_choice", Message: "is only allowed when tools are specified"}
		}
		return nil, nil
	}
	if !parallel {
		if tc == nil {
			tc = &toolChoice{Type: "auto"}
		}
		// The Messages API's "none" takes no such flag: no tool runs at all.
		tc.DisableParallelToolUse = tc.Type != "none"
	}
	return tc, nil
}

func indexed(param string, i int) string { return param + "[" + strconv.Itoa(i) + "]" }

func isObject(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '{'
}

func isEmptyObject(v json.RawMessage) bool {
	m, ok := objectMembers(v)
	if !ok {
		return false
	}
	_, _, more := m.next()
	return !more
}

// encode writes v without escaping <, > and &, so prompts reach the provider
// as the client wrote them.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
