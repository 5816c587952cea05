package bedrock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/aws/smithy-go/encoding/httpbinding"
)

// Options are the provider's side of a translation.
type Options struct {
	// Model is the Bedrock model id, inference profile id or ARN. Bedrock
	// names it in the URL (Path), not in the body.
	Model string
	// MaxTokens is sent as inferenceConfig.maxTokens when the client sets
	// neither max_tokens nor max_completion_tokens; 0 leaves it to the
	// model.
	MaxTokens int64
}

// Request is a translated request.
type Request struct {
	Body []byte // the Converse request JSON
	// Path is where to POST Body, relative to the runtime endpoint
	// (https://bedrock-runtime.{region}.amazonaws.com): Path(model, stream).
	Path         string
	Stream       bool
	IncludeUsage bool
}

// Path is the operation's path for model: "/model/{modelId}/converse" or
// "/model/{modelId}/converse-stream". The id is escaped as the AWS SDK
// escapes it (every byte but the unreserved ones, so an ARN's ':' and '/'
// too); the signer then escapes the path once more, as SigV4 wants for
// services other than S3.
func Path(model string, stream bool) string {
	p := "/model/" + httpbinding.EscapePath(model, true)
	if stream {
		return p + "/converse-stream"
	}
	return p + "/converse"
}

// The Converse request, as far as this translation writes it
// (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html).
type converseRequest struct {
	Messages        []message        `json:"messages"`
	System          []systemBlock    `json:"system,omitempty"`
	InferenceConfig *inferenceConfig `json:"inferenceConfig,omitempty"`
	ToolConfig      *toolConfig      `json:"toolConfig,omitempty"`
}

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

type systemBlock struct {
	Text string `json:"text"`
}

type block struct {
	Text       *string     `json:"text,omitempty"`
	Image      *imageBlock `json:"image,omitempty"`
	ToolUse    *toolUse    `json:"toolUse,omitempty"`
	ToolResult *toolResult `json:"toolResult,omitempty"`
}

type imageBlock struct {
	Format string `json:"format"`
	Source struct {
		Bytes string `json:"bytes"` // base64, as the data URL carried it
	} `json:"source"`
}

type toolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type toolResult struct {
	ToolUseID string        `json:"toolUseId"`
	Content   []resultBlock `json:"content"`
}

type resultBlock struct {
	Text *string         `json:"text,omitempty"`
	JSON json.RawMessage `json:"json,omitempty"`
}

type inferenceConfig struct {
	MaxTokens     int64           `json:"maxTokens,omitempty"`
	Temperature   json.RawMessage `json:"temperature,omitempty"`
	TopP          json.RawMessage `json:"topP,omitempty"`
	StopSequences []string        `json:"stopSequences,omitempty"`
}

func (c *inferenceConfig) empty() bool {
	return c.MaxTokens == 0 && c.Temperature == nil && c.TopP == nil && c.StopSequences == nil
}

type toolConfig struct {
	Tools      []toolEntry     `json:"tools"`
	ToolChoice json.RawMessage `json:"toolChoice,omitempty"`
}

type toolEntry struct {
	ToolSpec toolSpec `json:"toolSpec"`
}

type toolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	InputSchema struct {
		JSON json.RawMessage `json:"json"`
	} `json:"inputSchema"`
}

// droppedFields have no Converse equivalent and change nothing of what a
// conforming answer looks like: end-user ids, OpenAI platform features.
var droppedFields = map[string]bool{
	"user": true, "safety_identifier": true, "store": true, "metadata": true, "service_tier": true,
	"prompt_cache_key": true, "prediction": true,
}

// ChatToConverse translates an OpenAI chat completions body into a Converse
// request for opts.Model. A field the translation cannot honour is
// refused with a *FieldError naming it, never dropped in silence.
func ChatToConverse(body []byte, opts Options) (Request, error) {
	if opts.Model == "" {
		return Request{}, errors.New("bedrock: no upstream model given")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return Request{}, &FieldError{Message: "request body must be a JSON object"}
	}
	keys := make([]string, 0, len(top))
	for k, v := range top {
		if !isNull(v) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys) // the first refused field is the same on every run

	var out converseRequest
	ic := &inferenceConfig{}
	var res Request
	var maxTokens, maxCompletion int64
	var chatTools, choice json.RawMessage
	for _, k := range keys {
		v := top[k]
		var err error
		switch k {
		case "model":
		case "messages":
			out.System, out.Messages, err = convertMessages(v)
		case "max_tokens":
			maxTokens, err = positiveInt(k, v)
		case "max_completion_tokens":
			maxCompletion, err = positiveInt(k, v)
		case "stop":
			ic.StopSequences, err = stopSequences(v)
		case "temperature":
			ic.Temperature, err = numberIn(k, v, 0, 1)
		case "top_p":
			ic.TopP, err = numberIn(k, v, 0, 1)
		case "n":
			var n int64
			if json.Unmarshal(v, &n) != nil || n != 1 {
				err = &FieldError{Param: k, Message: "only n=1 is supported by this provider"}
			}
		case "stream":
			err = decodeField(k, v, &res.Stream, "must be a boolean")
		case "stream_options":
			var so struct {
				IncludeUsage bool `json:"include_usage"`
			}
			err = decodeField(k, v, &so, "must be an object")
			res.IncludeUsage = so.IncludeUsage
		case "tools":
			chatTools = v
		case "tool_choice":
			choice = v
		case "parallel_tool_calls":
			var b bool
			if json.Unmarshal(v, &b) != nil || !b {
				err = &FieldError{Param: k, Message: "only true is supported by this provider: the model may always call several tools at once"}
			}
		case "response_format":
			var rf struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(v, &rf) != nil || rf.Type != "text" {
				err = &FieldError{Param: k, Message: `only {"type":"text"} is supported by this provider`}
			}
		default:
			err = checkUnsupported(k, v)
		}
		if err != nil {
			return Request{}, err
		}
	}
	if len(out.Messages) == 0 {
		return Request{}, &FieldError{Param: "messages", Message: "must hold at least one user, assistant or tool message"}
	}
	switch {
	case maxTokens > 0:
		ic.MaxTokens = maxTokens
	case maxCompletion > 0:
		ic.MaxTokens = maxCompletion
	case opts.MaxTokens > 0:
		ic.MaxTokens = opts.MaxTokens
	}
	if !ic.empty() {
		out.InferenceConfig = ic
	}
	var err error
	if out.ToolConfig, err = convertTools(chatTools, choice); err != nil {
		return Request{}, err
	}
	if out.ToolConfig == nil && usesTools(out.Messages) {
		// Converse refuses toolUse and toolResult blocks without a
		// toolConfig; a conversation that only replays earlier calls has
		// none, so the tools are declared from the calls themselves.
		out.ToolConfig = declaredByCalls(out.Messages)
	}
	if !res.Stream {
		res.IncludeUsage = false
	}
	res.Path = Path(opts.Model, res.Stream)
	if res.Body, err = encode(out); err != nil {
		return Request{}, fmt.Errorf("bedrock: encode request: %w", err)
	}
	return res, nil
}

// checkUnsupported decides a field the translation does not carry: dropped,
// accepted because its value asks for nothing, or refused.
func checkUnsupported(k string, v json.RawMessage) error {
	if droppedFields[k] {
		return nil
	}
	refuse := func(msg string) error { return &FieldError{Param: k, Message: msg} }
	switch k {
	case "logprobs":
		var b bool
		if json.Unmarshal(v, &b) != nil || b {
			return refuse("log probabilities are not translated for this provider")
		}
	case "top_logprobs":
		var n int64
		if json.Unmarshal(v, &n) != nil || n != 0 {
			return refuse("log probabilities are not translated for this provider")
		}
	case "modalities":
		var m []string
		if json.Unmarshal(v, &m) != nil || slices.ContainsFunc(m, func(s string) bool { return s != "text" }) {
			return refuse("only the \"text\" modality is supported by this provider")
		}
	case "functions", "function_call":
		return refuse("the legacy functions API is not supported by this provider; use tools and tool_choice")
	case "audio":
		return refuse("audio output is not supported by this provider")
	case "seed", "presence_penalty", "frequency_penalty", "logit_bias", "top_k", "reasoning_effort", "web_search_options":
		return refuse(k + " is not translated for this provider")
	default:
		return refuse("unrecognized request argument supplied: " + k)
	}
	return nil
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

func decodeField(param string, v json.RawMessage, dst any, msg string) error {
	if err := json.Unmarshal(v, dst); err != nil {
		return &FieldError{Param: param, Message: msg}
	}
	return nil
}

func positiveInt(param string, v json.RawMessage) (int64, error) {
	var n int64
	if json.Unmarshal(v, &n) != nil || n < 1 || n > 1<<31-1 {
		return 0, &FieldError{Param: param, Message: "must be a positive integer within 32 bits"}
	}
	return n, nil
}

// numberIn accepts a number in [lo, hi] and returns it as the client wrote
// it, so no float formatting changes the value. Converse's temperature and
// topP are both within [0, 1].
func numberIn(param string, v json.RawMessage, lo, hi float64) (json.RawMessage, error) {
	var f float64
	if json.Unmarshal(v, &f) != nil || f < lo || f > hi {
		return nil, &FieldError{Param: param, Message: "must be a number between " +
			strconv.FormatFloat(lo, 'g', -1, 64) + " and " + strconv.FormatFloat(hi, 'g', -1, 64) + " for this provider"}
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

func indexed(param string, i int) string { return param + "[" + strconv.Itoa(i) + "]" }

func isObject(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '{'
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
