package upstream

import (
	"encoding/json"

	"github.com/llmgw/gateway/internal/jsontext"
)

// This file writes a parsed request's body for one provider: the model
// spliced in, and the usage chunk asked for when a stream should carry it.

// WithModel returns the body with the model value replaced by model; the
// original is returned as is when the model does not change.
func (r *ChatRequest) WithModel(model string) []byte {
	if model == r.Model {
		return r.Body
	}
	q, _ := json.Marshal(model) // a string always marshals
	out := make([]byte, 0, len(r.Body)-(r.modelEnd-r.modelStart)+len(q))
	out = append(out, r.Body[:r.modelStart]...)
	out = append(out, q...)
	return append(out, r.Body[r.modelEnd:]...)
}

// asksUsage reports whether an attempt on ep asks for the stream's usage
// chunk the client did not ask for: a chat stream passed through to an
// openai provider with stream_usage on, so that a client's token rate (and
// the ledger) never depends on the client asking. The Responses API,
// Anthropic and the translated chat stream (anthropicclient asks itself)
// always carry usage. A stream_options that is neither an object nor null
// is left for the provider to refuse.
func (r *ChatRequest) asksUsage(ep *Endpoint) bool {
	if r.Route != RouteChat || !r.Stream || r.IncludeUsage || ep.Format != FormatOpenAI || !ep.StreamUsage {
		return false
	}
	return r.optStart < 0 || r.Body[r.optStart] == '{' || r.Body[r.optStart] == 'n'
}

// usageEdit is the splice that sets stream_options.include_usage: text
// replaces Body[start:end]. It keeps every other byte of the client's.
func (r *ChatRequest) usageEdit() (start, end int, text string) {
	switch {
	case r.optStart < 0:
		// After the last member: the object has at least "model".
		return r.objEnd, r.objEnd, `,"stream_options":{"include_usage":true}`
	case r.incStart >= 0: // include_usage false or null
		return r.incStart, r.incEnd, "true"
	case r.Body[r.optStart] == 'n':
		return r.optStart, r.optEnd, `{"include_usage":true}`
	}
	i := r.optStart + 1
	if r.Body[jsontext.SkipSpace(r.Body, i)] == '}' {
		return i, i, `"include_usage":true`
	}
	return i, i, `"include_usage":true,`
}

// bodyFor is the body of a pass-through attempt on ep for the upstream
// model: the client's bytes with the model spliced in (WithModel) and, when
// the attempt asks for usage, include_usage spliced into stream_options,
// both in one copy.
func (r *ChatRequest) bodyFor(ep *Endpoint, model string) []byte {
	if !r.asksUsage(ep) {
		return r.WithModel(model)
	}
	us, ue, ut := r.usageEdit()
	ms, me := r.modelStart, r.modelEnd
	b := r.Body
	out := make([]byte, 0, len(b)+len(ut)-(ue-us)+len(model)+8)
	appendModel := func(out []byte) []byte {
		if model == r.Model {
			return append(out, b[ms:me]...) // the client's own spelling
		}
		return jsontext.AppendString(out, model)
	}
	if ms < us {
		out = appendModel(append(out, b[:ms]...))
		out = append(append(out, b[me:us]...), ut...)
		return append(out, b[ue:]...)
	}
	out = append(append(out, b[:us]...), ut...)
	out = appendModel(append(out, b[ue:ms]...))
	return append(out, b[me:]...)
}
