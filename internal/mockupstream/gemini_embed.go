package mockupstream

import (
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strconv"
)

// Gemini's batchEmbedContents: {"requests":[{"model":"models/M","content":{"parts":
// [{"text":...}]},"outputDimensionality":N}]} answered {"embeddings":[{"values":[...]}]},
// without usage, as Gemini answers. The vectors are the OpenAI endpoint's for the same
// text, so a test compares them across providers.

type geminiEmbedRequest struct {
	Requests []struct {
		Model   string `json:"model"`
		Content struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"content"`
		OutputDimensionality int `json:"outputDimensionality"`
	} `json:"requests"`
}

func (c *call) serveGeminiEmbed(model, key string) {
	var req geminiEmbedRequest
	if err := json.Unmarshal(c.body, &req); err != nil {
		c.reject(http.StatusBadRequest, "Invalid JSON payload received. "+err.Error(), "", "")
		return
	}
	if len(req.Requests) == 0 {
		c.reject(http.StatusBadRequest, "* BatchEmbedContentsRequest.requests: requests is not specified\n", "", "")
		return
	}
	seeds := make([]uint64, len(req.Requests))
	dims := DefaultEmbeddingDimensions
	for i, r := range req.Requests {
		n := strconv.Itoa(i)
		switch {
		case r.Model != "models/"+model:
			// Gemini refuses a batch whose requests name another model.
			c.reject(http.StatusBadRequest, "* BatchEmbedContentsRequest.requests["+n+"].model: the model must be models/"+model+"\n", "", "")
			return
		case len(r.Content.Parts) == 0 || r.Content.Parts[0].Text == "":
			c.reject(http.StatusBadRequest, "* BatchEmbedContentsRequest.requests["+n+"].content: contents is not specified\n", "", "")
			return
		case r.OutputDimensionality < 0 || r.OutputDimensionality > maxEmbeddingDimensions:
			c.reject(http.StatusBadRequest, "* BatchEmbedContentsRequest.requests["+n+"].output_dimensionality: out of range\n", "", "")
			return
		case r.OutputDimensionality > 0:
			dims = r.OutputDimensionality
		}
		h := fnv.New64a()
		for _, p := range r.Content.Parts {
			h.Write([]byte(p.Text))
		}
		seeds[i] = h.Sum64()
	}
	c.track(model)
	c.stamp("X-Goog-Request-Id", "mock-")
	if !c.faults(key, false) || !sleep(c.r.Context(), c.b.Latency) {
		return
	}
	bufs := bufPool.Get().(*buffers)
	defer bufPool.Put(bufs)
	dst := append(bufs.out[:0], `{"embeddings":[`...)
	vec := make([]float32, dims)
	for i, seed := range seeds {
		if i > 0 {
			dst = append(dst, ',')
		}
		fillUnitVector(vec, seed)
		dst = append(dst, `{"values":[`...)
		for j, v := range vec {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendFloat(dst, float64(v), 'g', -1, 32)
		}
		dst = append(dst, "]}"...)
	}
	bufs.out = append(dst, "]}\n"...)
	c.o = writeAnswer(c.w, bufs.out)
}
