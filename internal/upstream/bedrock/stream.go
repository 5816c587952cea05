package bedrock

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/llmgw/gateway/internal/jsontext"
)

// ExceptionEvent is the name the upstream package gives an exception frame
// (:message-type exception): its data is {"__type": the frame's
// :exception-type, "message": ...}.
const ExceptionEvent = "exception"

// StreamTranslator turns one ConverseStream answer, event by event, into
// OpenAI chat.completion.chunk SSE frames. It is not safe for concurrent
// use.
//
// Converse ends an answer with messageStop (the stop reason) and then
// metadata (the usage): the finish chunk is written at messageStop, the
// usage chunk (when asked for) and [DONE] at metadata. A stream that ends
// after messageStop without metadata is whole, its usage unknown; one
// that ends before messageStop was cut (End returns ErrIncomplete).
//
// The role chunk is held back until the first content, so that an
// exception frame before any content leaves the gateway free to fail over
// with nothing sent.
type StreamTranslator struct {
	model        string
	created      int64
	includeUsage bool

	id       string
	head     []byte        // a text chunk's bytes up to its delta (writeText)
	calls    map[int64]int // contentBlockIndex → tool call index
	usage    Usage
	hasUsage bool
	roleSent bool
	stopped  bool   // messageStop was read
	finished bool   // the finish chunk went out
	reason   string // its finish_reason
	done     bool   // [DONE] went out
}

// NewStreamTranslator starts a stream for a client that asked for model;
// created is the Unix time every chunk reports, and includeUsage the
// client's stream_options.include_usage.
func NewStreamTranslator(model string, created int64, includeUsage bool) *StreamTranslator {
	return &StreamTranslator{model: model, created: created, includeUsage: includeUsage, id: newID()}
}

// Done reports whether [DONE] was written.
func (t *StreamTranslator) Done() bool { return t.done }

// FinishReason is the finish_reason the stream's finish chunk gave (an
// OpenAI value: stop, length, tool_calls, content_filter), "" before it.
func (t *StreamTranslator) FinishReason() string { return t.reason }

// Usage returns the metadata event's usage; ok is false before one.
func (t *StreamTranslator) Usage() (Usage, bool) { return t.usage, t.hasUsage }

type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *chatUsage    `json:"usage,omitempty"`
}

// chunkWithNullUsage is a chunk of a stream whose client asked for usage:
// OpenAI then writes "usage":null on every chunk but the last.
type chunkWithNullUsage struct {
	chunk
	Usage *chatUsage `json:"usage"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	Logprobs     *struct{}  `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

type chunkDelta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	ToolCalls []replyToolCall `json:"tool_calls,omitempty"`
}

// streamEvent holds the members of every ConverseStream event this
// translation reads
// (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html).
type streamEvent struct {
	ContentBlockIndex int64 `json:"contentBlockIndex"`
	Start             *struct {
		ToolUse *struct {
			ToolUseID string `json:"toolUseId"`
			Name      string `json:"name"`
		} `json:"toolUse"`
	} `json:"start"`
	Delta *struct {
		Text    *string `json:"text"`
		ToolUse *struct {
			Input string `json:"input"`
		} `json:"toolUse"`
	} `json:"delta"`
	StopReason string      `json:"stopReason"`
	Usage      *tokenUsage `json:"usage"`
	// An exception's members.
	Type    string `json:"__type"`
	Message string `json:"message"`
}

// Event translates one event, given by its :event-type (name) and JSON
// payload (data), and appends the OpenAI frames to dst. An exception
// returns a *Error; data that is not JSON, or a tool input delta for a
// block that started no tool, an error wrapping ErrMalformed. out is then
// dst. Events of unknown types (and reasoningContent deltas, which the
// chat format has no place for) are skipped.
func (t *StreamTranslator) Event(dst, name, data []byte) ([]byte, error) {
	if t.done {
		return dst, nil
	}
	var ev streamEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return dst, fmt.Errorf("%w: %s event: %v", ErrMalformed, clip(string(name), 64), err)
	}
	switch string(name) {
	case ExceptionEvent:
		e := &Error{Type: TypeName(ev.Type), Message: ev.Message}
		if e.Type == "" {
			e.Type = "UnknownException"
		}
		return dst, e
	case "messageStart", "contentBlockStop":
		return dst, nil
	case "contentBlockStart":
		if t.stopped || ev.Start == nil || ev.Start.ToolUse == nil {
			return dst, nil
		}
		tu := ev.Start.ToolUse
		if tu.ToolUseID == "" || tu.Name == "" {
			return dst, fmt.Errorf("%w: toolUse start without toolUseId or name", ErrMalformed)
		}
		if t.calls == nil {
			t.calls = map[int64]int{}
		}
		n := len(t.calls)
		t.calls[ev.ContentBlockIndex] = n
		tc := replyToolCall{Index: &n, ID: tu.ToolUseID, Type: "function"}
		tc.Function.Name = tu.Name
		dst = t.roleChunk(dst)
		return t.write(dst, chunkDelta{ToolCalls: []replyToolCall{tc}}, nil), nil
	case "contentBlockDelta":
		if t.stopped || ev.Delta == nil {
			return dst, nil
		}
		switch d := ev.Delta; {
		case d.Text != nil:
			if *d.Text == "" {
				return dst, nil
			}
			dst = t.roleChunk(dst)
			return t.writeText(dst, *d.Text), nil
		case d.ToolUse != nil:
			n, ok := t.calls[ev.ContentBlockIndex]
			if !ok {
				return dst, fmt.Errorf("%w: toolUse input for block %d, which started no tool", ErrMalformed, ev.ContentBlockIndex)
			}
			if d.ToolUse.Input == "" {
				return dst, nil
			}
			tc := replyToolCall{Index: &n}
			tc.Function.Arguments = d.ToolUse.Input
			return t.write(dst, chunkDelta{ToolCalls: []replyToolCall{tc}}, nil), nil
		}
		return dst, nil
	case "messageStop":
		if t.stopped {
			return dst, nil
		}
		t.stopped = true
		reason := FinishReason(ev.StopReason)
		if reason == "stop" && len(t.calls) > 0 {
			reason = "tool_calls"
		}
		dst = t.roleChunk(dst)
		t.finished, t.reason = true, reason
		return t.write(dst, chunkDelta{}, &reason), nil
	case "metadata":
		if ev.Usage != nil {
			t.usage, t.hasUsage = ev.Usage.openAI()
		}
		if !t.stopped {
			return dst, nil // usage before the stop: the stop is still to come
		}
		return t.close(dst), nil
	}
	return dst, nil
}

func (t *StreamTranslator) roleChunk(dst []byte) []byte {
	if t.roleSent {
		return dst
	}
	t.roleSent = true
	// Appended, as writeText's chunks are: the first chunk of every
	// translated stream, so encoding/json's reflection was on the path to
	// each stream's first client bytes (TestRoleChunkIsWrite).
	dst = append(t.appendHead(dst), roleDelta...)
	return t.appendTail(dst)
}

// roleDelta is the role chunk's delta as write encodes it.
const roleDelta = `{"role":"assistant","content":""}`

func (t *StreamTranslator) write(dst []byte, d chunkDelta, finish *string) []byte {
	c := chunk{ID: t.id, Object: "chat.completion.chunk", Created: t.created, Model: t.model,
		Choices: []chunkChoice{{Delta: d, FinishReason: finish}}}
	if t.includeUsage {
		return frame(dst, chunkWithNullUsage{chunk: c})
	}
	return frame(dst, c)
}

// writeText writes a text chunk, one per delta of a long answer, by
// appending, without encoding/json's reflection: the bytes write's
// encoding would give (TestWriteTextIsWrite).
func (t *StreamTranslator) writeText(dst []byte, text string) []byte {
	dst = append(t.appendHead(dst), `{"content":`...)
	dst = append(jsontext.AppendString(dst, text), '}')
	return t.appendTail(dst)
}

// appendHead appends a chunk's bytes up to its delta, made once.
func (t *StreamTranslator) appendHead(dst []byte) []byte {
	if t.head == nil {
		h := append([]byte(`data: {"id":`), jsontext.AppendString(nil, t.id)...)
		h = append(h, `,"object":"chat.completion.chunk","created":`...)
		h = strconv.AppendInt(h, t.created, 10)
		h = append(h, `,"model":`...)
		h = jsontext.AppendString(h, t.model)
		t.head = append(h, `,"choices":[{"index":0,"delta":`...)
	}
	return append(dst, t.head...)
}

// appendTail appends the rest of a chunk without a finish_reason after its
// delta.
func (t *StreamTranslator) appendTail(dst []byte) []byte {
	dst = append(dst, `,"logprobs":null,"finish_reason":null}]`...)
	if t.includeUsage {
		dst = append(dst, `,"usage":null`...)
	}
	return append(dst, "}\n\n"...)
}

func frame(dst []byte, v any) []byte {
	b, err := encode(v)
	if err != nil { // only strings and numbers: cannot fail
		panic("bedrock: encode chunk: " + err.Error())
	}
	dst = append(dst, "data: "...)
	dst = append(dst, b...)
	return append(dst, "\n\n"...)
}

// close writes the usage chunk, when asked for, and [DONE].
func (t *StreamTranslator) close(dst []byte) []byte {
	if t.includeUsage {
		c := chunkWithNullUsage{chunk: chunk{ID: t.id, Object: "chat.completion.chunk", Created: t.created,
			Model: t.model, Choices: []chunkChoice{}}}
		if t.hasUsage {
			c.Usage = newChatUsage(t.usage)
		}
		dst = frame(dst, c)
	}
	t.done = true
	return append(dst, "data: [DONE]\n\n"...)
}

// End is called when the provider's body ended. After messageStop it
// closes the answer (metadata, which carries the usage, never came);
// before it the answer was cut: dst and ErrIncomplete, and the client's
// [DONE] is never made up.
func (t *StreamTranslator) End(dst []byte) ([]byte, error) {
	if t.done {
		return dst, nil
	}
	if !t.stopped {
		return dst, ErrIncomplete
	}
	return t.close(dst), nil
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
