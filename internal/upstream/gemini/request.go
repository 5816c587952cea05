package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Options are the provider's side of a translation.
type Options struct {
	// Model is the upstream model name ("gemini-2.5-flash"). Gemini names
	// it in the URL (Path), not in the body.
	Model string
	// MaxTokens is sent as maxOutputTokens when the client sets neither
	// max_tokens nor max_completion_tokens; 0 leaves it to the model.
	MaxTokens int64
}

// Request is a translated request.
type Request struct {
	Body []byte // GenerateContentRequest JSON
	// Path is where to POST Body, relative to the API base URL
	// (https://generativelanguage.googleapis.com/v1beta): Path(model,
	// stream).
	Path string
	// Stream is the client's "stream"; IncludeUsage its
	// stream_options.include_usage, which asks for a last chunk with usage.
	Stream       bool
	IncludeUsage bool
}

// Path is the method path for model: "models/{model}:generateContent", or
// "models/{model}:streamGenerateContent?alt=sse" for a stream (without
// alt=sse Gemini streams one JSON array, not server-sent events). A model
// configured by its resource name, "models/gemini-2.5-flash", is the same
// model.
func Path(model string, stream bool) string {
	p := modelResource(model)
	if stream {
		return p + ":streamGenerateContent?alt=sse"
	}
	return p + ":generateContent"
}

// The GenerateContentRequest, as far as this translation writes it
// (https://ai.google.dev/api/generate-content#request-body).
// modelResource is the model's resource name, "models/{id}", the id
// escaped for a URL path.
func modelResource(model string) string {
	return "models/" + url.PathEscape(strings.TrimPrefix(model, "models/"))
}

type generateRequest struct {
	Contents          []content         `json:"contents"`
	SystemInstruction *content          `json:"systemInstruction,omitempty"`
	Tools             []tool            `json:"tools,omitempty"`
	ToolConfig        *toolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
}

type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts"`
}

type part struct {
	Text             *string           `json:"text,omitempty"`
	InlineData       *blob             `json:"inlineData,omitempty"`
	FileData         *fileData         `json:"fileData,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
}

type blob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"` // base64, as the data URL carried it
}

type fileData struct {
	MimeType string `json:"mimeType"`
	FileURI  string `json:"fileUri"`
}

type functionCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type functionResponse struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type tool struct {
	FunctionDeclarations []functionDeclaration `json:"functionDeclarations"`
}

type functionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type toolConfig struct {
	FunctionCallingConfig functionCallingConfig `json:"functionCallingConfig"`
}

type functionCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type generationConfig struct {
	StopSequences      []string        `json:"stopSequences,omitempty"`
	ResponseMimeType   string          `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
	CandidateCount     int64           `json:"candidateCount,omitempty"`
	MaxOutputTokens    int64           `json:"maxOutputTokens,omitempty"`
	Temperature        json.RawMessage `json:"temperature,omitempty"`
	TopP               json.RawMessage `json:"topP,omitempty"`
	TopK               json.RawMessage `json:"topK,omitempty"`
	Seed               json.RawMessage `json:"seed,omitempty"`
	PresencePenalty    json.RawMessage `json:"presencePenalty,omitempty"`
	FrequencyPenalty   json.RawMessage `json:"frequencyPenalty,omitempty"`
}

func (g *generationConfig) empty() bool {
	return g.StopSequences == nil && g.ResponseMimeType == "" && g.CandidateCount == 0 && g.MaxOutputTokens == 0 &&
		g.Temperature == nil && g.TopP == nil && g.TopK == nil && g.Seed == nil && g.PresencePenalty == nil &&
		g.FrequencyPenalty == nil
}

// droppedFields have no Gemini equivalent and are ignored, as LiteLLM does:
// end-user ids (Gemini takes none), OpenAI platform features (stored
// completions, service tiers, cache keys, predicted outputs) that do not
// change what a conforming answer looks like. doc.go gives the reasons.
var droppedFields = map[string]bool{
	"user": true, "safety_identifier": true, "store": true, "metadata": true, "service_tier": true,
	"prompt_cache_key": true, "prediction": true,
}

// ChatToGemini translates an OpenAI chat completions body into a Gemini
// GenerateContentRequest for opts.Model. A field the translation cannot
// honour is refused with a *FieldError naming it, never dropped in silence;
// doc.go lists every field and what becomes of it.
func ChatToGemini(body []byte, opts Options) (Request, error) {
	if opts.Model == "" {
		return Request{}, errors.New("gemini: no upstream model given")
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

	var out generateRequest
	gc := &generationConfig{}
	var res Request
	var maxTokens, maxCompletion int64
	var chatTools, choice json.RawMessage
	for _, k := range keys {
		v := top[k]
		var err error
		switch k {
		case "model": // the route chose the upstream model
		case "messages":
			out.SystemInstruction, out.Contents, err = convertMessages(v)
		case "max_tokens":
			maxTokens, err = positiveInt(k, v)
		case "max_completion_tokens":
			maxCompletion, err = positiveInt(k, v)
		case "stop":
			gc.StopSequences, err = stopSequences(v)
		case "temperature":
			gc.Temperature, err = numberIn(k, v, 0, 2)
		case "top_p":
			gc.TopP, err = numberIn(k, v, 0, 1)
		case "top_k":
			_, err = positiveInt(k, v)
			gc.TopK = v
		case "presence_penalty":
			gc.PresencePenalty, err = numberIn(k, v, -2, 2)
		case "frequency_penalty":
			gc.FrequencyPenalty, err = numberIn(k, v, -2, 2)
		case "seed":
			// Gemini's seed is an int32; a wider one would be refused there.
			var n int64
			if json.Unmarshal(v, &n) != nil || n < -1<<31 || n > 1<<31-1 {
				err = &FieldError{Param: k, Message: "must be an integer within 32 bits for this provider"}
			}
			gc.Seed = v
		case "n":
			var n int64
			if json.Unmarshal(v, &n) != nil || n != 1 {
				err = &FieldError{Param: k, Message: "only n=1 is supported by this provider"}
			}
		case "response_format":
			gc.ResponseMimeType, gc.ResponseJSONSchema, err = responseFormat(v)
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
				err = &FieldError{Param: k, Message: "only true is supported by this provider: Gemini may always call several functions at once"}
			}
		default:
			err = checkUnsupported(k, v)
		}
		if err != nil {
			return Request{}, err
		}
	}
	if len(out.Contents) == 0 {
		return Request{}, &FieldError{Param: "messages", Message: "must hold at least one user, assistant or tool message"}
	}
	switch {
	case maxTokens > 0:
		gc.MaxOutputTokens = maxTokens
	case maxCompletion > 0:
		gc.MaxOutputTokens = maxCompletion
	case opts.MaxTokens > 0:
		gc.MaxOutputTokens = opts.MaxTokens
	}
	if !gc.empty() {
		out.GenerationConfig = gc
	}
	var err error
	var names []string
	if out.Tools, names, err = convertTools(chatTools); err != nil {
		return Request{}, err
	}
	if out.ToolConfig, err = convertToolChoice(choice, names); err != nil {
		return Request{}, err
	}
	if !res.Stream {
		res.IncludeUsage = false
	}
	res.Path = Path(opts.Model, res.Stream)
	if res.Body, err = encode(out); err != nil {
		return Request{}, fmt.Errorf("gemini: encode request: %w", err)
	}
	return res, nil
}

// checkUnsupported decides a field the translation does not carry: dropped,
// accepted because its value asks for nothing (logprobs false), or refused.
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
		return refuse("reasoning_effort is not translated for this provider")
	case "web_search_options":
		return refuse("web search is not supported by this provider")
	default:
		return refuse("unrecognized request argument supplied: " + k)
	}
	return nil
}

// responseFormat maps response_format: text asks for nothing, json_object
// for JSON output, json_schema for JSON output held to the schema.
// responseJsonSchema takes JSON Schema as OpenAI clients write it; the older
// responseSchema takes an OpenAPI subset that refuses keywords strict
// clients send (additionalProperties, $ref), so it is not used.
func responseFormat(v json.RawMessage) (string, json.RawMessage, error) {
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if json.Unmarshal(v, &rf) != nil {
		return "", nil, &FieldError{Param: "response_format", Message: "must be an object"}
	}
	switch rf.Type {
	case "text":
		return "", nil, nil
	case "json_object":
		return "application/json", nil, nil
	case "json_schema":
		if rf.JSONSchema == nil || !isObject(rf.JSONSchema.Schema) {
			return "", nil, &FieldError{Param: "response_format.json_schema.schema", Message: "must be a JSON Schema object"}
		}
		return "application/json", rf.JSONSchema.Schema, nil
	}
	return "", nil, &FieldError{Param: "response_format.type", Message: `must be "text", "json_object" or "json_schema"`}
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
	if json.Unmarshal(v, &n) != nil || n < 1 || n > 1<<31-1 {
		return 0, &FieldError{Param: param, Message: "must be a positive integer within 32 bits"}
	}
	return n, nil
}

// numberIn accepts a number in [lo, hi] and returns it as the client wrote
// it, so no float formatting changes the value.
func numberIn(param string, v json.RawMessage, lo, hi float64) (json.RawMessage, error) {
	var f float64
	if json.Unmarshal(v, &f) != nil || f < lo || f > hi {
		return nil, &FieldError{Param: param, Message: "must be a number between " +
			strconv.FormatFloat(lo, 'g', -1, 64) + " and " + strconv.FormatFloat(hi, 'g', -1, 64)}
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
	if len(many) > 5 {
		return nil, &FieldError{Param: "stop", Message: "at most 5 stop sequences are supported by this provider"}
	}
	return many, nil
}

func indexed(param string, i int) string { return param + "[" + strconv.Itoa(i) + "]" }

func isObject(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '{'
}

func isEmptyObject(v json.RawMessage) bool {
	var m map[string]json.RawMessage
	return isObject(v) && json.Unmarshal(v, &m) == nil && len(m) == 0
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
