package cache

import (
	"bytes"
	"errors"
	"io"
	"strconv"

	"github.com/llmgw/gateway/internal/upstream"
)

// A stream answer is stored in the form a non-stream request gets: the
// events the client received, in the client route's format, are put back
// together into one chat completion (chat) or one message (messages). The
// Assembler does it as the relay writes, so what it holds is the answer
// being built (bounded by max_entry_bytes), never the stream's bytes, which
// are several times larger (an OpenAI chunk carries a token in ~150 bytes).

// Why a stream has no stored form.
var (
	// ErrIncomplete: the stream did not reach its final event (OpenAI's
	// [DONE] after a finish_reason on every choice, Anthropic's
	// message_stop), or it carried an error event: a cut or failed answer.
	ErrIncomplete = errors.New("cache: the stream did not complete")
	// ErrNotStorable: the stream holds something the stored form cannot
	// give back as it came (logprobs, an unknown delta, a tool call whose
	// arguments are not JSON, bytes that are not events).
	ErrNotStorable = errors.New("cache: the stream cannot be stored")
	// ErrTooLarge: the answer is larger than the entry bound.
	ErrTooLarge = errors.New("cache: the answer is larger than max_entry_bytes")
	// ErrRoute: the route has no stream form (embeddings, responses).
	ErrRoute = errors.New("cache: the route's answers are not assembled or replayed")
)

// eventSlack is what an event may hold beyond its share of the answer:
// its envelope (ids, model, field names).
const eventSlack = 64 << 10

// maxIndex bounds choice, tool call and content block indexes: an answer
// never has this many, and a stream that says so is not stored.
const maxIndex = 256

// builder assembles one route's events.
type builder interface {
	// event takes one event's name and data; an error is final.
	event(name, data []byte) error
	// body is the assembled answer; usage is what goes in when the stream
	// carried none (a chat client that did not ask for it).
	body(usage []byte) ([]byte, error)
}

// Assembler builds the stored form of a stream from the bytes written to
// its client, in any pieces. It takes the events through upstream's
// EventReader, the gateway's one SSE reader. Not safe for concurrent use.
type Assembler struct {
	b       builder
	max     int64
	size    int64  // the answer's bytes so far (text, arguments, blocks)
	pending []byte // the written bytes not yet a whole event
	// skipLF: the last event ended at a "\r" that was the last byte
	// written, so a "\n" written next is that line end's second half.
	skipLF bool
	err    error // sticky: the stream has no stored form
}

// NewAssembler assembles a stream of route (chat or messages) whose stored
// form may hold at most max bytes.
func NewAssembler(route upstream.Route, max int64) *Assembler {
	a := &Assembler{max: max}
	switch route {
	case upstream.RouteChat:
		a.b = &chatBuilder{a: a}
	case upstream.RouteMessages:
		a.b = &messagesBuilder{a: a}
	default:
		a.err = ErrRoute
	}
	return a
}

// Assemble is the stored form of the whole stream sse of route; usage is
// put in when the stream has none (see Assembler.Body).
func Assemble(route upstream.Route, sse []byte, max int64, usage []byte) ([]byte, error) {
	a := NewAssembler(route, max)
	_, _ = a.Write(sse)
	return a.Body(usage)
}

// Write takes the next bytes the client was sent. It never fails (the
// relay's write must not depend on the cache): a stream that cannot be
// stored is remembered, and Body says so.
func (a *Assembler) Write(p []byte) (int, error) {
	n := len(p)
	if a.err != nil {
		return n, nil
	}
	if a.skipLF && len(p) > 0 {
		if p[0] == '\n' {
			p = p[1:]
		}
		a.skipLF = false
	}
	if int64(len(a.pending)+len(p)) > a.max+eventSlack {
		a.fail(ErrTooLarge) // one event larger than the whole answer may be
		return n, nil
	}
	a.pending = append(a.pending, p...)
	a.split()
	return n, nil
}

// split feeds the whole events in pending to the builder and keeps the
// rest. The reader reads pending to its end, where a cut event is an
// io.ErrUnexpectedEOF; the relay writes whole events, one after another,
// so the events' bytes are pending's from its start: anything else
// (bytes between events the reader skips) is not a stream the gateway
// wrote, and is not stored.
func (a *Assembler) split() {
	r := upstream.NewEventReader(bytes.NewReader(a.pending))
	defer r.Close()
	off := 0
	for {
		ev, comment, err := r.Next()
		if err != nil {
			if err != io.EOF && err != io.ErrUnexpectedEOF {
				a.fail(ErrNotStorable) // an event over upstream.MaxEventBytes
				return
			}
			break
		}
		if !bytes.HasPrefix(a.pending[off:], ev) {
			a.fail(ErrNotStorable)
			return
		}
		off += len(ev)
		if comment {
			continue
		}
		f := upstream.ParseEvent(ev)
		if !f.HasData {
			continue
		}
		if err := a.b.event(f.Name, f.Data); err != nil {
			a.fail(err)
			return
		}
	}
	// At the end of what was written, a "\r" ending a line is taken for
	// the whole line end; its "\n" may come in the next write.
	a.skipLF = off > 0 && off == len(a.pending) && a.pending[off-1] == '\r'
	n := copy(a.pending, a.pending[off:])
	a.pending = a.pending[:n]
}

func (a *Assembler) fail(err error) {
	if a.err == nil {
		a.err = err
	}
	a.pending = nil
}

// grow counts n more bytes of the answer against the bound.
func (a *Assembler) grow(n int) error {
	a.size += int64(n)
	if a.size > a.max {
		return ErrTooLarge
	}
	return nil
}

// Body is the stored form of the stream written so far: an error when it
// did not complete or cannot be stored. usage is the usage object
// (route-shaped JSON) to store when the stream carried none: a chat client
// that did not ask for include_usage was not sent the provider's, which
// the gateway read all the same. nil: none.
func (a *Assembler) Body(usage []byte) ([]byte, error) {
	if a.err != nil {
		return nil, a.err
	}
	if len(bytes.TrimSpace(a.pending)) > 0 {
		return nil, ErrIncomplete // a cut event
	}
	b, err := a.b.body(usage)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > a.max {
		return nil, ErrTooLarge
	}
	return b, nil
}

// ChatUsage is u as a chat completion's usage object, with the details
// OpenAI nests (cached and reasoning tokens) when there are any.
func ChatUsage(u upstream.Usage) []byte {
	b := strconv.AppendInt([]byte(`{"prompt_tokens":`), u.PromptTokens, 10)
	b = strconv.AppendInt(append(b, `,"completion_tokens":`...), u.CompletionTokens, 10)
	b = strconv.AppendInt(append(b, `,"total_tokens":`...), u.TotalTokens, 10)
	if u.CachedTokens > 0 {
		b = append(strconv.AppendInt(append(b, `,"prompt_tokens_details":{"cached_tokens":`...), u.CachedTokens, 10), '}')
	}
	if u.ReasoningTokens > 0 {
		b = append(strconv.AppendInt(append(b, `,"completion_tokens_details":{"reasoning_tokens":`...), u.ReasoningTokens, 10), '}')
	}
	return append(b, '}')
}
