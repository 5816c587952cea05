package anthropicclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// StreamTranslator turns an OpenAI chat completions SSE stream into an
// Anthropic Messages SSE stream, one provider event at a time. It is not
// safe for concurrent use; one translator serves one stream.
//
// Content blocks are emitted strictly one after another (each block is
// stopped before the next starts) because the official SDKs' accumulators
// apply a delta to the last block started, whatever its index says. OpenAI
// streams tool calls one after another, which maps directly; a provider that
// interleaves the argument fragments of two calls gets an error, since the
// fragment of a stopped block cannot be delivered.
type StreamTranslator struct {
	model []byte // the client's model, as a JSON string literal

	started bool // message_start was written
	done    bool // message_stop was written, or the stream failed

	open      int // kind of the open block: noBlock, textBlockKind, toolBlockKind
	nextIndex int // index of the next block to start
	toolKey   int // key of the open tool call
	toolID    []byte
	toolKeys  []int // keys of every tool call started, in order
	synthetic int   // next key for calls that come without an index

	finish     []byte // finish_reason literal, when seen
	refusal    bool
	usage      Usage
	usageMsg   messageUsage
	haveUsage  bool
	pendingErr error
}

const (
	noBlock = iota
	textBlockKind
	toolBlockKind
)

// NewStreamTranslator starts a translation for a client that asked for
// model (echoed in message_start).
func NewStreamTranslator(model string) *StreamTranslator {
	return &StreamTranslator{model: appendString(nil, model), synthetic: 1 << 30}
}

// Started reports whether message_start was written: until then the handler
// may still answer with an HTTP error instead of an error event.
func (t *StreamTranslator) Started() bool { return t.started }

// Done reports whether the stream is over: message_stop was written, or an
// error was returned. Later events are ignored.
func (t *StreamTranslator) Done() bool { return t.done }

// Finished reports whether the provider said why the answer finished (a
// finish_reason): a stream that ends after it without [DONE] is whole, one
// that ends before it was cut.
func (t *StreamTranslator) Finished() bool { return t.finish != nil }

// FinishReason is the provider's finish_reason, "" before one was given.
// It allocates (the literal is kept as it came), so it is asked once, at
// the attempt's end, and only for its trace.
func (t *StreamTranslator) FinishReason() string {
	if !isString(t.finish) {
		return ""
	}
	return unquote(t.finish)
}

// Usage returns the usage the provider reported, if it reported any.
func (t *StreamTranslator) Usage() (Usage, bool) { return t.usage, t.haveUsage }

// Data translates the data of one provider SSE event (its data: lines
// joined, as upstream's one SSE reader parses them), appending Anthropic
// events to dst. "[DONE]" ends the message. A chunk carrying an error
// object returns a *ProviderError; a chunk that is not a JSON object, or a
// tool call fragment that cannot be placed, an error wrapping
// ErrBadResponse. After an error the translator is Done, and the handler
// should send ErrorEvent (or an HTTP error if nothing was Started).
// Whatever was appended to dst before the error is returned with it and
// should be sent first.
func (t *StreamTranslator) Data(dst, data []byte) (out []byte, err error) {
	return t.data(dst, data)
}

// Finish ends the message for a provider that stopped without [DONE]: it
// stops the open block and writes message_delta and message_stop, unless
// they were written already. Call it only for a stream that is Finished: one
// that never said why it finished was cut short, and its handler should send
// ErrorEvent instead (a tool_use over truncated arguments, or end_turn on a
// half answer, would be a fake clean end).
func (t *StreamTranslator) Finish(dst []byte) []byte {
	if t.done {
		return dst
	}
	if !t.started {
		dst = t.start(dst, nil)
	}
	dst = t.stopBlock(dst)
	dst = append(dst, `event: message_delta`+"\n"+`data: {"type":"message_delta","delta":{"stop_reason":`...)
	dst = appendString(dst, t.stopReason())
	dst = append(dst, `,"stop_sequence":null},"usage":{`...)
	if t.haveUsage {
		dst = append(dst, `"input_tokens":`...)
		dst = strconv.AppendInt(dst, t.usageMsg.InputTokens, 10)
		if c := t.usageMsg.CacheReadInputTokens; c != nil {
			dst = append(dst, `,"cache_read_input_tokens":`...)
			dst = strconv.AppendInt(dst, *c, 10)
		}
		dst = append(dst, ',')
	}
	dst = append(dst, `"output_tokens":`...)
	dst = strconv.AppendInt(dst, t.usageMsg.OutputTokens, 10)
	dst = append(dst, "}}\n\n"...)
	dst = append(dst, `event: message_stop`+"\n"+`data: {"type":"message_stop"}`+"\n\n"...)
	t.done = true
	return dst
}

func (t *StreamTranslator) stopReason() string {
	finish := ""
	if isString(t.finish) {
		finish = unquote(t.finish)
	}
	return stopReason(finish, len(t.toolKeys) > 0, t.refusal)
}

// data handles the payload of one event.
func (t *StreamTranslator) data(dst, data []byte) ([]byte, error) {
	if t.done {
		return dst, nil
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return dst, nil
	}
	if string(data) == "[DONE]" {
		return t.Finish(dst), nil
	}
	if data[0] != '{' || !json.Valid(data) {
		return t.fail(dst, fmt.Errorf("%w: stream chunk is not a JSON object", ErrBadResponse))
	}
	var id, choices, usage []byte
	it, _ := members(data)
	for {
		k, v, ok := it.member()
		if !ok {
			break
		}
		switch {
		case is(k, "choices"):
			choices = v
		case is(k, "usage"):
			usage = v
		case is(k, "id"):
			id = v
		case is(k, "error"):
			if !isNull(v) {
				return t.fail(dst, providerError(v))
			}
		}
	}
	if len(usage) > 0 && usage[0] == '{' {
		t.readUsage(usage)
	}
	if !t.started {
		dst = t.start(dst, id)
	}
	els, ok := elements(choices)
	if !ok {
		return dst, nil
	}
	for {
		c, ok := els.element()
		if !ok {
			return dst, nil
		}
		if dst, ok = t.choice(dst, c); !ok {
			return t.fail(dst, t.pendingErr)
		}
	}
}

func (t *StreamTranslator) fail(dst []byte, err error) ([]byte, error) {
	t.done = true
	return dst, err
}

// choice translates choices[i] when it is the first choice (index 0 or no
// index); the gateway never asks for n > 1.
func (t *StreamTranslator) choice(dst, c []byte) ([]byte, bool) {
	var delta, finish []byte
	it, ok := members(c)
	if !ok {
		return dst, true
	}
	for {
		k, v, ok := it.member()
		if !ok {
			break
		}
		switch {
		case is(k, "delta"):
			delta = v
		case is(k, "finish_reason"):
			finish = v
		case is(k, "index"):
			if parseCount(v) != 0 || (len(v) > 0 && v[0] == '-') {
				return dst, true
			}
		}
	}
	var content, refusal, calls, function []byte
	if it, ok := members(delta); ok {
		for {
			k, v, ok := it.member()
			if !ok {
				break
			}
			switch {
			case is(k, "content"):
				content = v
			case is(k, "tool_calls"):
				calls = v
			case is(k, "refusal"):
				refusal = v
			case is(k, "function_call"):
				function = v
			}
		}
	}
	if isString(content) {
		dst = t.text(dst, content)
	}
	if isString(refusal) && len(refusal) > 2 {
		t.refusal = true
		dst = t.text(dst, refusal)
	}
	if els, ok := elements(calls); ok {
		for {
			call, ok := els.element()
			if !ok {
				break
			}
			if dst, ok = t.toolCall(dst, call, false); !ok {
				return dst, false
			}
		}
	} else if len(function) > 0 && function[0] == '{' {
		if dst, ok = t.toolCall(dst, function, true); !ok {
			return dst, false
		}
	}
	if isString(finish) {
		t.finish = append(t.finish[:0], finish...)
	}
	return dst, true
}

// text appends a text fragment (a string literal), starting a text block if
// none is open.
func (t *StreamTranslator) text(dst, lit []byte) []byte {
	if len(lit) <= 2 {
		return dst
	}
	if t.open != textBlockKind {
		dst = t.stopBlock(dst)
		dst = t.startBlock(dst, textBlockKind)
		dst = append(dst, `{"type":"text","text":""}}`+"\n\n"...)
	}
	dst = t.deltaHead(dst)
	dst = append(dst, `{"type":"text_delta","text":`...)
	dst = append(dst, lit...)
	return append(dst, "}}\n\n"...)
}

// toolCall appends one tool_calls element (or a legacy function_call, which
// has no id or index and is always call 0).
func (t *StreamTranslator) toolCall(dst, call []byte, legacy bool) ([]byte, bool) {
	var index, id, name, args []byte
	fn := call
	if !legacy {
		fn = nil
		it, _ := members(call)
		for {
			k, v, ok := it.member()
			if !ok {
				break
			}
			switch {
			case is(k, "index"):
				index = v
			case is(k, "id"):
				id = v
			case is(k, "function"):
				fn = v
			}
		}
	}
	if it, ok := members(fn); ok {
		for {
			k, v, ok := it.member()
			if !ok {
				break
			}
			switch {
			case is(k, "name"):
				name = v
			case is(k, "arguments"):
				args = v
			}
		}
	}
	if !isString(id) || len(id) == 2 {
		id = nil
	}
	key := t.callKey(index, id, name, legacy)
	if t.open != toolBlockKind || key != t.toolKey {
		for _, k := range t.toolKeys {
			if k == key {
				if isNull(args) || string(args) == `""` {
					return dst, true // an empty fragment for a finished call carries nothing
				}
				t.pendingErr = fmt.Errorf("%w: arguments for tool call %d arrived after a later call began", ErrBadResponse, key)
				return dst, false
			}
		}
		dst = t.stopBlock(dst)
		dst = t.startBlock(dst, toolBlockKind)
		t.toolKey, t.toolKeys = key, append(t.toolKeys, key)
		t.toolID = append(t.toolID[:0], id...)
		dst = append(dst, `{"type":"tool_use","id":`...)
		if id != nil {
			dst = append(dst, id...)
		} else {
			dst = appendString(dst, randomID("toolu_"))
		}
		dst = append(dst, `,"name":`...)
		if isString(name) {
			dst = append(dst, name...)
		} else {
			dst = append(dst, `""`...)
		}
		dst = append(dst, `,"input":{}}}`+"\n\n"...)
	}
	switch {
	case isString(args) && len(args) > 2:
		dst = t.deltaHead(dst)
		dst = append(dst, `{"type":"input_json_delta","partial_json":`...)
		dst = append(dst, args...)
		dst = append(dst, "}}\n\n"...)
	case len(args) > 0 && args[0] == '{':
		// A server that sends the arguments as an object sends them whole.
		dst = t.deltaHead(dst)
		dst = append(dst, `{"type":"input_json_delta","partial_json":`...)
		var compact bytes.Buffer
		_ = json.Compact(&compact, args) // args passed json.Valid with its chunk
		dst = appendString(dst, compact.Bytes())
		dst = append(dst, "}}\n\n"...)
	}
	return dst, true
}

// callKey identifies the tool call a fragment belongs to: its index when it
// has one (OpenAI always sends it). Without one, a fragment continues the
// open call unless it says otherwise: by bringing a different id, or, having
// no id, by bringing a name, which only a call's first fragment carries.
func (t *StreamTranslator) callKey(index, id, name []byte, legacy bool) int {
	if legacy {
		return 0
	}
	if len(index) > 0 && index[0] >= '0' && index[0] <= '9' {
		return int(min(parseCount(index), 1<<29))
	}
	if t.open == toolBlockKind {
		if id != nil && bytes.Equal(id, t.toolID) {
			return t.toolKey
		}
		if id == nil && (!isString(name) || len(name) == 2) {
			return t.toolKey
		}
	}
	t.synthetic++
	return t.synthetic
}

func (t *StreamTranslator) readUsage(v []byte) {
	var prompt, completion, total, cached, reasoning int64
	invalid := false
	count := func(v []byte) int64 {
		n, ok := strictCount(v)
		invalid = invalid || !ok
		return n
	}
	detail := func(v []byte, name string) (n int64) {
		d, ok := members(v)
		if !ok {
			return 0 // not an object: costs only its count
		}
		for {
			k, v, ok := d.member()
			if !ok {
				return n
			}
			if is(k, name) {
				n = count(v)
			}
		}
	}
	it, _ := members(v)
	for {
		k, v, ok := it.member()
		if !ok {
			break
		}
		switch {
		case is(k, "prompt_tokens"):
			prompt = count(v)
		case is(k, "completion_tokens"):
			completion = count(v)
		case is(k, "total_tokens"):
			total = count(v)
		case is(k, "prompt_tokens_details"):
			cached = detail(v, "cached_tokens")
		case is(k, "completion_tokens_details"):
			reasoning = detail(v, "reasoning_tokens")
		}
	}
	t.usage, t.usageMsg = usageFrom(prompt, completion, total, cached, reasoning)
	t.usage.Invalid = invalid
	t.haveUsage = true
}

// strictCount reads a usage count: a whole number (at most 1<<62, far past
// any the gateway accepts), or null (0). A sign, a fraction, an exponent
// or any other value is not ok: parseCount would read "-5" as 0 and "1.5"
// as 1, and the usage would pass for a true one.
func strictCount(v []byte) (int64, bool) {
	if isNull(v) {
		return 0, true
	}
	if len(v) == 0 {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	return parseCount(v), true
}

// start writes message_start. The chunk id becomes the message id.
func (t *StreamTranslator) start(dst, id []byte) []byte {
	t.started = true
	dst = append(dst, `event: message_start`+"\n"+`data: {"type":"message_start","message":{"id":`...)
	dst = appendString(dst, messageID(unquote(id)))
	dst = append(dst, `,"type":"message","role":"assistant","model":`...)
	dst = append(dst, t.model...)
	dst = append(dst, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	dst = strconv.AppendInt(dst, t.usageMsg.InputTokens, 10)
	dst = append(dst, `,"output_tokens":0}}}`+"\n\n"...)
	return dst
}

// startBlock writes the head of content_block_start, up to the block.
func (t *StreamTranslator) startBlock(dst []byte, kind int) []byte {
	t.open = kind
	dst = append(dst, `event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":`...)
	dst = strconv.AppendInt(dst, int64(t.nextIndex), 10)
	return append(dst, `,"content_block":`...)
}

// deltaHead writes the head of content_block_delta for the open block.
func (t *StreamTranslator) deltaHead(dst []byte) []byte {
	dst = append(dst, `event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":`...)
	dst = strconv.AppendInt(dst, int64(t.nextIndex), 10)
	return append(dst, `,"delta":`...)
}

// stopBlock stops the open block, if any.
func (t *StreamTranslator) stopBlock(dst []byte) []byte {
	if t.open == noBlock {
		return dst
	}
	dst = append(dst, `event: content_block_stop`+"\n"+`data: {"type":"content_block_stop","index":`...)
	dst = strconv.AppendInt(dst, int64(t.nextIndex), 10)
	dst = append(dst, "}\n\n"...)
	t.open = noBlock
	t.nextIndex++
	return dst
}
