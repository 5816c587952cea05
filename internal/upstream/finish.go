package upstream

import (
	"bytes"
	"encoding/json"

	"github.com/llmgw/gateway/internal/jsontext"
	"github.com/llmgw/gateway/internal/upstream/anthropic"
)

// Why an answer ended, as OpenAI's finish_reason values (stop, length,
// tool_calls, content_filter; a provider's own value when it has no
// OpenAI name), for the attempt's span (gen_ai.response.finish_reasons).
// The readers note it where they already look: a pass-through chat stream
// in the same scan that tells a finished stream (finishValue), a
// translated one from its translator's finish chunk, an Anthropic or
// Responses stream from the event that ends it. Nothing is allocated
// while reading: the value is kept in place (rawReason) or is one of the
// translators' constants. Reader.FinishReasons makes the strings, and is
// called only when the attempt is traced. A non-stream answer is read then,
// from the bytes the attempt keeps anyway (its head and tail, or the chat
// body a translating reader made).

// maxReason bounds a finish reason kept from a stream: the longest OpenAI,
// Anthropic or Responses value ("model_context_window_exceeded") fits.
const maxReason = 40

// rawReason is a finish reason as the provider wrote it, copied out of
// the event buffer (which is reused) without an allocation.
type rawReason struct {
	b   [maxReason]byte
	n   uint8
	has bool
}

// set keeps v when ok and reports ok.
func (r *rawReason) set(v []byte, ok bool) bool {
	if ok {
		r.n, r.has = uint8(copy(r.b[:], v)), true
	}
	return ok
}

func (r *rawReason) bytes() []byte { return r.b[:r.n] }

var (
	finishKey = []byte(`finish_reason"`)
	stopKey   = []byte(`stop_reason"`)
	reasonKey = []byte(`reason"`)
	// A Responses output item that calls a function, as OpenAI writes it.
	functionCallItem = []byte(`"type":"function_call"`)
)

// finishValue returns the string value of the first member of d named by
// key (its name and closing quote, as finishKey): the value's bytes
// between its quotes, ok false when that member's value is not a string
// (null) or there is none. The search starts at the key's rarer first
// letter (a search from its quote costs four times as much: chunks are
// full of quotes); the quotes around it rule out the key's name inside a
// string value, where they would be escaped. The first real key decides:
// a chunk has one choice, and the stream's last one says why it finished.
func finishValue(d, key []byte) (v []byte, ok bool) {
	v, _, ok = nextValue(d, key)
	return v, ok
}

// nextValue is finishValue that also returns what follows the member's
// key, to look for the next one; rest is nil when there is none.
func nextValue(d, key []byte) (v, rest []byte, ok bool) {
	for {
		i := bytes.Index(d, key)
		if i < 0 {
			return nil, nil, false
		}
		rest = d[i+len(key):]
		if i > 0 && d[i-1] == '"' && (i < 2 || d[i-2] != '\\') {
			if j := jsontext.SkipSpace(rest, 0); j < len(rest) && rest[j] == ':' {
				j = jsontext.SkipSpace(rest, j+1)
				if j >= len(rest) || rest[j] != '"' {
					return nil, rest, false
				}
				v = rest[j+1:]
				if k := bytes.IndexByte(v, '"'); k >= 0 {
					v = v[:k]
				}
				return v, rest, true
			}
		}
		d = rest
	}
}

// chatReasons is every finish_reason of a chat body (one per choice), in
// order; nil when it has none.
func chatReasons(body []byte) []string {
	var out []string
	for rest := body; rest != nil; {
		var v []byte
		var ok bool
		v, rest, ok = nextValue(rest, finishKey)
		if ok {
			out = append(out, chatReason(v))
		}
	}
	return out
}

// chatReason is a finish_reason value as a string: OpenAI's own values
// without an allocation.
func chatReason(v []byte) string {
	switch string(v) {
	case "stop":
		return "stop"
	case "length":
		return "length"
	case "tool_calls":
		return "tool_calls"
	case "content_filter":
		return "content_filter"
	case "function_call":
		return "function_call"
	}
	return string(v)
}

// responsesReason maps how a Responses answer ended to a finish_reason:
// its incomplete_details.reason (max_output_tokens is length), or, for one
// that completed, tool_calls when it called a function, else stop. It is
// the inverse of what responsesclient writes for a chat answer.
func responsesReason(v []byte) string {
	switch string(v) {
	case "completed":
		return "stop"
	case "function_call":
		return "tool_calls"
	case "max_output_tokens":
		return "length"
	}
	return chatReason(v)
}

// responseReason notes how a Responses stream ended from its
// response.completed or response.incomplete event: in the words
// responsesReason maps, so that nothing is allocated here.
func (p *PassReader) responseReason(name, d []byte) {
	if string(name) == "response.incomplete" {
		p.reason.set(finishValue(d, reasonKey))
		return
	}
	if bytes.Contains(d, functionCallItem) {
		p.reason.set([]byte("function_call"), true)
		return
	}
	p.reason.set([]byte("completed"), true)
}

// FinishReasons implements Reader. A stream's reason was noted as it went
// by; a non-stream body's is read now: a chat or Anthropic body's from its
// tail (the reason follows the answer's text), a Responses body's from its
// head (its status comes first), decoded whole when it is.
func (p *PassReader) FinishReasons(head, tail []byte) []string {
	if p.reason.has {
		v := p.reason.bytes()
		switch p.kind {
		case passMessages:
			return []string{anthropic.FinishReason(string(v))}
		case passResponses:
			return []string{responsesReason(v)}
		}
		return []string{chatReason(v)}
	}
	switch p.kind {
	case passChat:
		return chatReasons(tail)
	case passMessages:
		if v, ok := finishValue(tail, stopKey); ok {
			return []string{anthropic.FinishReason(string(v))}
		}
	case passResponses:
		return bodyResponsesReason(head)
	}
	return nil
}

// bodyResponsesReason is the finish_reason of a whole Responses body.
func bodyResponsesReason(body []byte) []string {
	var r struct {
		Status     string `json:"status"`
		Incomplete *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Output []struct {
			Type string `json:"type"`
		} `json:"output"`
	}
	if json.Unmarshal(body, &r) != nil {
		return nil
	}
	switch {
	case r.Status == "incomplete" && r.Incomplete != nil:
		return []string{responsesReason([]byte(r.Incomplete.Reason))}
	case r.Status != "completed":
		return nil
	}
	for _, o := range r.Output {
		if o.Type == "function_call" {
			return []string{"tool_calls"}
		}
	}
	return []string{"stop"}
}

// translatedReasons is a translating reader's finish reason: its stream
// translator's (stream), else the chat body it made (chat, non-stream).
func translatedReasons(stream string, chat []byte) []string {
	if stream != "" {
		return []string{stream}
	}
	return chatReasons(chat)
}

// FinishReasons implements Reader.
func (f *fromAnthropic) FinishReasons(_, _ []byte) []string {
	return translatedReasons(f.t.FinishReason(), f.chat)
}

// FinishReasons implements Reader: the provider's own finish_reason.
func (a *toAnthropic) FinishReasons(_, _ []byte) []string {
	return translatedReasons(a.t.FinishReason(), a.chat)
}

// FinishReasons implements Reader.
func (f *fromGemini) FinishReasons(_, _ []byte) []string {
	return translatedReasons(f.t.FinishReason(), f.chat)
}

// FinishReasons implements Reader.
func (f *fromBedrock) FinishReasons(_, _ []byte) []string {
	return translatedReasons(f.t.FinishReason(), f.chat)
}

// FinishReasons implements Reader: the chat reader's, which read the
// provider's answer.
func (x *toResponses) FinishReasons(_, _ []byte) []string { return x.chat.FinishReasons(nil, nil) }

// FinishReasons implements Reader: embeddings have none.
func (e *geminiEmbeddings) FinishReasons(_, _ []byte) []string { return nil }
