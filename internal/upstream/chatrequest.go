package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/llmgw/gateway/internal/jsontext"
	"github.com/llmgw/gateway/internal/upstream/responsesclient"
)

// RequestError is a client request the gateway refuses before planning; the
// API layer turns it into a 400 invalid_request_error naming Param.
type RequestError struct {
	Param   string // JSON field at fault, "" for the body as a whole
	Message string
}

func (e *RequestError) Error() string { return e.Message }

// ChatRequest is a validated request body of one client route (chat
// completions, messages, embeddings or responses). The body is kept as the
// client sent it: passed through, only the model value is ever replaced, by
// splicing bytes, so unknown fields and their formatting reach the provider
// untouched and the body is never re-encoded. It is also the request's
// adapter toward each provider format (exchange.go).
type ChatRequest struct {
	Body   []byte
	Model  string
	Stream bool
	Route  Route
	// span of the model value (quotes included) inside Body
	modelStart, modelEnd int

	// the last translation, reused by the next attempt on the same
	// endpoint and model (the API checks the first one before the loop);
	// nil until a candidate needs one, so a pass-through request carries
	// no room for it
	x *translation
	// span of stream_options inside Body; -1 without one
	optStart, optEnd int
	// span of stream_options.include_usage's value inside Body; -1
	// without one. IncludeUsage is that value is true: the client asked
	// for the usage chunk.
	incStart, incEnd int
	IncludeUsage     bool
	// MaxTokens is the largest of the client's max_tokens,
	// max_completion_tokens and max_output_tokens; 0 when it set none.
	MaxTokens int64
	// objEnd is the index of the body object's closing brace, where a
	// member the gateway adds goes (usageBody).
	objEnd int
	// NoStore is a Responses request's store: false: its answer's
	// output items are not kept (responses_items.go).
	NoStore bool
	// Items resolves the item_reference inputs of a Responses request
	// translated for a provider that stores nothing, and KeepItems keeps
	// the output items of its translated answer before the client sees
	// them; both set by the API on such requests only, before the first
	// Build (responses_items.go). KeepItems may be called from any
	// attempt's goroutine.
	Items     responsesclient.Items
	KeepItems func([]responsesclient.Item)
}

// ParseChatRequest validates a chat completions body: one JSON object,
// nothing after it, a non-empty string "model" and an array "messages".
func ParseChatRequest(body []byte) (*ChatRequest, error) { return ParseRequest(RouteChat, body) }

// ParseRequest validates the body of a request on route: one JSON object,
// nothing after it, a non-empty string "model", and the route's own
// required field: "messages" (an array) for chat and messages, "input" for
// embeddings, "input" or "previous_response_id" for responses. "stream" must
// be a boolean; embeddings never stream.
//
// Validation and the walk over the members are one pass: each member's value
// is validated to find its end (jsontext.ValidValue), so a body is read once
// before the upstream request leaves. A member's own fault is reported only
// when the whole body is valid JSON, as if it had been validated first.
func ParseRequest(route Route, body []byte) (*ChatRequest, error) {
	i := jsontext.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		if !jsontext.Valid(body) {
			return nil, errNotJSON()
		}
		return nil, &RequestError{Message: "request body must be a JSON object"}
	}
	p := requestParse{route: route, req: &ChatRequest{Body: body, modelStart: -1, Route: route, optStart: -1, incStart: -1}}
	end, ok := p.members(body, i)
	if !ok || jsontext.SkipSpace(body, end) != len(body) {
		return nil, errNotJSON()
	}
	if p.err != nil {
		return nil, p.err
	}
	p.req.objEnd = end - 1
	return p.finish()
}

func errNotJSON() *RequestError {
	return &RequestError{Message: "request body is not valid JSON (one JSON object expected)"}
}

// requestParse is ParseRequest's state while it walks a body's members.
type requestParse struct {
	route                 Route
	req                   *ChatRequest
	sawMessages, sawInput bool
	seen                  uint32        // policy members met, by bit (policyMember)
	err                   *RequestError // the first member at fault
}

// members walks the object whose '{' is at body[i], validating it, and
// applies each member until one is at fault. It returns the index past the
// object and whether the object is valid JSON.
func (p *requestParse) members(body []byte, i int) (int, bool) {
	i = jsontext.SkipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(body) || body[i] != '"' {
			return i, false
		}
		keyStart := i
		keyEnd, ok := jsontext.ValidValue(body, i, 1)
		if !ok {
			return keyEnd, false
		}
		i = jsontext.SkipSpace(body, keyEnd)
		if i >= len(body) || body[i] != ':' {
			return i, false
		}
		valStart := jsontext.SkipSpace(body, i+1)
		valEnd, ok := jsontext.ValidValue(body, valStart, 1)
		if !ok {
			return valEnd, false
		}
		if p.err == nil {
			p.err = p.member(body[keyStart:keyEnd], body, valStart, valEnd)
		}
		i = jsontext.SkipSpace(body, valEnd)
		switch {
		case i < len(body) && body[i] == ',':
			i = jsontext.SkipSpace(body, i+1)
		case i < len(body) && body[i] == '}':
			return i + 1, true
		default:
			return i, false
		}
	}
}

// member applies one member: rawKey is the key's JSON string, the value is
// body[valStart:valEnd].
//
// A member the gateway or its translators read (policyNames) is matched
// exactly, and one that only encoding/json would take for it is refused:
// Go's decoder (and so Ollama, LocalAI, the translators' own struct
// decodes) matches keys case-insensitively, with Unicode simple folding
// ("ſtream" is "stream", "\u212Aind" is "kind"), and keeps the last of
// duplicates. A body with "model" and "Model", or "stream" twice, would be
// routed and counted on one value and served on the other.
func (p *requestParse) member(rawKey, body []byte, valStart, valEnd int) *RequestError {
	key, err := decodeKey(rawKey)
	if err != nil {
		return &RequestError{Message: "request body has an unreadable key"}
	}
	m := policyMember(key)
	if m < 0 {
		if m = foldedPolicyMember(key); m >= 0 {
			return twinError(string(key), policyNames[m])
		}
		return nil
	}
	if p.seen&(1<<m) != 0 {
		return &RequestError{Param: policyNames[m], Message: "'" + policyNames[m] + "' appears more than once"}
	}
	p.seen |= 1 << m
	req, val := p.req, body[valStart:valEnd]
	switch m {
	case memModel:
		model, ok := decodeString(val)
		if !ok || model == "" {
			return &RequestError{Param: "model", Message: "'model' must be a non-empty string"}
		}
		req.Model = model
		req.modelStart, req.modelEnd = valStart, valEnd
	case memMessages:
		if len(val) == 0 || val[0] != '[' {
			return &RequestError{Param: "messages", Message: "'messages' must be an array"}
		}
		p.sawMessages = true
	case memInput:
		// Only embeddings and responses read it; on the chat routes it
		// is the provider's business, like any unknown field.
		if p.route == RouteEmbeddings || p.route == RouteResponses {
			if string(val) == "null" {
				return &RequestError{Param: "input", Message: "'input' must not be null"}
			}
			p.sawInput = true
		}
	case memStreamOptions:
		req.optStart, req.optEnd = valStart, valEnd
		return req.streamOptions()
	case memPreviousResponseID:
		if string(val) != "null" && p.route == RouteResponses {
			p.sawInput = true
		}
	case memStream:
		switch string(val) {
		case "true":
			req.Stream = true
		case "false", "null":
		default:
			return &RequestError{Param: "stream", Message: "'stream' must be a boolean"}
		}
	case memStore:
		// Read on the responses route: the gateway keeps the output items
		// of a translated answer unless the client said store: false
		// (responses_items.go). A value that is not a boolean is the
		// provider's to refuse, as OpenAI does.
		req.NoStore = p.route == RouteResponses && string(val) == "false"
	case memMaxTokens, memMaxCompletionTokens, memMaxOutputTokens:
		// Read for the budget's reservation (docs/cost.md); a value that
		// is not a whole number is the provider's to refuse.
		if n, err := strconv.ParseInt(string(val), 10, 64); err == nil && n > req.MaxTokens {
			req.MaxTokens = n
		}
	}
	return nil
}

// streamOptions reads stream_options.include_usage, the one member of it
// the gateway reads (and sets: usageBody), under the same rule as the top
// level's. A value that is not an object is the provider's to refuse.
func (r *ChatRequest) streamOptions() *RequestError {
	b, i, end := r.Body, r.optStart, r.optEnd
	if b[i] != '{' {
		return nil
	}
	// What the SDKs send, compared whole: the walk below costs more than
	// the rest of a short request's members together.
	switch string(b[i:end]) {
	case `{"include_usage":true}`, `{"include_usage":false}`:
		r.incStart, r.incEnd = i+len(`{"include_usage":`), end-1
		r.IncludeUsage = b[r.incStart] == 't'
		return nil
	}
	// The value was validated: the walk needs no checks but the structure.
	for i = jsontext.SkipSpace(b, i+1); i < end && b[i] == '"'; {
		keyEnd := jsontext.SkipString(b, i)
		key, err := decodeKey(b[i:keyEnd])
		if err != nil {
			return &RequestError{Message: "request body has an unreadable key"}
		}
		valStart := jsontext.SkipSpace(b, jsontext.SkipSpace(b, keyEnd)+1) // past ':'
		valEnd := jsontext.SkipValue(b, valStart)
		switch {
		case string(key) == "include_usage":
			if r.incStart >= 0 {
				return &RequestError{Param: "stream_options.include_usage", Message: "'stream_options.include_usage' appears more than once"}
			}
			r.incStart, r.incEnd = valStart, valEnd
			r.IncludeUsage = string(b[valStart:valEnd]) == "true"
		case foldsTo(key, "include_usage"):
			return twinError("stream_options."+string(key), "stream_options.include_usage")
		}
		i = jsontext.SkipSpace(b, valEnd)
		if i < end && b[i] == ',' {
			i = jsontext.SkipSpace(b, i+1)
		}
	}
	return nil
}

// finish checks what a valid body must have had.
func (p *requestParse) finish() (*ChatRequest, error) {
	req := p.req
	if req.modelStart < 0 {
		return nil, &RequestError{Param: "model", Message: "you must provide a model parameter"}
	}
	switch p.route {
	case RouteChat, RouteMessages:
		if !p.sawMessages {
			return nil, &RequestError{Param: "messages", Message: "you must provide a messages parameter"}
		}
	case RouteEmbeddings:
		if !p.sawInput {
			return nil, &RequestError{Param: "input", Message: "you must provide an input parameter"}
		}
		req.Stream = false // embeddings answer one JSON body
	case RouteResponses:
		if !p.sawInput {
			return nil, &RequestError{Param: "input", Message: "you must provide an input or previous_response_id parameter"}
		}
	}
	return req, nil
}

// decodeString decodes a JSON string value of a body json.Valid accepted.
// A string with no escapes and valid UTF-8 is its bytes between the quotes
// (most model names); anything else goes through json.Unmarshal, which also
// turns invalid UTF-8 into U+FFFD. It runs on every request before the
// upstream request is sent, where json.Unmarshal cost about 1.5 µs.
func decodeString(raw []byte) (string, bool) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		in := raw[1 : len(raw)-1]
		if bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
			return string(in), true
		}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// decodeKey returns an object key's text. A key without escapes is its bytes
// between the quotes, not copied: the caller only compares it (switch on
// string(key) does not allocate).
func decodeKey(raw []byte) ([]byte, error) {
	if len(raw) >= 2 && raw[0] == '"' {
		if in := raw[1 : len(raw)-1]; bytes.IndexByte(in, '\\') < 0 {
			return in, nil
		}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("decode key: %w", err)
	}
	return []byte(s), nil
}

var errEventTooLarge = errors.New("SSE event larger than the limit")
