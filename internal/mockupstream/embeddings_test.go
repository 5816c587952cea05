package mockupstream

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"math"
	"net/http"
	"testing"
)

type embeddingList struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	} `json:"data"`
	Usage *struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// embedRaw posts body to a fresh mock's path.
func embedRaw(t *testing.T, path, body string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	_, ts := start(t, Behavior{})
	resp := postTo(t, context.Background(), ts, path, body, headers...)
	return resp, readAll(t, resp)
}

// embed is embedRaw with the float list decoded when the answer is a success.
func embed(t *testing.T, path, body string, headers ...string) (embeddingList, *http.Response, []byte) {
	t.Helper()
	resp, raw := embedRaw(t, path, body, headers...)
	var l embeddingList
	if resp.StatusCode == http.StatusOK {
		decodeInto(t, string(raw), &l)
	}
	return l, resp, raw
}

// TestEmbeddingsShape covers every input form OpenAI accepts, on both paths: one
// embedding per input, in order, of the asked dimension, unit length, with usage.
func TestEmbeddingsShape(t *testing.T) {
	tests := []struct {
		name, path, body string
		wantN, wantDims  int
		wantTokens       int
	}{
		{"string", pathEmbeddings, `{"model":"emb","input":"hello world"}`, 1, DefaultEmbeddingDimensions, 3},
		{"array of strings", "/embeddings", `{"model":"emb","input":["a","bbbbb","c"]}`, 3, DefaultEmbeddingDimensions, 4},
		{"token ids", pathEmbeddings, `{"model":"emb","input":[1,2,3,4,5]}`, 1, DefaultEmbeddingDimensions, 5},
		{"token id arrays", pathEmbeddings, `{"model":"emb","input":[[1,2],[3]]}`, 2, DefaultEmbeddingDimensions, 3},
		{"dimensions", pathEmbeddings, `{"model":"emb","input":"x","dimensions":32,"encoding_format":"float"}`, 1, 32, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, resp, raw := embed(t, tt.path, tt.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("got %d %s", resp.StatusCode, raw)
			}
			if l.Object != "list" || l.Model != "emb" || len(l.Data) != tt.wantN || l.Usage == nil ||
				l.Usage.PromptTokens != tt.wantTokens || l.Usage.TotalTokens != tt.wantTokens {
				t.Fatalf("list = %s, want %d embeddings and %d tokens", raw, tt.wantN, tt.wantTokens)
			}
			for i, d := range l.Data {
				if d.Object != "embedding" || d.Index != i || len(d.Embedding) != tt.wantDims {
					t.Errorf("data[%d] = %+v, want embedding index %d of %d dims", i, d, i, tt.wantDims)
				}
				var norm float64
				for _, v := range d.Embedding {
					norm += v * v
				}
				if math.Abs(norm-1) > 1e-4 {
					t.Errorf("data[%d] has squared norm %v, want 1", i, norm)
				}
			}
			if resp.Header.Get(HeaderIdentity) != DefaultIdentity || resp.Header.Get("X-Request-Id") == "" {
				t.Errorf("identity/request id headers missing: %v", resp.Header)
			}
		})
	}
}

// TestEmbeddingsDeterministic: equal inputs get equal vectors (across requests and
// positions), different inputs different ones, and base64 encodes the same floats.
func TestEmbeddingsDeterministic(t *testing.T) {
	a, _, _ := embed(t, pathEmbeddings, `{"model":"emb","input":["same","other","same"]}`)
	b, _, _ := embed(t, pathEmbeddings, `{"model":"emb","input":"same"}`)
	if len(a.Data) != 3 || len(b.Data) != 1 {
		t.Fatalf("got %d and %d embeddings", len(a.Data), len(b.Data))
	}
	equal := func(x, y []float64) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return len(x) == len(y)
	}
	if !equal(a.Data[0].Embedding, a.Data[2].Embedding) || !equal(a.Data[0].Embedding, b.Data[0].Embedding) {
		t.Errorf("equal inputs got different vectors")
	}
	if equal(a.Data[0].Embedding, a.Data[1].Embedding) {
		t.Errorf("different inputs got the same vector")
	}

	resp, raw := embedRaw(t, pathEmbeddings, `{"model":"emb","input":"same","encoding_format":"base64"}`)
	var l struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	decodeInto(t, string(raw), &l)
	if resp.StatusCode != http.StatusOK || len(l.Data) != 1 {
		t.Fatalf("base64: got %d %s", resp.StatusCode, raw)
	}
	packed, err := base64.StdEncoding.DecodeString(l.Data[0].Embedding)
	if err != nil || len(packed) != 4*DefaultEmbeddingDimensions {
		t.Fatalf("base64 embedding %q: %v", l.Data[0].Embedding, err)
	}
	for i, want := range b.Data[0].Embedding {
		got := math.Float32frombits(binary.LittleEndian.Uint32(packed[4*i:]))
		if float64(got) != float64(float32(want)) {
			t.Errorf("base64 component %d = %v, want %v", i, got, want)
		}
	}
}

// TestEmbeddingsErrors: bad bodies are refused OpenAI-style with the parameter named,
// and the shared fault controls apply.
func TestEmbeddingsErrors(t *testing.T) {
	tests := []struct {
		name, body string
		headers    []string
		wantStatus int
		wantType   string
		wantParam  string
	}{
		{"missing model", `{"input":"x"}`, nil, 400, "invalid_request_error", "model"},
		{"missing input", `{"model":"m"}`, nil, 400, "invalid_request_error", "input"},
		{"empty string", `{"model":"m","input":""}`, nil, 400, "invalid_request_error", "input"},
		{"empty array", `{"model":"m","input":[]}`, nil, 400, "invalid_request_error", "input"},
		{"object input", `{"model":"m","input":{"a":1}}`, nil, 400, "invalid_request_error", "input"},
		{"mixed tokens", `{"model":"m","input":[1,"a"]}`, nil, 400, "invalid_request_error", "input"},
		{"fractional token", `{"model":"m","input":[1.5]}`, nil, 400, "invalid_request_error", "input"},
		{"dimensions 0", `{"model":"m","input":"x","dimensions":0}`, nil, 400, "invalid_request_error", "dimensions"},
		{"bad encoding", `{"model":"m","input":"x","encoding_format":"hex"}`, nil, 400, "invalid_request_error", "encoding_format"},
		{"injected 429", `{"model":"m","input":"x"}`, []string{HeaderStatus, "429"}, 429, "rate_limit_error", ""},
		{"injected 503", `{"model":"m","input":"x"}`, []string{HeaderFailRate, "1", HeaderStatus, "503"}, 503, "server_error", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, raw := embedRaw(t, pathEmbeddings, tt.body, tt.headers...)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, raw, tt.wantStatus)
			}
			e := decodeError(t, raw)
			param := ""
			if e.Error.Param != nil {
				param = *e.Error.Param
			}
			if e.Error.Type != tt.wantType || param != tt.wantParam {
				t.Errorf("error = %s, want type %s param %q", raw, tt.wantType, tt.wantParam)
			}
		})
	}
}
