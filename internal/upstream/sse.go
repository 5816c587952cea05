package upstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"
)

// MaxEventBytes bounds one SSE event so a provider that never sends a blank
// line cannot grow the gateway's memory without limit.
const MaxEventBytes = 4 << 20

// readerPool holds 4 KiB readers: SSE events are small, and a longer line is
// read in pieces (ReadSlice's ErrBufferFull path) rather than held whole.
var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}

// EventReader splits an SSE body into raw events. Each event is returned as
// the exact bytes the provider sent, terminating blank line included, so the
// client receives it byte for byte.
type EventReader struct {
	br  *bufio.Reader
	buf []byte
}

// NewEventReader reads events from r. Call Close to recycle its buffer.
func NewEventReader(r io.Reader) *EventReader {
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(r)
	return &EventReader{br: br}
}

// Close returns the reader's buffer to the pool; the reader is unusable after.
func (r *EventReader) Close() {
	if r.br != nil {
		r.br.Reset(nil)
		readerPool.Put(r.br)
		r.br = nil
	}
}

// Next returns the next event. comment is true when the event holds only
// comment lines (": keep-alive"), which carry no data. The returned slice is
// valid until the next call. At a clean end of body it returns io.EOF; a body
// that ends inside an event returns io.ErrUnexpectedEOF.
func (r *EventReader) Next() (event []byte, comment bool, err error) {
	r.buf = r.buf[:0]
	comment = true
	for {
		line, err := r.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long line: keep reading it in pieces.
			r.buf = append(r.buf, line...)
			if len(r.buf) > MaxEventBytes {
				return nil, false, &ProtocolError{Err: errEventTooLarge}
			}
			comment = false
			continue
		}
		if err != nil {
			if err == io.EOF {
				if len(r.buf) == 0 && len(line) == 0 {
					return nil, false, io.EOF
				}
				return nil, false, io.ErrUnexpectedEOF
			}
			return nil, false, err
		}
		startOfLine := len(r.buf) == 0 || r.buf[len(r.buf)-1] == '\n'
		r.buf = append(r.buf, line...)
		if len(r.buf) > MaxEventBytes {
			return nil, false, &ProtocolError{Err: errEventTooLarge}
		}
		if !startOfLine {
			continue // tail of a long line
		}
		content := bytes.TrimRight(line, "\r\n")
		if len(content) == 0 {
			if len(r.buf) == len(line) {
				// A blank line before any field: nothing to dispatch.
				r.buf = r.buf[:0]
				continue
			}
			return r.buf, comment, nil
		}
		if content[0] != ':' {
			comment = false
		}
	}
}

// eventData returns the payload of the first data line of ev.
func eventData(ev []byte) []byte {
	for len(ev) > 0 {
		i := bytes.IndexByte(ev, '\n')
		line := ev
		if i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		line = bytes.TrimRight(line, "\r")
		if rest, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			return bytes.TrimPrefix(rest, []byte(" "))
		}
	}
	return nil
}

// Usage is the token accounting of a response.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

var usageKey = []byte(`"usage"`)

// EventUsage extracts usage from a chunk that carries it (OpenAI sends it in
// the last chunk when stream_options.include_usage is set). The cheap
// substring test keeps ordinary chunks from being decoded.
func EventUsage(ev []byte) (Usage, bool) {
	if !hasUsageObject(ev) {
		return Usage{}, false
	}
	return BodyUsage(eventData(ev))
}

// hasUsageObject reports whether b holds "usage" followed by an object.
// OpenAI sends "usage":null in every chunk when include_usage is set; only
// the last chunk's object is worth decoding.
func hasUsageObject(b []byte) bool {
	for {
		i := bytes.Index(b, usageKey)
		if i < 0 {
			return false
		}
		b = b[i+len(usageKey):]
		rest := bytes.TrimLeft(b, " \t")
		if r, ok := bytes.CutPrefix(rest, []byte(":")); ok {
			if r = bytes.TrimLeft(r, " \t"); len(r) > 0 && r[0] == '{' {
				return true
			}
		}
	}
}

// BodyUsage extracts usage from a chat completion JSON object.
func BodyUsage(b []byte) (Usage, bool) {
	var v struct {
		Usage *Usage `json:"usage"`
	}
	if json.Unmarshal(b, &v) != nil || v.Usage == nil {
		return Usage{}, false
	}
	return *v.Usage, true
}

// TailUsage extracts usage from the tail of a non-streaming body, where
// OpenAI-compatible providers put it; the body itself is never buffered whole.
func TailUsage(tail []byte) (Usage, bool) {
	i := bytes.LastIndex(tail, usageKey)
	if i < 0 {
		return Usage{}, false
	}
	rest := bytes.TrimLeft(tail[i+len(usageKey):], " \t\r\n")
	rest, ok := bytes.CutPrefix(rest, []byte(":"))
	if !ok {
		return Usage{}, false
	}
	var u *Usage
	if json.NewDecoder(bytes.NewReader(rest)).Decode(&u) != nil || u == nil {
		return Usage{}, false
	}
	return *u, true
}
