package mockupstream

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
)

// The OpenAI embeddings endpoint: POST /v1/embeddings (and /embeddings). It has no
// stream, so of the fault controls only Latency, Status, FailRate, HangRate, RetryAfter
// and KeyStatus apply. Vectors are deterministic: the same input gets the same unit
// vector on every mock, whatever its identity.

// DefaultEmbeddingDimensions is the vector length when the request has no "dimensions".
// It is small on purpose: tests compare vectors, they do not search with them.
const DefaultEmbeddingDimensions = 8

// maxEmbeddingDimensions bounds "dimensions" (OpenAI's largest model has 3072).
const maxEmbeddingDimensions = 4096

type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	Dimensions     *int            `json:"dimensions"`
	EncodingFormat string          `json:"encoding_format"`
}

// embeddingInput is one input of the request: its vector's seed and its token count.
type embeddingInput struct {
	seed   uint64
	tokens int
}

func (s *Server) serveEmbeddings(w http.ResponseWriter, r *http.Request) {
	c := s.open(w, r, epEmbeddings, openAIWire{})
	defer c.finish()
	if !c.read() {
		return
	}
	var req embeddingsRequest
	inputs, msg, param := parseEmbeddings(c.body, &req)
	if msg != "" {
		c.reject(http.StatusBadRequest, msg, param, "invalid_request")
		return
	}
	c.track(req.Model)
	c.stamp("X-Request-Id", "req_mock_")
	if !c.faults(bearerKey(&c.b, r.Header), false) {
		return
	}
	if !sleep(r.Context(), c.b.Latency) {
		return
	}
	dims := DefaultEmbeddingDimensions
	if req.Dimensions != nil {
		dims = *req.Dimensions
	}
	bufs := bufPool.Get().(*buffers)
	defer bufPool.Put(bufs)
	bufs.out = appendEmbeddings(bufs.out[:0], req.Model, inputs, dims, req.EncodingFormat == "base64")
	c.o = writeAnswer(w, bufs.out)
}

// parseEmbeddings decodes the body and its input, which OpenAI accepts as a string, an
// array of strings, an array of token ids, or an array of such arrays.
func parseEmbeddings(body []byte, req *embeddingsRequest) (inputs []embeddingInput, msg, param string) {
	if err := json.Unmarshal(body, req); err != nil {
		return nil, "invalid JSON body: " + err.Error(), ""
	}
	switch {
	case req.Model == "":
		return nil, "missing required parameter: 'model'", "model"
	case len(req.Input) == 0 || string(req.Input) == "null":
		return nil, "missing required parameter: 'input'", "input"
	case req.Dimensions != nil && (*req.Dimensions < 1 || *req.Dimensions > maxEmbeddingDimensions):
		return nil, "'dimensions' must be within 1.." + strconv.Itoa(maxEmbeddingDimensions), "dimensions"
	case req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64":
		return nil, "'encoding_format' must be 'float' or 'base64'", "encoding_format"
	}
	var in any
	if err := json.Unmarshal(req.Input, &in); err != nil {
		return nil, "invalid 'input': " + err.Error(), "input"
	}
	const bad = "'input' must be a non-empty string, array of strings, array of tokens, or array of token arrays"
	one := func(v any) (embeddingInput, bool) {
		h := fnv.New64a()
		switch v := v.(type) {
		case string:
			if v == "" {
				return embeddingInput{}, false
			}
			h.Write([]byte(v))
			return embeddingInput{seed: h.Sum64(), tokens: max(1, (len(v)+3)/4)}, true
		case []any:
			if len(v) == 0 {
				return embeddingInput{}, false
			}
			for _, t := range v {
				n, ok := t.(float64)
				if !ok || n != math.Trunc(n) || n < 0 {
					return embeddingInput{}, false
				}
				h.Write(strconv.AppendFloat(nil, n, 'f', 0, 64))
				h.Write([]byte{','})
			}
			return embeddingInput{seed: h.Sum64(), tokens: len(v)}, true
		}
		return embeddingInput{}, false
	}
	list, isList := in.([]any)
	if !isList {
		e, ok := one(in)
		if !ok {
			return nil, bad, "input"
		}
		return []embeddingInput{e}, "", ""
	}
	if len(list) == 0 {
		return nil, bad, "input"
	}
	if _, tokens := list[0].(float64); tokens {
		e, ok := one(list) // one input given as token ids
		if !ok {
			return nil, bad, "input"
		}
		return []embeddingInput{e}, "", ""
	}
	for _, v := range list {
		e, ok := one(v)
		if !ok {
			return nil, bad, "input"
		}
		inputs = append(inputs, e)
	}
	return inputs, "", ""
}

// appendEmbeddings appends the embeddings list body; usage counts prompt tokens only,
// as OpenAI's does.
func appendEmbeddings(dst []byte, model string, inputs []embeddingInput, dims int, asBase64 bool) []byte {
	dst = append(dst, `{"object":"list","data":[`...)
	vec := make([]float32, dims)
	var raw []byte
	tokens := 0
	for i, in := range inputs {
		tokens += in.tokens
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"object":"embedding","index":`...)
		dst = strconv.AppendInt(dst, int64(i), 10)
		dst = append(dst, `,"embedding":`...)
		fillUnitVector(vec, in.seed)
		if asBase64 {
			// Little-endian float32s, as OpenAI's SDKs decode them.
			raw = raw[:0]
			for _, v := range vec {
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
			}
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, raw)
			dst = append(dst, `"}`...)
			continue
		}
		dst = append(dst, '[')
		for j, v := range vec {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendFloat(dst, float64(v), 'g', -1, 32)
		}
		dst = append(dst, "]}"...)
	}
	dst = append(dst, `],"model":`...)
	dst = appendJSONString(dst, model)
	dst = append(dst, `,"usage":{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(tokens), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(tokens), 10)
	return append(dst, "}}\n"...)
}

// fillUnitVector fills vec with a pseudo-random unit vector drawn from seed
// (splitmix64), so equal inputs get equal vectors and the length is 1 like OpenAI's.
func fillUnitVector(vec []float32, seed uint64) {
	var norm float64
	x := seed
	f := make([]float64, len(vec))
	for i := range f {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		f[i] = float64(z>>11)/(1<<53)*2 - 1
		norm += f[i] * f[i]
	}
	norm = math.Sqrt(norm)
	if norm == 0 {
		norm = 1
	}
	for i := range vec {
		vec[i] = float32(f[i] / norm)
	}
}
