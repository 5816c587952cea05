package upstream

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/llmgw/gateway/internal/jsontext"
)

// This file reads a usage object of any format, bounded against absurd
// counts, from a whole body or the tail of a stream (TailUsage).

// wideUsage reads the usage objects of every format: OpenAI chat and
// embeddings (prompt/completion), Responses and Anthropic (input/output;
// Anthropic counts cached prompt tokens apart).
type wideUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheCreation    int64 `json:"cache_creation_input_tokens"`
	CacheRead        int64 `json:"cache_read_input_tokens"`
	// The details objects of chat and Responses; a value that is not
	// one costs only its count (wideDetails).
	PromptDetails     json.RawMessage `json:"prompt_tokens_details"`
	CompletionDetails json.RawMessage `json:"completion_tokens_details"`
	InputDetails      json.RawMessage `json:"input_tokens_details"`
	OutputDetails     json.RawMessage `json:"output_tokens_details"`
}

// wideDetails is the one count read from a details object.
type wideDetails struct {
	CachedTokens    int64 `json:"cached_tokens"`
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

func detailsOf(raw ...json.RawMessage) (d wideDetails) {
	for _, r := range raw {
		var one wideDetails
		if len(r) > 0 && json.Unmarshal(r, &one) == nil {
			d.CachedTokens += one.CachedTokens
			d.ReasoningTokens += one.ReasoningTokens
		}
	}
	return d
}

// sane reports the first count of w, as sent, outside [0,
// MaxUsageTokens]: one the usage leaves out (input_tokens beside
// prompt_tokens) or nets out (a negative cache count in one details object
// and a positive one in the other) still says the provider's counts are
// not true, and a count added to another cannot overflow.
func (w *wideUsage) sane() error {
	counts := [...]struct {
		name string
		n    int64
	}{{"prompt_tokens", w.PromptTokens}, {"completion_tokens", w.CompletionTokens}, {"total_tokens", w.TotalTokens},
		{"input_tokens", w.InputTokens}, {"output_tokens", w.OutputTokens},
		{"cache_creation_input_tokens", w.CacheCreation}, {"cache_read_input_tokens", w.CacheRead},
		{"cached_tokens", detailsOf(w.PromptDetails).CachedTokens}, {"cached_tokens", detailsOf(w.InputDetails).CachedTokens},
		{"reasoning_tokens", detailsOf(w.CompletionDetails).ReasoningTokens},
		{"reasoning_tokens", detailsOf(w.OutputDetails).ReasoningTokens}}
	for _, c := range counts {
		if c.n < 0 || c.n > MaxUsageTokens {
			return &UsageError{Detail: c.name + " " + strconv.FormatInt(c.n, 10) + " is outside [0, " +
				strconv.Itoa(MaxUsageTokens) + "]"}
		}
	}
	return nil
}

func (w *wideUsage) usage() Usage {
	u := Usage{PromptTokens: w.PromptTokens, CompletionTokens: w.CompletionTokens, TotalTokens: w.TotalTokens}
	if u.PromptTokens == 0 {
		u.PromptTokens = w.InputTokens + w.CacheCreation + w.CacheRead
	}
	// Anthropic's cache counts, or OpenAI's details (chat and Responses
	// name them apart; a usage object has one kind).
	in := detailsOf(w.PromptDetails, w.InputDetails)
	out := detailsOf(w.CompletionDetails, w.OutputDetails)
	u.CachedTokens = w.CacheRead + in.CachedTokens
	u.CacheWriteTokens = w.CacheCreation
	u.ReasoningTokens = out.ReasoningTokens
	if u.CompletionTokens == 0 {
		u.CompletionTokens = w.OutputTokens
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u
}

// tailUsageObject finds the last "usage" object of a body's tail, as
// TailUsage does, and returns its bytes.
func tailUsageObject(tail []byte) ([]byte, bool) {
	end := len(tail)
	for {
		i := bytes.LastIndex(tail[:end], usageKey)
		if i < 0 {
			return nil, false
		}
		end = i
		val, ok := keyValue(tail, i)
		if !ok {
			continue
		}
		if len(val) == 0 || val[0] != '{' {
			return nil, false
		}
		return val[:jsontext.SkipValue(val, 0)], true
	}
}
