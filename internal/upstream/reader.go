package upstream

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/llmgw/gateway/internal/jsontext"
)

// Reader reads one attempt's answer for the client: it turns provider
// events (or a whole body) into the bytes the client gets, tells an error
// event and the stream's last event, and keeps the usage. Pass-through
// readers return each event itself, without a copy; translating ones append
// to the dst they are given.
type Reader interface {
	// Event reads one stream event (comments included). committed reports
	// whether client bytes went out already: before, an error event is
	// returned as *EventError (the loop fails over); after, a pass-through
	// reader relays it like any event. Empty out: nothing for the client
	// (yet). On error, out holds what the events before the failure made.
	Event(dst, ev []byte, committed bool) (out []byte, err error)
	// Done reports whether the stream's last event was read: [DONE]
	// (OpenAI chat), message_stop (Anthropic), response.completed,
	// response.incomplete or response.failed (Responses).
	Done() bool
	// End is called when the body ends cleanly (at an event boundary)
	// before Done. A stream cut short returns ErrEndedEarly, so that it
	// fails as a cut and is never relayed as a clean end (STYLE habit 6);
	// an answer that is whole though its terminator is missing (an OpenAI
	// chat stream that gave its finish_reason) returns what completes it
	// for the client: nothing when passed through, the translated close
	// otherwise.
	End(dst []byte) ([]byte, error)
	// Usage is the usage read from the stream or the whole body; a usage
	// that fails CheckUsage (or cannot be read) is not reported, and
	// UsageError says why.
	Usage() (Usage, bool)
	UsageError() error
	// Whole reports whether a non-streaming body must be read whole and
	// given to Body; otherwise it is relayed in chunks and its usage read
	// from its tail with TailUsage.
	Whole() bool
	Body(body []byte) ([]byte, error)
	TailUsage(tail []byte) (Usage, bool)
	// FinishReasons is why the answer ended, as OpenAI finish_reason
	// values, one per choice; nil when it never said (a cut, a failure).
	// head and tail are a non-stream body's first bytes and its last, as
	// the attempt kept them. It allocates, so it is asked only for a
	// traced attempt, at its end (finish.go).
	FinishReasons(head, tail []byte) []string
}

// EventError is an error event of a stream (an OpenAI error object, an
// Anthropic or Responses `event: error`); Data is the event's data, for the
// record. Relayed means the event itself went to the client, already in its
// format, so the stream needs no error frame of the gateway's after it.
type EventError struct {
	Data    string
	Relayed bool
}

func (e *EventError) Error() string { return "error event: " + e.Data }

// ErrEndedEarly is a stream whose body ended cleanly before its format's
// last event: a cut that looks like a clean end. Readers return it from End
// wrapped in a *ProtocolError, which the loop classifies like any cut.
var ErrEndedEarly = errors.New("stream ended before its last event")

// ErrMalformedEvent is a stream event whose data is not a JSON object (nor
// OpenAI's [DONE]): a provider's broken or truncated answer, which no
// client could parse. Readers return it wrapped in a *ProtocolError: before the commit
// point the attempt fails over, after it the stream ends with the error
// frame instead of relaying it.
var ErrMalformedEvent = errors.New("stream event is not JSON")

// endedEarly is End's error for a stream cut short.
func endedEarly() error { return &ProtocolError{Err: ErrEndedEarly} }

// MaxWholeBody bounds a non-streaming body read whole for translation.
const MaxWholeBody = 16 << 20

type passKind uint8

const (
	passChat       passKind = iota // OpenAI chat completions
	passMessages                   // Anthropic messages, to an Anthropic client
	passResponses                  // OpenAI Responses
	passEmbeddings                 // OpenAI embeddings (never streamed)
)

// PassReader relays a provider's answer byte for byte, reading its usage,
// its error events and its last event.
type PassReader struct {
	kind passKind
	// hide: the gateway asked for the usage chunk (asksUsage), so the
	// client gets the chunks without it (hideUsage).
	hide bool
	usageCheck
	usage    Usage
	has      bool
	done     bool
	finished bool      // chat: a chunk gave a finish_reason
	reason   rawReason // why the answer ended, as the provider said it (finish.go)
	scratch  []byte    // joins an event's data lines when it has several
}

// maxDoneEvent bounds the events tested for [DONE]: "data: [DONE]\n\n" is
// 14 bytes, and a longer event (every chunk) skips the test.
const maxDoneEvent = 32

// Event implements Reader. ev is one event, as EventReader returns it; its
// fields are ParseEvent's.
func (p *PassReader) Event(dst, ev []byte, committed bool) ([]byte, error) {
	var f EventFields
	f, _, p.scratch = nextEvent(ev, p.scratch)
	d := f.Data
	if len(d) > 0 && !objectShaped(d) && !isDoneData(d) {
		return nil, &ProtocolError{Err: ErrMalformedEvent}
	}
	if p.kind == passChat {
		// The hot path: a prefix test for an error object (a few
		// nanoseconds), [DONE] only on short events, a finish_reason
		// until one was seen, and a substring test for usage per chunk.
		if isErrorData(d) {
			return passError(d, ev, committed)
		}
		if len(ev) <= maxDoneEvent {
			p.done = p.done || isDoneData(d)
		} else if !p.finished {
			p.finished = p.reason.set(finishValue(d, finishKey))
		}
		if p.hide {
			return p.hideUsage(dst, ev, f), nil
		}
		if u, found, ok := dataUsage(d); ok {
			p.usage, p.has = u, true
		} else if found {
			p.unreadable()
		}
		return ev, nil
	}
	switch p.kind {
	case passMessages:
		switch string(f.Name) {
		case "error":
			// After the commit point the client gets the provider's own
			// error event, and the stream ends failed: an Anthropic stream
			// says it broke this way rather than by being cut.
			return passError(d, ev, committed)
		case "message_delta":
			p.reason.set(finishValue(d, stopKey))
			p.messagesUsage(d)
		case "message_start":
			p.messagesUsage(d)
		case "message_stop":
			p.done = true
		}
	case passResponses:
		switch string(f.Name) {
		case "error", "response.failed":
			p.done = true
			return passError(d, ev, committed)
		case "response.completed", "response.incomplete":
			p.responseReason(f.Name, d)
			var v struct {
				Response struct {
					Usage *wideUsage `json:"usage"`
				} `json:"response"`
			}
			if json.Unmarshal(d, &v) == nil && v.Response.Usage != nil {
				if err := v.Response.Usage.sane(); err != nil {
					p.fault(err)
				}
				p.usage, p.has = v.Response.Usage.usage(), true
			} else if hasUsageObject(d) {
				p.unreadable()
			}
			p.done = true
		}
	}
	return ev, nil
}

// hideUsage reads the usage the gateway asked for and takes it out of a
// chat chunk, so that the client gets exactly the bytes it would have got
// without include_usage: the top-level "usage":null OpenAI adds to every
// chunk is cut out with its comma, and the usage chunk (empty choices) is
// dropped whole; a usage object on a chunk with choices is cut out like
// null. ev is the event reader's own buffer, valid until the next event, so
// the cut is made in place, without a copy. A chunk without "usage" costs
// one substring test, as EventUsage does. A chunk whose data came in
// several lines (f.Joined) is cut in the joined copy and written to dst as
// data lines.
func (p *PassReader) hideUsage(dst, ev []byte, f EventFields) []byte {
	d := f.Data
	a, b, drop := p.usageCut(d)
	switch {
	case drop:
		return ev[:0] // the usage chunk: not for this client
	case a == b:
		return ev
	case f.Joined:
		n := copy(d[a:], d[b:])
		return appendDataLines(dst, d[:a+n])
	}
	// d is a subslice of ev, so their capacities tell where d starts.
	off := cap(ev) - cap(d)
	n := copy(ev[off+a:], ev[off+b:])
	return ev[:off+a+n]
}

// usageCut finds what hideUsage cuts out of a chunk's data: d[a:b] (a == b:
// nothing), or the whole chunk (drop), reading the usage on the way.
func (p *PassReader) usageCut(d []byte) (a, b int, drop bool) {
	if bytes.HasSuffix(d, usageNullLast) {
		// OpenAI's chunk: the member is the last of the top-level object
		// (in JSON that ends with this closing brace, it can be nothing
		// else), and is cut without walking the chunk.
		return len(d) - len(usageNullLast), len(d) - 1, false
	}
	if !bytes.Contains(d, usageKey) {
		return 0, 0, false
	}
	ks, vs, ve, ok := memberSpan(d, usageKey)
	if !ok {
		return 0, 0, false
	}
	if d[vs] == '{' {
		if u, ok := decodeUsage(d[vs:ve]); ok {
			p.usage, p.has = u, true
		} else {
			p.unreadable()
		}
		if c, ok := memberValue(d, choicesKey); ok && emptyArray(c) {
			return 0, 0, true
		}
	} else if string(d[vs:ve]) != "null" {
		return 0, 0, false
	}
	a, b = ks, ve
	if j := skipSpaceBack(d, a); j > 0 && d[j-1] == ',' {
		a = j - 1
	} else if k := jsontext.SkipSpace(d, b); k < len(d) && d[k] == ',' {
		b = jsontext.SkipSpace(d, k+1)
	}
	return a, b, false
}

// appendDataLines appends an event whose data is d: one data: line per
// line of d.
func appendDataLines(dst, d []byte) []byte {
	for {
		i := bytes.IndexByte(d, '\n')
		if i < 0 {
			break
		}
		dst = append(append(append(dst, "data: "...), d[:i]...), '\n')
		d = d[i+1:]
	}
	return append(append(append(dst, "data: "...), d...), "\n\n"...)
}

var (
	choicesKey    = []byte(`"choices"`)
	usageNullLast = []byte(`,"usage":null}`)
)

// emptyArray reports whether v is [] (whitespace inside allowed).
func emptyArray(v []byte) bool {
	if len(v) == 0 || v[0] != '[' {
		return false
	}
	j := jsontext.SkipSpace(v, 1)
	return j < len(v) && v[j] == ']'
}

// skipSpaceBack returns the index just past the last byte before i that is
// not JSON whitespace.
func skipSpaceBack(b []byte, i int) int {
	for i > 0 && (b[i-1] == ' ' || b[i-1] == '\t' || b[i-1] == '\n' || b[i-1] == '\r') {
		i--
	}
	return i
}

// passError is a pass-through stream's error event, whose data is d: before
// the commit point it fails over unseen; after it, the event is relayed and
// ends the stream.
func passError(d, ev []byte, committed bool) ([]byte, error) {
	e := &EventError{Data: string(bytes.TrimSpace(d))}
	if !committed {
		return nil, e
	}
	e.Relayed = true
	return ev, e
}

// messagesUsage reads an Anthropic message_start (input tokens) or
// message_delta (output tokens so far).
func (p *PassReader) messagesUsage(data []byte) {
	var v struct {
		Message struct {
			Usage *wideUsage `json:"usage"`
		} `json:"message"`
		Usage *wideUsage `json:"usage"`
	}
	if json.Unmarshal(data, &v) != nil {
		if hasUsageObject(data) {
			p.unreadable()
		}
		return
	}
	u := v.Usage
	if u == nil {
		u = v.Message.Usage
	}
	if u == nil {
		return
	}
	if err := u.sane(); err != nil {
		p.fault(err)
	}
	if u.InputTokens == 0 && u.CacheRead == 0 && u.CacheCreation == 0 && p.has {
		// message_delta may omit the prompt's counts: message_start's
		// stand, cache counts included (the whole prompt is in
		// PromptTokens already).
		prior := p.usage
		u.InputTokens = prior.PromptTokens
		p.usage, p.has = u.usage(), true
		p.usage.CachedTokens, p.usage.CacheWriteTokens = prior.CachedTokens, prior.CacheWriteTokens
		return
	}
	p.usage, p.has = u.usage(), true
}

// Done implements Reader.
func (p *PassReader) Done() bool { return p.done }

// End implements Reader. A chat stream that gave its finish_reason is a
// whole answer whose usage chunk and [DONE] are missing: it is relayed as it
// ended, a success (OpenAI's SDKs end such a stream quietly). Any other
// stream that ends before its last event was cut.
func (p *PassReader) End(dst []byte) ([]byte, error) {
	if p.kind == passChat && p.finished {
		return dst, nil
	}
	return dst, endedEarly()
}

// Usage implements Reader.
func (p *PassReader) Usage() (Usage, bool) { return p.checked(p.usage, p.has) }

// Whole implements Reader: pass-through bodies are relayed as they arrive.
func (p *PassReader) Whole() bool { return false }

// Body implements Reader; never called for a pass-through reader.
func (p *PassReader) Body(body []byte) ([]byte, error) { return body, nil }

// TailUsage implements Reader.
func (p *PassReader) TailUsage(tail []byte) (Usage, bool) {
	obj, ok := tailUsageObject(tail)
	if !ok {
		return Usage{}, false
	}
	if p.kind == passChat || p.kind == passEmbeddings {
		u, ok := decodeUsage(obj)
		if !ok {
			p.unreadable()
		}
		return p.checked(u, ok)
	}
	var w wideUsage
	if json.Unmarshal(obj, &w) != nil {
		p.unreadable()
		return Usage{}, false
	}
	if err := w.sane(); err != nil {
		p.fault(err)
	}
	return p.checked(w.usage(), true)
}

// objectShaped reports whether data reads as one JSON object: it opens
// with '{' and closes with '}'. It is the per-event test of the
// pass-through, a few nanoseconds where json.Valid costs a microsecond per
// chunk (as much again as the rest of Event): a provider's broken event is
// nearly always cut short or not JSON at all, which this catches; an event
// that is balanced but invalid inside passes, as it would reach the client
// of a provider without the gateway.
func objectShaped(d []byte) bool {
	d = bytes.TrimSpace(d)
	return len(d) >= 2 && d[0] == '{' && d[len(d)-1] == '}'
}
