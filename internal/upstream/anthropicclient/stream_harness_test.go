package anthropicclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// frame is one Anthropic SSE event as the translator wrote it.
type frame struct {
	Event string
	Data  map[string]any
}

// parseFrames checks that b is nothing but well-formed frames, each exactly
// "event: NAME\ndata: <JSON object>\n\n" with data.type equal to NAME, and
// returns them.
func parseFrames(b []byte) ([]frame, error) {
	var out []frame
	for len(b) > 0 {
		end := bytes.Index(b, []byte("\n\n"))
		if end < 0 {
			return out, fmt.Errorf("frame %d not terminated by a blank line: %q", len(out), b)
		}
		f := b[:end]
		b = b[end+2:]
		name, rest, ok := bytes.Cut(f, []byte("\n"))
		if !ok || !bytes.HasPrefix(name, []byte("event: ")) || !bytes.HasPrefix(rest, []byte("data: ")) {
			return out, fmt.Errorf("frame %d malformed: %q", len(out), f)
		}
		data := rest[len("data: "):]
		if bytes.ContainsAny(data, "\r\n") {
			return out, fmt.Errorf("frame %d data spans lines: %q", len(out), data)
		}
		if !json.Valid(data) {
			return out, fmt.Errorf("frame %d data is not JSON: %q", len(out), data)
		}
		var obj map[string]any
		if err := json.Unmarshal(data, &obj); err != nil {
			return out, fmt.Errorf("frame %d data is not an object: %q", len(out), data)
		}
		ev := string(name[len("event: "):])
		if obj["type"] != ev {
			return out, fmt.Errorf("frame %d: event %q carries type %v", len(out), ev, obj["type"])
		}
		out = append(out, frame{Event: ev, Data: obj})
	}
	return out, nil
}

// splitEvents splits a provider's SSE body into events, each with its
// terminating blank line, LF or CRLF, as the upstream EventReader returns
// them.
func splitEvents(b []byte) [][]byte {
	var out [][]byte
	start := 0
	for i := 0; i < len(b); {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			break
		}
		line := bytes.TrimSuffix(b[i:i+j], []byte("\r"))
		i += j + 1
		if len(line) == 0 {
			if i-start > j+1 {
				out = append(out, b[start:i])
			}
			start = i
		}
	}
	if start < len(b) {
		out = append(out, b[start:])
	}
	return out
}

// checkOrder asserts the order the official SDKs rely on: message_start
// first; blocks started with consecutive indexes from 0, one at a time
// (the Go SDK's accumulator applies a delta to the last block started),
// each delta and stop naming the open block; then exactly one message_delta
// with every block stopped, and message_stop last.
func checkOrder(frames []frame) error {
	if len(frames) < 3 || frames[0].Event != "message_start" {
		return fmt.Errorf("stream does not begin with message_start")
	}
	if frames[len(frames)-1].Event != "message_stop" || frames[len(frames)-2].Event != "message_delta" {
		return fmt.Errorf("stream does not end with message_delta, message_stop")
	}
	open, next := -1, 0
	for i, f := range frames[1 : len(frames)-2] {
		idx := -2
		if v, ok := f.Data["index"].(float64); ok {
			idx = int(v)
		}
		switch f.Event {
		case "content_block_start":
			if open >= 0 || idx != next {
				return fmt.Errorf("frame %d: block %d starts while %d is open (next %d)", i+1, idx, open, next)
			}
			open = idx
		case "content_block_delta":
			if open < 0 || idx != open {
				return fmt.Errorf("frame %d: delta for block %d, open %d", i+1, idx, open)
			}
		case "content_block_stop":
			if open < 0 || idx != open {
				return fmt.Errorf("frame %d: stop for block %d, open %d", i+1, idx, open)
			}
			open, next = -1, next+1
		default:
			return fmt.Errorf("frame %d: unexpected %s in the body of the stream", i+1, f.Event)
		}
	}
	if open >= 0 {
		return fmt.Errorf("block %d never stopped", open)
	}
	return nil
}

// accumulate rebuilds the final message the way anthropic-sdk-go's
// Message.Accumulate does: message_start's message, blocks appended on
// start, deltas applied to the last block, partial_json replacing the
// initial {} and then appended, message_delta setting stop_reason and
// output_tokens (and input_tokens when present, as newer SDKs do). Tool
// inputs must then parse as JSON objects.
func accumulate(frames []frame) (map[string]any, error) {
	var msg map[string]any
	var content []map[string]any
	var inputs []string
	for _, f := range frames {
		switch f.Event {
		case "message_start":
			msg = f.Data["message"].(map[string]any)
		case "content_block_start":
			cb := f.Data["content_block"].(map[string]any)
			content = append(content, cb)
			in, _ := json.Marshal(cb["input"])
			inputs = append(inputs, string(in))
		case "content_block_delta":
			if len(content) == 0 {
				return nil, fmt.Errorf("delta without a block")
			}
			last := len(content) - 1
			d := f.Data["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				content[last]["text"] = content[last]["text"].(string) + d["text"].(string)
			case "input_json_delta":
				if p := d["partial_json"].(string); p != "" {
					if inputs[last] == "{}" {
						inputs[last] = p
					} else {
						inputs[last] += p
					}
				}
			default:
				return nil, fmt.Errorf("unknown delta %v", d["type"])
			}
		case "message_delta":
			d := f.Data["delta"].(map[string]any)
			msg["stop_reason"], msg["stop_sequence"] = d["stop_reason"], d["stop_sequence"]
			u := f.Data["usage"].(map[string]any)
			mu := msg["usage"].(map[string]any)
			for k, v := range u {
				mu[k] = v
			}
		}
	}
	if msg == nil {
		return nil, fmt.Errorf("no message_start")
	}
	blocks := make([]any, len(content))
	for i, cb := range content {
		if cb["type"] == "tool_use" {
			var in map[string]any
			if err := json.Unmarshal([]byte(inputs[i]), &in); err != nil {
				return nil, fmt.Errorf("block %d input %q: %v", i, inputs[i], err)
			}
			cb["input"] = in
		}
		blocks[i] = cb
	}
	msg["content"] = blocks
	return msg, nil
}

// feed gives the translator the events of raw provider bytes, parsed the
// simplest way the SSE rules allow (line ends normalized to "\n", events
// split at blank lines, comments skipped, one space after the colon
// removed, data lines joined with "\n"): upstream's one SSE reader parses
// them so in production, and its tests hold it to these rules.
func feed(tr *StreamTranslator, dst, raw []byte) ([]byte, error) {
	for _, ev := range sseEvents(raw) {
		var err error
		if dst, err = tr.Data(dst, ev.data); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

type sseEvent struct{ name, data []byte }

func sseEvents(raw []byte) []sseEvent {
	s := strings.ReplaceAll(strings.ReplaceAll(string(raw), "\r\n", "\n"), "\r", "\n")
	var out []sseEvent
	for _, block := range strings.Split(s, "\n\n") {
		var ev sseEvent
		var data []string
		for _, line := range strings.Split(block, "\n") {
			if line == "" || line[0] == ':' {
				continue
			}
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				ev.name = []byte(value)
			case "data":
				data = append(data, value)
			}
		}
		if data != nil {
			ev.data = []byte(strings.Join(data, "\n"))
			out = append(out, ev)
		}
	}
	return out
}
