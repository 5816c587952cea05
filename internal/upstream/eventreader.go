package upstream

import (
	"bytes"
	"io"
	"strconv"
	"sync"
)

// The one SSE reader of the gateway. Every provider stream, whatever its
// format (OpenAI chat and Responses, Anthropic Messages, and the formats
// ahead, Gemini's SSE among them), is split into events by EventReader and
// its fields read by ParseEvent, so that every format and translator sees
// the same events: four parsers with four line-ending rules would each
// accept a slightly different stream.
//
// It implements the WHATWG event-stream interpretation
// (https://html.spec.whatwg.org/multipage/server-sent-events.html):
//   - a line ends at "\n", "\r\n" or a bare "\r"; a "\r" that is the last
//     byte read so far is not taken for a line end before the next byte
//     (or the body's end) says whether it is half of a "\r\n", so that a
//     "\r\n" cut by two reads is one line end and an event's bytes never
//     depend on how reads cut the body. The price falls on a stream that
//     ends its events with a bare "\r" (no provider is known to): such an
//     event waits for the next byte;
//   - a blank line ends an event; blank lines before an event's first line
//     are dropped;
//   - a line starting with ':' is a comment;
//   - "field:value", one space after the colon removed; a line without a
//     colon is a field with an empty value;
//   - event: sets the event's name, data: appends a line of data (several
//     are joined with "\n"), id: (without NUL) and retry: (ASCII digits
//     only) are kept; the last of each wins, other fields are ignored;
//   - a UTF-8 byte order mark at the very start of the stream is skipped.
//
// Unlike a browser it keeps each event's raw bytes: a pass-through stream
// relays them to the client unchanged.

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

var utf8BOM = []byte("\xef\xbb\xbf")

// EventReader splits an SSE body into raw events. Each event is returned as
// the exact bytes the provider sent, from its first line through the line
// end of the blank line that ends it, so the client receives it byte for
// byte; ParseEvent reads its fields. Where reads split the body makes no
// difference to the events.
type EventReader struct {
	r   io.Reader
	buf *[]byte // pooled; (*buf)[start:end] is data read but not yet returned
	cur cursor
	end int   // end of the data read
	bom bool  // the body's start may still be a byte order mark
	err error // the read error that ends the body, reported after its data
}

// cursor is where the splitting of a buffer stands: the event being
// assembled starts at start, and pos is the first byte not yet split into
// lines.
type cursor struct {
	start, pos int
	comment    bool // every line of the event so far is a comment
}

// NewEventReader reads events from r. Call Close to recycle its buffer.
func NewEventReader(r io.Reader) *EventReader {
	return &EventReader{r: r, buf: bufferPool.Get().(*[]byte), bom: true}
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
	r.cur = cursor{start: r.cur.pos, pos: r.cur.pos, comment: true} // the previous event is consumed
	for {
		buf := (*r.buf)[:r.end]
		if r.bom {
			rest := buf[r.cur.pos:]
			if len(rest) < len(utf8BOM) && bytes.HasPrefix(utf8BOM, rest) && r.err == nil {
				r.fill()
				continue
			}
			r.bom = false
			if bytes.HasPrefix(rest, utf8BOM) {
				r.cur.pos += len(utf8BOM)
				r.cur.start = r.cur.pos
			}
		}
		if r.cur.advance(buf, r.err != nil) {
			if r.cur.pos-r.cur.start > MaxEventBytes {
				return nil, false, &ProtocolError{Err: errEventTooLarge}
			}
			return buf[r.cur.start:r.cur.pos], r.cur.comment, nil
		}
		if r.err != nil {
			if r.err != io.EOF {
				return nil, false, r.err
			}
			if r.end == r.cur.start {
				return nil, false, io.EOF
			}
			return nil, false, io.ErrUnexpectedEOF
		}
		if r.end-r.cur.start > MaxEventBytes {
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
// splits lines as Next does, on a copy of its cursor.
func (r *EventReader) Buffered() bool {
	if r.buf == nil || r.bom {
		return false // before the first Next, nothing was read
	}
	c := cursor{start: r.cur.pos, pos: r.cur.pos, comment: true}
	return c.advance((*r.buf)[:r.end], r.err != nil)
}

// advance splits b into lines from c.pos until a blank line ends the event
// being assembled (true: b[c.start:c.pos] is the event) or no whole line is
// left (false). A blank line before the event's first line is dropped.
// eof: b is all there will be, so a '\r' at its end is a line end.
func (c *cursor) advance(b []byte, eof bool) bool {
	for {
		n, size := lineEnd(b[c.pos:], eof)
		if size == 0 {
			return false
		}
		line := b[c.pos : c.pos+n]
		c.pos += n + size
		switch {
		case n > 0:
			c.comment = c.comment && line[0] == ':'
		case c.pos-size == c.start:
			c.start = c.pos // a blank line before any field: nothing to dispatch
		default:
			return true
		}
	}
}

// lineEnd finds the first line of b: b[:n] is the line, b[n:n+size] its line
// end ("\n", "\r\n" or "\r"). size is 0 when b holds no whole line: no line
// end, or only a '\r' at the very end of b, which may be half of a "\r\n"
// unless eof says that nothing follows b. Two IndexByte calls beat one
// IndexAny: the line ends at the first '\n', or earlier at a '\r'.
func lineEnd(b []byte, eof bool) (n, size int) {
	n = bytes.IndexByte(b, '\n')
	if n < 0 {
		n = len(b)
	} else {
		size = 1
	}
	cr := bytes.IndexByte(b[:n], '\r')
	if cr < 0 {
		return n, size
	}
	switch {
	case cr+1 < len(b) && b[cr+1] == '\n':
		return cr, 2
	case cr+1 < len(b) || eof:
		return cr, 1
	}
	return cr, 0
}

// fill reads more of the body behind the pending event, compacting and
// growing the buffer as needed.
func (r *EventReader) fill() {
	buf := *r.buf
	if r.cur.start > 0 {
		n := copy(buf, buf[r.cur.start:r.end])
		r.cur.pos -= r.cur.start
		r.end, r.cur.start = n, 0
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

// EventFields are the fields of one SSE event as the WHATWG interpretation
// reads them. The slices point into the event's bytes, but Data when it was
// joined from several data: lines.
type EventFields struct {
	// Name is the event: field's value, empty without one (a browser's
	// "message").
	Name []byte
	// Data is the data: lines' values joined with "\n"; HasData reports
	// whether there was any data: line (an event without one is not
	// dispatched by a browser).
	Data    []byte
	HasData bool
	// Joined: Data is a copy, joined from several lines, not a subslice of
	// the event.
	Joined bool
	// ID is the id: field's value; HasID reports whether the event had one
	// (a value holding NUL is ignored, as the spec says).
	ID    []byte
	HasID bool
	// Retry is the retry: field's value in milliseconds, -1 without a valid
	// one (ASCII digits only).
	Retry int64
}

// ParseEvent reads the fields of the first event in ev: an event as
// EventReader returns it (an event not ended by a blank line ends with ev).
// A Data joined from several lines is a new slice; a single data: line
// costs no allocation.
func ParseEvent(ev []byte) EventFields {
	f, _, _ := nextEvent(ev, nil)
	return f
}

// nextEvent reads the first event of b (ParseEvent), returning the bytes
// after it. scratch is reused to join several data: lines, and returned for
// the next call.
func nextEvent(b, scratch []byte) (f EventFields, rest, scratchOut []byte) {
	f.Retry = -1
	started := false
	for len(b) > 0 {
		n, size := lineEnd(b, true)
		if size == 0 {
			n = len(b) // the last line, without its line end
		}
		line := b[:n]
		b = b[n+size:]
		if n == 0 {
			if started {
				return f, b, scratch
			}
			continue
		}
		started = true
		if line[0] == ':' {
			continue // a comment
		}
		name, value := line, []byte(nil)
		if c := bytes.IndexByte(line, ':'); c >= 0 {
			name, value = line[:c], line[c+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(name) {
		case "event":
			f.Name = value
		case "data":
			switch {
			case !f.HasData:
				f.Data, f.HasData = value, true
			case !f.Joined:
				scratch = append(append(append(scratch[:0], f.Data...), '\n'), value...)
				f.Data, f.Joined = scratch, true
			default:
				scratch = append(append(scratch, '\n'), value...)
				f.Data = scratch
			}
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				f.ID, f.HasID = value, true
			}
		case "retry":
			if ms, ok := retryValue(value); ok {
				f.Retry = ms
			}
		}
	}
	return f, nil, scratch
}

// retryValue is a retry: field's value: ASCII digits only, as the spec
// says (strconv alone would take a sign).
func retryValue(v []byte) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	ms, err := strconv.ParseInt(string(v), 10, 64)
	return ms, err == nil
}

// eventData is the data of the first event in ev.
func eventData(ev []byte) []byte { return ParseEvent(ev).Data }
