package gemini

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// TestEmbeddings: source https://ai.google.dev/api/embeddings#method:-models.batchembedcontents
func TestEmbeddings(t *testing.T) {
	req, err := EmbeddingsToGemini([]byte(`{"model":"text-embedding-3-small","input":["hello world","añb"],"dimensions":3,"user":"u"}`),
		Options{Model: "gemini-embedding-001"})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, req.Body, []byte(`{"requests":[
		{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"hello world"}]},"outputDimensionality":3},
		{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"añb"}]},"outputDimensionality":3}]}`))
	if req.Path != "models/gemini-embedding-001:batchEmbedContents" || req.Inputs != 2 || req.Base64 {
		t.Fatalf("%+v", req)
	}
	// ceil(11/4) + ceil(3/4): characters, not bytes ("ñ" is two bytes).
	if req.PromptTokens != 3+1 {
		t.Fatalf("PromptTokens = %d", req.PromptTokens)
	}
	gem := []byte(`{"embeddings":[{"values":[0.1, -0.25, 3e-7]},{"values":[1,2,3]}]}`)
	out, err := EmbeddingsFromGemini(gem, "text-embedding-3-small", req)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, out, []byte(`{"object":"list","data":[
		{"object":"embedding","index":0,"embedding":[0.1,-0.25,3e-7]},
		{"object":"embedding","index":1,"embedding":[1,2,3]}],
		"model":"text-embedding-3-small","usage":{"prompt_tokens":4,"total_tokens":4}}`))
	if _, err := EmbeddingsFromGemini([]byte(`{"embeddings":[{"values":[1]}]}`), "m", req); !errors.Is(err, ErrMalformed) {
		t.Fatalf("one vector for two inputs: %v", err)
	}
}

func TestEmbeddingsBase64(t *testing.T) {
	req, err := EmbeddingsToGemini([]byte(`{"input":"x","encoding_format":"base64"}`), Options{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := EmbeddingsFromGemini([]byte(`{"embeddings":[{"values":[0.5,-2]}]}`), "m", req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	binary.LittleEndian.PutUint32(buf, math.Float32bits(0.5))
	binary.LittleEndian.PutUint32(buf[4:], math.Float32bits(-2))
	sameJSON(t, out, []byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":"`+
		base64.StdEncoding.EncodeToString(buf)+`"}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`))
}

func TestEmbeddingsRefused(t *testing.T) {
	many := `[` + "\"a\"" + repeat(`,"a"`, MaxEmbedBatch) + `]`
	for body, param := range map[string]string{
		`{"input":[1,2,3]}`:                   "input",
		`{"input":[[1,2]]}`:                   "input",
		`{"input":[]}`:                        "input",
		`{"input":["a",""]}`:                  "input[1]",
		`{"input":` + many + `}`:              "input",
		`{"input":"a","encoding_format":"x"}`: "encoding_format",
		`{"input":"a","dimensions":0}`:        "dimensions",
		`{"input":"a","extra":1}`:             "extra",
		`{}`:                                  "input",
	} {
		_, err := EmbeddingsToGemini([]byte(body), Options{Model: "m"})
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Param != param {
			t.Errorf("%s: err = %v, want param %q", body, err, param)
		}
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}
