package cache

import (
	"encoding/json"
	"strings"
)

// replayMessages writes a stored message as Anthropic streams one:
// message_start (the message without its content, stop reason or final
// output count), each block's content_block_start, deltas and
// content_block_stop, message_delta (the stop reason, the final usage)
// and message_stop.
func replayMessages(body []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return nil, ErrNotStorable
	}
	var blocks []map[string]json.RawMessage
	if v, ok := m["content"]; ok && !isNull(v) && json.Unmarshal(v, &blocks) != nil {
		return nil, ErrNotStorable
	}
	var usage map[string]json.RawMessage
	if v, ok := m["usage"]; ok && !isNull(v) && json.Unmarshal(v, &usage) != nil {
		return nil, ErrNotStorable
	}
	out := make([]byte, 0, 2*len(body)+1024)

	start := newObject(nil)
	for _, k := range []string{"id", "type", "role", "model"} {
		if v, ok := m[k]; ok {
			start.raw(k, compact(v))
		}
	}
	start.raw("content", []byte("[]"))
	delta := newObject(nil)
	for _, k := range sortedKeys(m) {
		switch {
		case k == "id" || k == "type" || k == "role" || k == "model" || k == "content" || k == "usage":
		case strings.HasPrefix(k, "stop_"):
			// stop_reason, stop_sequence, stop_details: null at the
			// start, known at the end
			start.raw(k, []byte("null"))
			delta.raw(k, compact(m[k]))
		default:
			start.raw(k, compact(m[k]))
		}
	}
	if usage != nil {
		// As Anthropic: the input counts, and the output so far.
		u := newObject(nil)
		for _, k := range sortedKeys(usage) {
			if k == "output_tokens" {
				u.raw(k, []byte("1"))
			} else {
				u.raw(k, compact(usage[k]))
			}
		}
		start.raw("usage", u.end())
	}
	ev := newObject(nil)
	ev.str("type", "message_start")
	ev.raw("message", start.end())
	out = appendData(out, "message_start", ev.end())

	for i, bl := range blocks {
		out = replayBlock(out, i, bl)
	}

	md := newObject(nil)
	md.str("type", "message_delta")
	md.raw("delta", delta.end())
	if usage != nil {
		u := newObject(nil)
		u.members(usage)
		md.raw("usage", u.end())
	}
	out = appendData(out, "message_delta", md.end())
	return appendData(out, "message_stop", []byte(`{"type":"message_stop"}`)), nil
}

// replayBlock appends block i: its start holds the block with its text,
// thinking and signature empty and its input {}, which the deltas then
// give (citations one by one before the text).
func replayBlock(out []byte, i int, bl map[string]json.RawMessage) []byte {
	start := newObject(nil)
	if v, ok := bl["type"]; ok {
		start.raw("type", compact(v))
	}
	var cites, deltas [][]byte
	var texts [3][]string // text, thinking, signature pieces, in that order after citations
	for _, k := range sortedKeys(bl) {
		v := bl[k]
		switch k {
		case "type":
		case "text", "thinking", "signature":
			var s string
			if isNull(v) || json.Unmarshal(v, &s) != nil {
				start.raw(k, compact(v))
				continue
			}
			start.str(k, "")
			if s != "" {
				texts[map[string]int{"text": 0, "thinking": 1, "signature": 2}[k]] = pieces(s)
			}
		case "input":
			start.raw(k, []byte("{}"))
			if in := compact(v); string(in) != "{}" {
				d := newObject(nil)
				d.str("type", "input_json_delta")
				d.str("partial_json", string(in))
				deltas = append(deltas, d.end())
			}
		case "citations":
			var cs []json.RawMessage
			if isNull(v) || json.Unmarshal(v, &cs) != nil || len(cs) == 0 {
				start.raw(k, compact(v))
				continue
			}
			start.raw(k, []byte("[]")) // as Anthropic starts a block that cites
			for _, c := range cs {
				d := newObject(nil)
				d.str("type", "citations_delta")
				d.raw("citation", compact(c))
				cites = append(cites, d.end())
			}
		default:
			start.raw(k, compact(v))
		}
	}
	for j, kind := range []string{"text", "thinking", "signature"} {
		for _, p := range texts[j] {
			d := newObject(nil)
			d.str("type", kind+"_delta")
			d.str(kind, p)
			deltas = append(deltas, d.end())
		}
	}
	deltas = append(cites, deltas...)
	ev := newObject(nil)
	ev.str("type", "content_block_start")
	ev.int("index", int64(i))
	ev.raw("content_block", start.end())
	out = appendData(out, "content_block_start", ev.end())
	for _, d := range deltas {
		e := newObject(nil)
		e.str("type", "content_block_delta")
		e.int("index", int64(i))
		e.raw("delta", d)
		out = appendData(out, "content_block_delta", e.end())
	}
	stop := newObject(nil)
	stop.str("type", "content_block_stop")
	stop.int("index", int64(i))
	return appendData(out, "content_block_stop", stop.end())
}
