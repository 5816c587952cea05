package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/llmgw/gateway/internal/jsontext"
	"github.com/llmgw/gateway/internal/upstream/anthropic"
	"github.com/llmgw/gateway/internal/upstream/anthropicclient"
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

// wideUsage reads the usage objects of every format: OpenAI chat and
// embeddings (prompt/completion), Responses and Anthropic (input/output;
// Anthropic counts cached prompt tokens apart).
type wideUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheCreation    int64 `json:"cache_creation_input_tokens"`
	CacheRead        int64 `json:"cache_read_input_tokens"`
	// The details objects of chat and Responses; a value that is not
	// one costs only its count (wideDetails).
	PromptDetails     json.RawMessage `json:"prompt_tokens_details"`
	CompletionDetails json.RawMessage `json:"completion_tokens_details"`
	InputDetails      json.RawMessage `json:"input_tokens_details"`
	OutputDetails     json.RawMessage `json:"output_tokens_details"`
}

// wideDetails is the one count read from a details object.
type wideDetails struct {
	CachedTokens    int64 `json:"cached_tokens"`
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

func detailsOf(raw ...json.RawMessage) (d wideDetails) {
	for _, r := range raw {
		var one wideDetails
		if len(r) > 0 && json.Unmarshal(r, &one) == nil {
			d.CachedTokens += one.CachedTokens
			d.ReasoningTokens += one.ReasoningTokens
		}
	}
	return d
}

// sane reports the first count of w, as sent, outside [0,
// MaxUsageTokens]: one the usage leaves out (input_tokens beside
// prompt_tokens) or nets out (a negative cache count in one details object
// and a positive one in the other) still says the provider's counts are
// not true, and a count added to another cannot overflow.
func (w *wideUsage) sane() error {
	counts := [...]struct {
		name string
		n    int64
	}{{"prompt_tokens", w.PromptTokens}, {"completion_tokens", w.CompletionTokens}, {"total_tokens", w.TotalTokens},
		{"input_tokens", w.InputTokens}, {"output_tokens", w.OutputTokens},
		{"cache_creation_input_tokens", w.CacheCreation}, {"cache_read_input_tokens", w.CacheRead},
		{"cached_tokens", detailsOf(w.PromptDetails).CachedTokens}, {"cached_tokens", detailsOf(w.InputDetails).CachedTokens},
		{"reasoning_tokens", detailsOf(w.CompletionDetails).ReasoningTokens},
		{"reasoning_tokens", detailsOf(w.OutputDetails).ReasoningTokens}}
	for _, c := range counts {
		if c.n < 0 || c.n > MaxUsageTokens {
			return &UsageError{Detail: c.name + " " + strconv.FormatInt(c.n, 10) + " is outside [0, " +
				strconv.Itoa(MaxUsageTokens) + "]"}
		}
	}
	return nil
}

func (w *wideUsage) usage() Usage {
	u := Usage{PromptTokens: w.PromptTokens, CompletionTokens: w.CompletionTokens, TotalTokens: w.TotalTokens}
	if u.PromptTokens == 0 {
		u.PromptTokens = w.InputTokens + w.CacheCreation + w.CacheRead
	}
	// Anthropic's cache counts, or OpenAI's details (chat and Responses
	// name them apart; a usage object has one kind).
	in := detailsOf(w.PromptDetails, w.InputDetails)
	out := detailsOf(w.CompletionDetails, w.OutputDetails)
	u.CachedTokens = w.CacheRead + in.CachedTokens
	u.CacheWriteTokens = w.CacheCreation
	u.ReasoningTokens = out.ReasoningTokens
	if u.CompletionTokens == 0 {
		u.CompletionTokens = w.OutputTokens
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u
}

// tailUsageObject finds the last "usage" object of a body's tail, as
// TailUsage does, and returns its bytes.
func tailUsageObject(tail []byte) ([]byte, bool) {
	end := len(tail)
	for {
		i := bytes.LastIndex(tail[:end], usageKey)
		if i < 0 {
			return nil, false
		}
		end = i
		val, ok := keyValue(tail, i)
		if !ok {
			continue
		}
		if len(val) == 0 || val[0] != '{' {
			return nil, false
		}
		return val[:jsontext.SkipValue(val, 0)], true
	}
}

// fromAnthropic reads an anthropic provider's answer for an OpenAI client.
type fromAnthropic struct {
	usageCheck
	t       *anthropic.StreamTranslator
	model   string
	created int64
	usage   Usage
	has     bool
	chat    []byte // the chat body Body made, for FinishReasons
	scratch []byte // joins an event's data lines when it has several
}

func (f *fromAnthropic) Event(dst, ev []byte, _ bool) ([]byte, error) {
	return translateEvents(dst, ev, &f.scratch, f)
}

// translate implements translator.
func (f *fromAnthropic) translate(dst, name, data []byte) ([]byte, bool, error) {
	out, err := f.t.Event(dst, name, data)
	if err == nil {
		return out, false, nil // without an errors.As, whose target escapes
	}
	var se *anthropic.StreamError
	return out, errors.As(err, &se), err
}

// translator is a translating reader's stream translator: it turns one
// event's name and data into client bytes, and tells an error event
// (isEvent) from a malformed one.
type translator interface {
	translate(dst, name, data []byte) (out []byte, isEvent bool, err error)
}

// translateEvents gives t each event of ev (one, from EventReader) that has
// data, as a browser dispatches only those; scratch joins data lines.
func translateEvents(dst, ev []byte, scratch *[]byte, t translator) ([]byte, error) {
	for len(ev) > 0 {
		var e EventFields
		e, ev, *scratch = nextEvent(ev, *scratch)
		if !e.HasData {
			continue
		}
		out, isEvent, err := t.translate(dst, e.Name, e.Data)
		switch {
		case isEvent:
			return out, &EventError{Data: string(bytes.TrimSpace(e.Data))}
		case err != nil:
			return out, &ProtocolError{Err: err}
		}
		dst = out
	}
	return dst, nil
}

func (f *fromAnthropic) Done() bool  { return f.t.Done() }
func (f *fromAnthropic) Whole() bool { return true }

// End: an Anthropic stream that ends without message_stop was cut, even
// after its message_delta; the client's [DONE] is never made up.
func (f *fromAnthropic) End(dst []byte) ([]byte, error) { return dst, endedEarly() }

func (f *fromAnthropic) Usage() (Usage, bool) {
	if f.has {
		return f.checked(f.usage, true)
	}
	u, ok := f.t.Usage()
	if ok && f.t.BadUsage() {
		f.unreadable()
	}
	return f.checked(Usage(u), ok)
}

func (f *fromAnthropic) Body(body []byte) ([]byte, error) {
	out, err := anthropic.MessageToChat(body, f.model, f.created)
	if err != nil {
		return nil, &ProtocolError{Err: err}
	}
	if u, ok := anthropic.BodyUsage(body); ok {
		f.usage, f.has = Usage(u), true
	} else if hasUsageObject(body) {
		f.unreadable()
	}
	f.chat = out
	return out, nil
}

func (f *fromAnthropic) TailUsage([]byte) (Usage, bool) { return f.Usage() }

// toAnthropic reads an openai provider's answer for an Anthropic client.
type toAnthropic struct {
	usageCheck
	t       *anthropicclient.StreamTranslator
	model   string
	usage   Usage
	has     bool
	chat    []byte // the provider's chat body, for FinishReasons
	scratch []byte // joins an event's data lines when it has several
}

func (a *toAnthropic) Event(dst, ev []byte, _ bool) ([]byte, error) {
	return translateEvents(dst, ev, &a.scratch, a)
}

// translate implements translator: a chat stream's events have no names.
func (a *toAnthropic) translate(dst, _, data []byte) ([]byte, bool, error) {
	out, err := a.t.Data(dst, data)
	if err == nil {
		return out, false, nil
	}
	var pe *anthropicclient.ProviderError
	return out, errors.As(err, &pe), err
}

func (a *toAnthropic) Done() bool { return a.t.Done() }

// End closes the message (stop_reason, message_stop) only for a stream that
// gave its finish_reason, as PassReader does for chat: otherwise the
// answer, and any tool call's arguments, may be cut anywhere.
func (a *toAnthropic) End(dst []byte) ([]byte, error) {
	if !a.t.Finished() {
		return dst, endedEarly()
	}
	return a.t.Finish(dst), nil
}

func (a *toAnthropic) Whole() bool { return true }

func (a *toAnthropic) Usage() (Usage, bool) {
	if a.has {
		return a.checked(a.usage, true)
	}
	u, ok := a.t.Usage()
	if ok && u.Invalid {
		a.unreadable()
	}
	return a.checked(chatUsageOf(u), ok)
}

// chatUsageOf is a chat provider's usage as anthropicclient read it, its
// cache and reasoning counts included: they are costed as on the
// pass-through (before, a cached prompt was billed whole at the input
// price on this route).
func chatUsageOf(u anthropicclient.Usage) Usage {
	return Usage{PromptTokens: u.Prompt, CompletionTokens: u.Completion, TotalTokens: u.Total,
		CachedTokens: u.Cached, ReasoningTokens: u.Reasoning}
}

func (a *toAnthropic) Body(body []byte) ([]byte, error) {
	msg, u, err := anthropicclient.ChatToMessage(body, a.model)
	if err != nil {
		var pe *anthropicclient.ProviderError
		if errors.As(err, &pe) {
			return nil, &EventError{Data: string(bytes.TrimSpace(body))}
		}
		return nil, &ProtocolError{Err: err}
	}
	a.usage, a.chat = chatUsageOf(u), body
	// Any count at all is a usage, a negative one too, which the check
	// then refuses rather than taking it for none.
	a.has = u.Total != 0 || u.Prompt != 0 || u.Completion != 0 || u.Cached != 0 || u.Reasoning != 0
	if u.Invalid {
		a.unreadable()
	}
	return msg, nil
}

func (a *toAnthropic) TailUsage([]byte) (Usage, bool) { return a.Usage() }

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
