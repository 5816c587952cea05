package anthropic

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// StreamTranslator turns one Messages API event stream into OpenAI
// chat.completion.chunk SSE frames. It keeps the state a stream needs (the
// chunk head shared by every chunk, which content blocks are tool calls,
// usage) and is not safe for concurrent use.
//
// The role chunk OpenAI streams begin with is held back until the first
// event that carries content (or the finish reason): message_start comes
// before the model has produced anything, and an overloaded_error may still
// follow it. So the first Event call that returns bytes is the moment the
// first real byte reaches the client; until then the gateway may still fail
// over.
type StreamTranslator struct {
	model        string
	created      int64
	includeUsage bool

	head     []byte  // `data: {"id":…,"object":…,"created":…,"model":…,`
	tools    []int64 // block index of each tool_use block, by tool call index
	toolArgs []bool  // whether each tool call's arguments got a fragment yet
	usage    messageUsage
	badUsage bool // a usage count was not a whole number within parseCount's reach
	started  bool // message_start seen
	roleSent bool
	finished bool   // a finish_reason chunk went out
	reason   string // its finish_reason
	done     bool
}

// NewStreamTranslator starts a stream for a client that asked for model;
// created is the Unix time every chunk reports, and includeUsage the
// client's stream_options.include_usage.
func NewStreamTranslator(model string, created int64, includeUsage bool) *StreamTranslator {
	return &StreamTranslator{model: model, created: created, includeUsage: includeUsage}
}

// Done reports whether message_stop arrived and "data: [DONE]" went out.
func (t *StreamTranslator) Done() bool { return t.done }

// FinishReason is the finish_reason the stream's finish chunk gave (an
// OpenAI value: stop, length, tool_calls, content_filter), "" before it.
func (t *StreamTranslator) FinishReason() string { return t.reason }

// Usage returns the usage seen so far: prompt tokens from message_start,
// completion tokens from the latest message_delta (message_start's
// placeholder before that). ok is false before message_start.
func (t *StreamTranslator) Usage() (Usage, bool) {
	if !t.started {
		return Usage{}, false
	}
	return t.usage.openAI(), true
}

// BadUsage reports whether a usage count of the stream was not a whole
// number of at most 16 digits (negative, fractional, a string, 10^17):
// its usage cannot be true, and the gateway must not take the counts it
// could read, without that one, for the provider's.
func (t *StreamTranslator) BadUsage() bool { return t.badUsage }

// Event translates one event, given by its name (the event: field) and
// data (its data: lines joined), as upstream's one SSE reader parses them,
// and appends the OpenAI frames to dst. out may be dst unchanged: ping,
// content_block_stop (but a tool call's that had no arguments: "{}"),
// thinking and message_start produce nothing. Events after message_stop
// are ignored.
//
// An `event: error` returns a *StreamError. An event that is not the
// Messages API (data that is not JSON, content before message_start, a
// missing field) returns an error wrapping ErrMalformed; out is then dst.
func (t *StreamTranslator) Event(dst, name, data []byte) (out []byte, err error) {
	return t.dispatch(dst, name, data)
}

// event holds the members of an event's data this translator reads.
type event struct {
	typ, index, delta, block, message, usage, errObj []byte
}

func parseEvent(data []byte) (event, bool) {
	var e event
	m, ok := objectMembers(data)
	if !ok {
		return e, false
	}
	for {
		k, v, ok := m.next()
		if !ok {
			return e, true
		}
		switch string(k) {
		case "type":
			e.typ = v
		case "index":
			e.index = v
		case "delta":
			e.delta = v
		case "content_block":
			e.block = v
		case "message":
			e.message = v
		case "usage":
			e.usage = v
		case "error":
			e.errObj = v
		}
	}
}

func (t *StreamTranslator) dispatch(dst, name, data []byte) ([]byte, error) {
	if t.done {
		return dst, nil
	}
	if !json.Valid(data) {
		return dst, fmt.Errorf("%w: event data is not JSON", ErrMalformed)
	}
	e, ok := parseEvent(data)
	if !ok {
		return dst, fmt.Errorf("%w: event data is not a JSON object", ErrMalformed)
	}
	typ := name
	if isString(e.typ) {
		typ = e.typ[1 : len(e.typ)-1] // the data's type decides; the event name only when it has none
	}
	switch string(typ) {
	case "ping":
		return dst, nil
	case "error":
		return dst, streamError(e.errObj)
	case "message_start":
		return dst, t.messageStart(e)
	case "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop":
		if !t.started {
			return dst, fmt.Errorf("%w: %s before message_start", ErrMalformed, typ)
		}
	default:
		return dst, nil // the API may add event types; clients are told to ignore them
	}
	switch string(typ) {
	case "content_block_start":
		return t.blockStart(dst, e)
	case "content_block_delta":
		return t.blockDelta(dst, e)
	case "content_block_stop":
		if index, ok := parseCount(e.index); ok {
			if n := t.toolIndex(index); n >= 0 {
				return t.emptyArguments(dst, n), nil
			}
		}
		return dst, nil
	case "message_delta":
		return t.messageDelta(dst, e)
	}
	return t.messageStop(dst), nil
}

func streamError(obj []byte) error {
	var typ, msg []byte
	if m, ok := objectMembers(obj); ok {
		for k, v, ok := m.next(); ok; k, v, ok = m.next() {
			switch string(k) {
			case "type":
				typ = v
			case "message":
				msg = v
			}
		}
	}
	if !isString(typ) {
		return fmt.Errorf("%w: error event without an error type", ErrMalformed)
	}
	return &StreamError{Type: unquote(typ), Message: unquote(msg)}
}

func (t *StreamTranslator) messageStart(e event) error {
	if t.started {
		return fmt.Errorf("%w: a second message_start", ErrMalformed)
	}
	m, ok := objectMembers(e.message)
	if !ok {
		return fmt.Errorf("%w: message_start without a message", ErrMalformed)
	}
	var id []byte
	for k, v, ok := m.next(); ok; k, v, ok = m.next() {
		switch string(k) {
		case "id":
			id = v
		case "usage":
			t.readUsage(v)
		}
	}
	h := append(make([]byte, 0, 128), `data: {"id":`...)
	h = appendString(h, chatID(unquote(id)))
	h = append(h, `,"object":"chat.completion.chunk","created":`...)
	h = strconv.AppendInt(h, t.created, 10)
	h = append(h, `,"model":`...)
	h = appendString(h, t.model)
	t.head = append(h, ',')
	t.started = true
	return nil
}

// readUsage takes the counts present in a usage object. message_delta's
// usage is cumulative, so a count it carries replaces the earlier one.
func (t *StreamTranslator) readUsage(obj []byte) {
	m, ok := objectMembers(obj)
	if !ok {
		// Absent or null is no news; anything else is no usage object.
		t.badUsage = t.badUsage || len(obj) > 0 && string(obj) != "null"
		return
	}
	for k, v, ok := m.next(); ok; k, v, ok = m.next() {
		n, isCount := parseCount(v)
		if !isCount {
			switch string(k) {
			case "input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens":
				t.badUsage = t.badUsage || string(v) != "null"
			}
			continue
		}
		switch string(k) {
		case "input_tokens":
			t.usage.InputTokens = n
		case "output_tokens":
			t.usage.OutputTokens = n
		case "cache_creation_input_tokens":
			t.usage.CacheCreation = n
		case "cache_read_input_tokens":
			t.usage.CacheRead = n
		}
	}
}

// blockStart emits a tool call's first chunk (id, name, empty arguments) and
// a text block's initial text, which the API sends empty. Thinking and
// server tool blocks produce nothing.
func (t *StreamTranslator) blockStart(dst []byte, e event) ([]byte, error) {
	index, ok := parseCount(e.index)
	if !ok {
		return dst, fmt.Errorf("%w: content_block_start without an index", ErrMalformed)
	}
	var typ, text, id, name []byte
	m, ok := objectMembers(e.block)
	if !ok {
		return dst, fmt.Errorf("%w: content_block_start without a content_block", ErrMalformed)
	}
	for k, v, ok := m.next(); ok; k, v, ok = m.next() {
		switch string(k) {
		case "type":
			typ = v
		case "text":
			text = v
		case "id":
			id = v
		case "name":
			name = v
		}
	}
	switch string(typ) {
	case `"text"`:
		return t.content(dst, text)
	case `"tool_use"`:
		if !isString(id) || !isString(name) {
			return dst, fmt.Errorf("%w: tool_use block without id or name", ErrMalformed)
		}
		n := len(t.tools)
		t.tools, t.toolArgs = append(t.tools, index), append(t.toolArgs, false)
		dst = t.open(dst)
		dst = append(dst, `{"tool_calls":[{"index":`...)
		dst = strconv.AppendInt(dst, int64(n), 10)
		dst = append(dst, `,"id":`...)
		dst = appendLiteral(dst, id)
		dst = append(dst, `,"type":"function","function":{"name":`...)
		dst = appendLiteral(dst, name)
		dst = append(dst, `,"arguments":""}}]}`...)
		return t.close(dst, ""), nil
	}
	return dst, nil
}

// blockDelta emits text and tool arguments; thinking, signature and citation
// deltas produce nothing, as do argument deltas of blocks that are not
// client tool calls (server tools).
func (t *StreamTranslator) blockDelta(dst []byte, e event) ([]byte, error) {
	index, ok := parseCount(e.index)
	if !ok {
		return dst, fmt.Errorf("%w: content_block_delta without an index", ErrMalformed)
	}
	var typ, text, partial []byte
	m, ok := objectMembers(e.delta)
	if !ok {
		return dst, fmt.Errorf("%w: content_block_delta without a delta", ErrMalformed)
	}
	for k, v, ok := m.next(); ok; k, v, ok = m.next() {
		switch string(k) {
		case "type":
			typ = v
		case "text":
			text = v
		case "partial_json":
			partial = v
		}
	}
	switch string(typ) {
	case `"text_delta"`:
		if !isString(text) {
			return dst, fmt.Errorf("%w: text_delta without text", ErrMalformed)
		}
		return t.content(dst, text)
	case `"input_json_delta"`:
		if !isString(partial) {
			return dst, fmt.Errorf("%w: input_json_delta without partial_json", ErrMalformed)
		}
		n := t.toolIndex(index)
		if n < 0 || len(partial) == 2 { // not a tool call, or nothing to add
			return dst, nil
		}
		t.toolArgs[n] = true
		dst = t.open(dst)
		dst = append(dst, `{"tool_calls":[{"index":`...)
		dst = strconv.AppendInt(dst, int64(n), 10)
		dst = append(dst, `,"function":{"arguments":`...)
		dst = appendLiteral(dst, partial)
		dst = append(dst, `}}]}`...)
		return t.close(dst, ""), nil
	}
	return dst, nil
}

// emptyArguments gives tool call n the arguments "{}" when its block
// stopped without a fragment: a tool that takes no input streams only an
// empty partial_json, and OpenAI (like the non-stream translation) sends
// "{}" for it, which clients parse; "" is not JSON.
func (t *StreamTranslator) emptyArguments(dst []byte, n int) []byte {
	if t.toolArgs[n] {
		return dst
	}
	t.toolArgs[n] = true
	dst = t.open(dst)
	dst = append(dst, `{"tool_calls":[{"index":`...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	dst = append(dst, `,"function":{"arguments":"{}"}}]}`...)
	return t.close(dst, "")
}

func (t *StreamTranslator) toolIndex(block int64) int {
	for n := len(t.tools) - 1; n >= 0; n-- {
		if t.tools[n] == block {
			return n
		}
	}
	return -1
}

// content emits one text chunk; empty text emits nothing.
func (t *StreamTranslator) content(dst, text []byte) ([]byte, error) {
	if !isString(text) || len(text) == 2 {
		return dst, nil
	}
	dst = t.open(dst)
	dst = append(dst, `{"content":`...)
	dst = appendLiteral(dst, text)
	dst = append(dst, '}')
	return t.close(dst, ""), nil
}

func (t *StreamTranslator) messageDelta(dst []byte, e event) ([]byte, error) {
	t.readUsage(e.usage)
	var stop []byte
	if m, ok := objectMembers(e.delta); ok {
		for k, v, ok := m.next(); ok; k, v, ok = m.next() {
			if string(k) == "stop_reason" {
				stop = v
			}
		}
	}
	if !isString(stop) || t.finished {
		return dst, nil // no stop reason yet, or already reported
	}
	return t.finish(dst, FinishReason(unquote(stop))), nil
}

func (t *StreamTranslator) finish(dst []byte, reason string) []byte {
	t.finished, t.reason = true, reason
	for n := range t.tools { // blocks whose content_block_stop never came
		dst = t.emptyArguments(dst, n)
	}
	dst = t.open(dst)
	dst = append(dst, `{}`...)
	return t.close(dst, reason)
}

// messageStop ends the stream: a finish chunk if message_delta brought no
// stop reason, the usage chunk when the client asked for it, then [DONE].
func (t *StreamTranslator) messageStop(dst []byte) []byte {
	if !t.finished {
		dst = t.finish(dst, "stop")
	}
	if t.includeUsage {
		u := t.usage.openAI()
		dst = append(dst, t.head...)
		dst = append(dst, `"choices":[],"usage":{"prompt_tokens":`...)
		dst = strconv.AppendInt(dst, u.PromptTokens, 10)
		dst = append(dst, `,"completion_tokens":`...)
		dst = strconv.AppendInt(dst, u.CompletionTokens, 10)
		dst = append(dst, `,"total_tokens":`...)
		dst = strconv.AppendInt(dst, u.TotalTokens, 10)
		if t.usage.CacheRead > 0 {
			dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
			dst = strconv.AppendInt(dst, t.usage.CacheRead, 10)
			dst = append(dst, '}')
		}
		dst = append(dst, "}}\n\n"...)
	}
	t.done = true
	return append(dst, "data: [DONE]\n\n"...)
}

// open starts a chunk up to its delta, preceded by the held-back role chunk
// when this is the first chunk of the stream.
func (t *StreamTranslator) open(dst []byte) []byte {
	if !t.roleSent {
		t.roleSent = true
		dst = t.open(dst)
		dst = append(dst, `{"role":"assistant","content":""}`...)
		dst = t.close(dst, "")
	}
	dst = append(dst, t.head...)
	return append(dst, `"choices":[{"index":0,"delta":`...)
}

// close ends a chunk opened by open; an empty reason is a null finish_reason.
// With include_usage every chunk but the last carries "usage":null, as
// OpenAI's do.
func (t *StreamTranslator) close(dst []byte, reason string) []byte {
	dst = append(dst, `,"logprobs":null,"finish_reason":`...)
	if reason == "" {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '"')
		dst = append(dst, reason...)
		dst = append(dst, '"')
	}
	dst = append(dst, "}]"...)
	if t.includeUsage {
		dst = append(dst, `,"usage":null`...)
	}
	return append(dst, "}\n\n"...)
}
