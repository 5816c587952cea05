package upstream

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"

	"github.com/llmgw/gateway/internal/jsontext"
)

// MaxEventBytes bounds one SSE event so a provider that never sends a blank
// line cannot grow the gateway's memory without limit.
const MaxEventBytes = 4 << 20

// initialEventBuffer is where an EventReader's buffer starts: chat chunks are
// a few hundred bytes, and the buffer grows (up to MaxEventBytes) for the
// rare large event. The transport already buffers the connection, so a
// second 4 KiB bufio.Reader per stream would only cost memory: 8 MiB with
// 2,000 streams open.
const initialEventBuffer = 512

// maxPooledBuffer bounds the buffers Close recycles, so one huge event does
// not pin its buffer in the pool.
const maxPooledBuffer = 16 << 10

var bufferPool = sync.Pool{New: func() any { b := make([]byte, initialEventBuffer); return &b }}

// EventReader splits an SSE body into raw events. Each event is returned as
// the exact bytes the provider sent, terminating blank line included, so the
// client receives it byte for byte.
type EventReader struct {
	r       io.Reader
	buf     *[]byte // pooled; (*buf)[start:end] is data read but not yet returned
	start   int     // first byte of the event being assembled
	pos     int     // first byte not yet split into lines
	end     int     // end of the data read
	comment bool    // every line of the event so far is a comment
	err     error   // the read error that ends the body, reported after its data
}

// NewEventReader reads events from r. Call Close to recycle its buffer.
func NewEventReader(r io.Reader) *EventReader {
	return &EventReader{r: r, buf: bufferPool.Get().(*[]byte)}
}

// Close returns the reader's buffer to the pool; the reader is unusable after.
func (r *EventReader) Close() {
	if r.buf != nil && cap(*r.buf) <= maxPooledBuffer {
		bufferPool.Put(r.buf)
	}
	r.buf, r.r = nil, nil
}

// Next returns the next event. comment is true when the event holds only
// comment lines (": keep-alive"), which carry no data. The returned slice is
// valid until the next call. At a clean end of body it returns io.EOF; a body
// that ends inside an event returns io.ErrUnexpectedEOF.
func (r *EventReader) Next() (event []byte, comment bool, err error) {
	r.start, r.comment = r.pos, true // the previous event is consumed
	for {
		buf := *r.buf
		for {
			i := bytes.IndexByte(buf[r.pos:r.end], '\n')
			if i < 0 {
				break
			}
			line := buf[r.pos : r.pos+i+1]
			r.pos += i + 1
			content := bytes.TrimRight(line, "\r\n")
			if len(content) == 0 {
				if r.pos-r.start == len(line) {
					// A blank line before any field: nothing to dispatch.
					r.start = r.pos
					continue
				}
				if r.pos-r.start > MaxEventBytes {
					return nil, false, &ProtocolError{Err: errEventTooLarge}
				}
				return buf[r.start:r.pos], r.comment, nil
			}
			if content[0] != ':' {
				r.comment = false
			}
		}
		if r.err != nil {
			if r.err != io.EOF {
				return nil, false, r.err
			}
			if r.end == r.start {
				return nil, false, io.EOF
			}
			return nil, false, io.ErrUnexpectedEOF
		}
		if r.end-r.start > MaxEventBytes {
			return nil, false, &ProtocolError{Err: errEventTooLarge}
		}
		r.fill()
	}
}

// Buffered reports whether a whole event is already in the buffer, so that
// Next will return it without reading. The relay flushes a stream only when
// nothing more is buffered: events a provider sent back to back (a last
// chunk, its usage and [DONE] often arrive in one read) reach the client in
// one write, and an event is never held waiting for one not yet read. It
// mirrors Next: blank lines before an event's first line are skipped.
func (r *EventReader) Buffered() bool {
	if r.buf == nil {
		return false
	}
	buf := (*r.buf)[:r.end]
	pos, started := r.pos, false
	for {
		i := bytes.IndexByte(buf[pos:], '\n')
		if i < 0 {
			return false
		}
		blank := len(bytes.TrimRight(buf[pos:pos+i+1], "\r\n")) == 0
		pos += i + 1
		if !blank {
			started = true
		} else if started {
			return true
		}
	}
}

// fill reads more of the body behind the pending event, compacting and
// growing the buffer as needed.
func (r *EventReader) fill() {
	buf := *r.buf
	if r.start > 0 {
		n := copy(buf, buf[r.start:r.end])
		r.pos -= r.start
		r.end, r.start = n, 0
	}
	if r.end == len(buf) {
		grown := make([]byte, min(2*len(buf), MaxEventBytes+1))
		copy(grown, buf[:r.end])
		if cap(buf) <= maxPooledBuffer {
			bufferPool.Put(r.buf)
		}
		r.buf, buf = &grown, grown
	}
	for range 100 {
		n, err := r.r.Read(buf[r.end:])
		r.end += n
		if err != nil {
			r.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.err = io.ErrNoProgress
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

// EventIsError reports whether an event's data is a JSON object whose first
// key is "error": how OpenAI-compatible providers report a failure inside a
// stream that already answered 200.
func EventIsError(ev []byte) bool {
	d := eventData(ev)
	i := jsontext.SkipSpace(d, 0)
	if i >= len(d) || d[i] != '{' {
		return false
	}
	i = jsontext.SkipSpace(d, i+1)
	return bytes.HasPrefix(d[i:], []byte(`"error"`))
}

// EventIsDone reports whether an event is the stream's terminating
// "data: [DONE]".
func EventIsDone(ev []byte) bool {
	return bytes.Equal(bytes.TrimSpace(eventData(ev)), []byte("[DONE]"))
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
// substring test keeps ordinary chunks from being decoded, and on the chunk
// that has one only the usage object itself is: the chunk is walked key by
// key at its top level, as encoding/json would pick its "usage" member, and
// the object alone is decoded (decodeUsage; decoding the whole last chunk
// with encoding/json was about 1.5% of a stream's CPU). On valid JSON the
// result is encoding/json's; a chunk that is not valid JSON past its usage
// object may still yield it.
func EventUsage(ev []byte) (Usage, bool) {
	u, _, ok := eventUsage(ev)
	return u, ok
}

// eventUsage is EventUsage that also reports whether the chunk had a usage
// object at all (found), so that one that does not decode is told from
// none.
func eventUsage(ev []byte) (u Usage, found, ok bool) {
	if !hasUsageObject(ev) {
		return Usage{}, false, false
	}
	val, ok := memberValue(eventData(ev), usageKey)
	if !ok || len(val) == 0 || val[0] != '{' {
		return Usage{}, false, false // absent, null or not an object
	}
	u, ok = decodeUsage(val)
	return u, true, ok
}

// memberValue returns the value of the last top-level member of the JSON
// object in b whose key is exactly key (quotes included), as encoding/json
// keeps the last of duplicate keys. false: b is not an object whose members
// can be walked, or has no such key. Every step moves past at least one
// byte, so any input ends the walk.
func memberValue(b, key []byte) ([]byte, bool) {
	_, vs, ve, ok := memberSpan(b, key)
	if !ok {
		return nil, false
	}
	return b[vs:ve], true
}

// memberSpan is the walk behind memberValue, which also gives where the member starts: the
// key's quote at ks, the value at b[vs:ve]. vs < ve whenever ok.
func memberSpan(b, key []byte) (ks, vs, ve int, ok bool) {
	i := jsontext.SkipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return 0, 0, 0, false
	}
	for i++; ; i++ { // i is past '{' or ','
		i = jsontext.SkipSpace(b, i)
		if i == len(b) || b[i] != '"' {
			return ks, vs, ve, ok && i < len(b) && b[i] == '}'
		}
		start := i
		end := jsontext.SkipString(b, i)
		k := b[i:end]
		i = jsontext.SkipSpace(b, end)
		if i == len(b) || b[i] != ':' {
			return 0, 0, 0, false
		}
		i = jsontext.SkipSpace(b, i+1)
		vend := jsontext.SkipValue(b, i)
		if bytes.Equal(k, key) && vend > i {
			ks, vs, ve, ok = start, i, vend, true
		}
		i = jsontext.SkipSpace(b, vend)
		if i == len(b) {
			return 0, 0, 0, false
		}
		switch b[i] {
		case ',':
			continue
		case '}':
			return ks, vs, ve, ok
		default:
			return 0, 0, 0, false
		}
	}
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
		// skipSpace is JSON's whitespace: a data line cannot hold '\n' but can
		// hold '\r', and BodyUsage accepts it around the colon.
		if j := jsontext.SkipSpace(b, 0); j < len(b) && b[j] == ':' {
			if j = jsontext.SkipSpace(b, j+1); j < len(b) && b[j] == '{' {
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
// The tail is whatever the provider sent, valid JSON or not, and is read
// without ever indexing past its end. As encoding/json would read the whole
// body, the last "usage" key decides: a later "usage":null means no usage.
// Nesting is not tracked, so a "usage" key inside a later object would be
// taken for the body's; no provider puts one there.
func TailUsage(tail []byte) (Usage, bool) {
	end := len(tail)
	for {
		i := bytes.LastIndex(tail[:end], usageKey)
		if i < 0 {
			return Usage{}, false
		}
		end = i
		val, ok := keyValue(tail, i)
		if !ok {
			continue
		}
		if len(val) == 0 || val[0] != '{' {
			return Usage{}, false
		}
		// SkipValue stops at the object's closing brace, or at the end of a
		// cut tail, which decodeUsage then refuses; no json.Decoder per
		// response.
		return decodeUsage(val[:jsontext.SkipValue(val, 0)])
	}
}

// keyValue returns what follows the colon after the "usage" at b[i], or false
// when that "usage" is not a key: its quote is escaped (a string value that
// ends in \"usage), or no colon follows (an array element, a value, a cut).
func keyValue(b []byte, i int) ([]byte, bool) {
	if i > 0 && b[i-1] == '\\' {
		return nil, false
	}
	j := jsontext.SkipSpace(b, i+len(usageKey))
	if j == len(b) || b[j] != ':' {
		return nil, false
	}
	return b[jsontext.SkipSpace(b, j+1):], true
}
