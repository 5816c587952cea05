package gemini

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxEmbedBatch is the most inputs one batchEmbedContents call takes.
const MaxEmbedBatch = 100

// EmbedRequest is a translated embeddings request.
type EmbedRequest struct {
	Body []byte // BatchEmbedContentsRequest JSON
	Path string // "models/{model}:batchEmbedContents"
	// Inputs is how many embeddings the answer must hold, in order.
	Inputs int
	// Base64 is encoding_format "base64": the answer's vectors as base64
	// of little-endian float32s, as OpenAI sends them.
	Base64 bool
	// PromptTokens is the usage the answer reports, estimated: Gemini's
	// batchEmbedContents answers with embeddings only, no token count
	// (https://ai.google.dev/api/embeddings#response-body_1). Each input
	// counts ceil(characters / 4), Google's rule of thumb for Gemini
	// tokens (https://ai.google.dev/gemini-api/docs/tokens), at least 1.
	PromptTokens int64
}

type embedContentRequest struct {
	Model                string  `json:"model"`
	Content              content `json:"content"`
	OutputDimensionality int64   `json:"outputDimensionality,omitempty"`
}

// EmbeddingsToGemini translates an OpenAI /v1/embeddings body into a
// batchEmbedContents body for opts.Model, one request per input. input is a
// string or an array of strings; token arrays are refused (Gemini takes
// text, and another tokenizer's ids mean nothing to it), as are empty
// strings (OpenAI refuses them too) and more than MaxEmbedBatch inputs.
// dimensions → outputDimensionality; user is dropped.
func EmbeddingsToGemini(body []byte, opts Options) (EmbedRequest, error) {
	if opts.Model == "" {
		return EmbedRequest{}, errors.New("gemini: no upstream model given")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return EmbedRequest{}, &FieldError{Message: "request body must be a JSON object"}
	}
	keys := make([]string, 0, len(top))
	for k, v := range top {
		if !isNull(v) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var res EmbedRequest
	var inputs []string
	var dims int64
	for _, k := range keys {
		v := top[k]
		var err error
		switch k {
		case "model", "user":
		case "input":
			inputs, err = embedInputs(v)
		case "dimensions":
			dims, err = positiveInt(k, v)
		case "encoding_format":
			var f string
			if json.Unmarshal(v, &f) != nil || (f != "float" && f != "base64") {
				err = &FieldError{Param: k, Message: `must be "float" or "base64"`}
			}
			res.Base64 = f == "base64"
		default:
			err = &FieldError{Param: k, Message: "unrecognized request argument supplied: " + k}
		}
		if err != nil {
			return EmbedRequest{}, err
		}
	}
	if inputs == nil {
		return EmbedRequest{}, &FieldError{Param: "input", Message: "is required"}
	}
	model := "models/" + strings.TrimPrefix(opts.Model, "models/")
	reqs := make([]embedContentRequest, len(inputs))
	for i, s := range inputs {
		reqs[i] = embedContentRequest{Model: model, Content: content{Parts: []part{textPart(s)}}, OutputDimensionality: dims}
		res.PromptTokens += max(1, (int64(utf8.RuneCountInString(s))+3)/4)
	}
	var err error
	if res.Body, err = encode(struct {
		Requests []embedContentRequest `json:"requests"`
	}{reqs}); err != nil {
		return EmbedRequest{}, fmt.Errorf("gemini: encode request: %w", err)
	}
	res.Path = modelResource(opts.Model) + ":batchEmbedContents"
	res.Inputs = len(inputs)
	return res, nil
}

func embedInputs(v json.RawMessage) ([]string, error) {
	var one string
	var many []string
	switch {
	case json.Unmarshal(v, &one) == nil:
		many = []string{one}
	case json.Unmarshal(v, &many) == nil:
	default:
		return nil, &FieldError{Param: "input", Message: "must be a string or an array of strings: token arrays are not supported by this provider"}
	}
	if len(many) == 0 {
		return nil, &FieldError{Param: "input", Message: "must not be empty"}
	}
	if len(many) > MaxEmbedBatch {
		return nil, &FieldError{Param: "input", Message: fmt.Sprintf("at most %d inputs per request are supported by this provider", MaxEmbedBatch)}
	}
	for i, s := range many {
		if s == "" {
			return nil, &FieldError{Param: indexed("input", i), Message: "must not be an empty string"}
		}
	}
	return many, nil
}

type embeddingData struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // json.RawMessage array, or a base64 string
}

// EmbeddingsFromGemini translates a
// batchEmbedContents body into an OpenAI embeddings list for req, with the
// estimated usage (EmbedRequest.PromptTokens). Float vectors are copied as
// Gemini wrote them, so no number is reformatted. A body that does not hold
// req.Inputs vectors of numbers is an error wrapping ErrMalformed.
func EmbeddingsFromGemini(body []byte, model string, req EmbedRequest) ([]byte, error) {
	var r struct {
		Embeddings []struct {
			Values json.RawMessage `json:"values"`
		} `json:"embeddings"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%w: embeddings body: %v", ErrMalformed, err)
	}
	if len(r.Embeddings) != req.Inputs {
		return nil, fmt.Errorf("%w: %d embeddings for %d inputs", ErrMalformed, len(r.Embeddings), req.Inputs)
	}
	data := make([]embeddingData, len(r.Embeddings))
	for i, e := range r.Embeddings {
		var vals []float64
		if json.Unmarshal(e.Values, &vals) != nil || len(vals) == 0 {
			return nil, fmt.Errorf("%w: embeddings[%d].values is not an array of numbers", ErrMalformed, i)
		}
		data[i] = embeddingData{Object: "embedding", Index: i}
		if req.Base64 {
			buf := make([]byte, 4*len(vals))
			for j, f := range vals {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(float32(f)))
			}
			data[i].Embedding = base64.StdEncoding.EncodeToString(buf)
		} else {
			var b bytes.Buffer
			_ = json.Compact(&b, e.Values) // valid: it decoded
			data[i].Embedding = json.RawMessage(b.Bytes())
		}
	}
	out, err := encode(struct {
		Object string          `json:"object"`
		Data   []embeddingData `json:"data"`
		Model  string          `json:"model"`
		Usage  struct {
			PromptTokens int64 `json:"prompt_tokens"`
			TotalTokens  int64 `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Data: data, Model: model, Usage: struct {
		PromptTokens int64 `json:"prompt_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	}{req.PromptTokens, req.PromptTokens}})
	if err != nil {
		return nil, fmt.Errorf("gemini: encode embeddings: %w", err)
	}
	return out, nil
}
