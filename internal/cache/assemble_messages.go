package cache

import (
	"encoding/json"
	"strings"
)

// messagesEvent is what the messages builder reads of an Anthropic event;
// its "type" names it, as the SDKs read it.
type messagesEvent struct {
	Type         string                     `json:"type"`
	Message      map[string]json.RawMessage `json:"message"`
	Index        *int                       `json:"index"`
	ContentBlock map[string]json.RawMessage `json:"content_block"`
	Delta        map[string]json.RawMessage `json:"delta"`
	Usage        map[string]json.RawMessage `json:"usage"`
}

// messagesBuilder assembles an Anthropic Messages stream into a message.
type messagesBuilder struct {
	a       *Assembler
	msg     map[string]json.RawMessage // message_start's message, message_delta's delta on it
	usage   map[string]json.RawMessage
	blocks  []*block
	stopped bool // message_stop arrived
}

// block is one content block: content_block_start's block and its deltas.
type block struct {
	start                     map[string]json.RawMessage
	text, thinking, signature strings.Builder
	input                     []byte // input_json_delta's pieces
	hasInput                  bool
	citations                 []json.RawMessage
}

func (b *messagesBuilder) event(_, data []byte) error {
	if b.stopped {
		return ErrNotStorable
	}
	var ev messagesEvent
	if json.Unmarshal(data, &ev) != nil {
		return ErrNotStorable
	}
	switch ev.Type {
	case "message_start":
		if b.msg != nil || ev.Message == nil {
			return ErrNotStorable
		}
		b.msg = ev.Message
		if u, ok := b.msg["usage"]; ok && !isNull(u) && json.Unmarshal(u, &b.usage) != nil {
			return ErrNotStorable
		}
		return b.a.grow(len(data))
	case "content_block_start":
		if b.msg == nil || ev.Index == nil || *ev.Index != len(b.blocks) || *ev.Index >= maxIndex || ev.ContentBlock == nil {
			return ErrNotStorable // blocks start in order, without gaps
		}
		b.blocks = append(b.blocks, &block{start: ev.ContentBlock})
		return b.a.grow(len(data))
	case "content_block_delta":
		if ev.Index == nil || *ev.Index < 0 || *ev.Index >= len(b.blocks) {
			return ErrNotStorable
		}
		return b.delta(b.blocks[*ev.Index], ev.Delta)
	case "content_block_stop":
		if ev.Index == nil || *ev.Index < 0 || *ev.Index >= len(b.blocks) {
			return ErrNotStorable
		}
	case "message_delta":
		if b.msg == nil {
			return ErrNotStorable
		}
		// Each member is the message's final value (stop_reason and
		// stop_sequence, usage's counts are totals): it replaces.
		for k, v := range ev.Delta {
			b.msg[k] = v
		}
		if b.usage == nil && ev.Usage != nil {
			b.usage = map[string]json.RawMessage{}
		}
		for k, v := range ev.Usage {
			b.usage[k] = v
		}
		return b.a.grow(len(data))
	case "message_stop":
		if b.msg == nil {
			return ErrNotStorable
		}
		b.stopped = true
	case "error":
		return ErrIncomplete
	}
	return nil // ping, and event types added later: nothing of the answer
}

// delta applies a content_block_delta, as the SDKs' accumulators do.
func (b *messagesBuilder) delta(bl *block, d map[string]json.RawMessage) error {
	var typ string
	if json.Unmarshal(d["type"], &typ) != nil {
		return ErrNotStorable
	}
	field := map[string]string{"text_delta": "text", "input_json_delta": "partial_json",
		"thinking_delta": "thinking", "signature_delta": "signature", "citations_delta": "citation"}[typ]
	v, ok := d[field]
	if field == "" || !ok {
		return ErrNotStorable
	}
	if err := b.a.grow(len(v)); err != nil {
		return err
	}
	if typ == "citations_delta" {
		bl.citations = append(bl.citations, compact(v))
		return nil
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return ErrNotStorable
	}
	switch typ {
	case "text_delta":
		bl.text.WriteString(s)
	case "input_json_delta":
		bl.input, bl.hasInput = append(bl.input, s...), true
	case "thinking_delta":
		bl.thinking.WriteString(s)
	case "signature_delta":
		bl.signature.WriteString(s)
	}
	return nil
}

// body writes the message: message_stop came.
func (b *messagesBuilder) body([]byte) ([]byte, error) {
	if !b.stopped {
		return nil, ErrIncomplete
	}
	o := newObject(nil)
	for _, k := range []string{"id", "type", "role", "model"} {
		if v, ok := b.msg[k]; ok {
			o.raw(k, compact(v))
		}
	}
	o.key("content")
	o.b = append(o.b, '[')
	for i, bl := range b.blocks {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		var err error
		if o.b, err = bl.appendTo(o.b); err != nil {
			return nil, err
		}
	}
	o.b = append(o.b, ']')
	for _, k := range sortedKeys(b.msg) {
		switch k {
		case "id", "type", "role", "model", "content", "usage":
			continue
		}
		o.raw(k, compact(b.msg[k]))
	}
	if b.usage != nil {
		u := newObject(nil)
		for _, k := range sortedKeys(b.usage) {
			u.raw(k, compact(b.usage[k]))
		}
		o.raw("usage", u.end())
	}
	return o.end(), nil
}

// appendTo appends the block with its deltas applied: text, thinking and
// signature after the start's own, the input the pieces make (JSON, or
// the stream is not stored), citations after the start's.
func (bl *block) appendTo(dst []byte) ([]byte, error) {
	if _, ok := bl.start["input"]; !ok && bl.hasInput {
		return nil, ErrNotStorable
	}
	strs := bl.strings()
	// A delta for a member the start did not have: the member, in its
	// place among the others.
	for _, k := range blockStrings {
		if _, ok := bl.start[k]; !ok && strs[k].Len() > 0 {
			bl.start[k] = json.RawMessage(`""`)
		}
	}
	if _, ok := bl.start["citations"]; !ok && len(bl.citations) > 0 {
		bl.start["citations"] = json.RawMessage("null")
	}
	o := newObject(dst)
	if v, ok := bl.start["type"]; ok {
		o.raw("type", compact(v))
	}
	for _, k := range sortedKeys(bl.start) {
		v := bl.start[k]
		switch k {
		case "type":
		case "text", "thinking", "signature":
			var s string
			if !isNull(v) && json.Unmarshal(v, &s) != nil {
				return nil, ErrNotStorable
			}
			o.str(k, s+strs[k].String())
		case "input":
			in := compact(v)
			if bl.hasInput {
				if in = compact(bl.input); !json.Valid(in) {
					return nil, ErrNotStorable // a tool call whose input is not JSON
				}
			}
			o.raw(k, in)
		case "citations":
			c, err := citations(v, bl.citations)
			if err != nil {
				return nil, err
			}
			o.raw(k, c)
		default:
			o.raw(k, compact(v))
		}
	}
	return o.end(), nil
}

// blockStrings are the string members of a block that deltas extend.
var blockStrings = []string{"text", "thinking", "signature"}

func (bl *block) strings() map[string]*strings.Builder {
	return map[string]*strings.Builder{"text": &bl.text, "thinking": &bl.thinking, "signature": &bl.signature}
}

// citations is the start's citations array (null or absent: none) with
// the streamed ones after it.
func citations(start json.RawMessage, more []json.RawMessage) ([]byte, error) {
	if len(more) == 0 {
		return compact(start), nil
	}
	var all []json.RawMessage
	if !isNull(start) && json.Unmarshal(start, &all) != nil {
		return nil, ErrNotStorable
	}
	b := []byte{'['}
	for i, c := range append(all, more...) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, compact(c)...)
	}
	return append(b, ']'), nil
}
