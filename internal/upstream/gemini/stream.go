package gemini

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/llmgw/gateway/internal/jsontext"
)

// StreamTranslator turns one streamGenerateContent?alt=sse stream, whose
// every event is a whole GenerateContentResponse, into OpenAI
// chat.completion.chunk SSE frames. It keeps the state a stream needs (the
// chunk id, how many tool calls went out, the latest usage) and is not safe
// for concurrent use.
//
// Gemini has no terminal event: the answer is over when a chunk carried a
// finishReason and the body then ends. So Event writes the finish chunk when
// that chunk arrives, and End, called at the end of the body, writes the
// usage chunk (when asked for) and [DONE], or reports ErrIncomplete for a
// body cut before any finishReason.
//
// The role chunk OpenAI streams begin with is held back until the first
// content (or finish reason), so that an event that is an error, or a
// blocked prompt, before any content still leaves the gateway free to fail
// over with nothing sent.
type StreamTranslator struct {
	model        string
	created      int64
	includeUsage bool

	id        string // chatcmpl-…, from the first event's responseId
	head      []byte // a content chunk's bytes up to its delta, once id is known
	calls     int    // tool calls sent, the next one's index
	usage     Usage
	hasUsage  bool
	roleSent  bool
	finished  bool   // a finish_reason chunk went out
	reason    string // its finish_reason
	done      bool   // [DONE] went out
	responses int    // events read
}

// NewStreamTranslator starts a stream for a client that asked for model;
// created is the Unix time every chunk reports, and includeUsage the
// client's stream_options.include_usage.
func NewStreamTranslator(model string, created int64, includeUsage bool) *StreamTranslator {
	return &StreamTranslator{model: model, created: created, includeUsage: includeUsage}
}

// Done reports whether End wrote "data: [DONE]".
func (t *StreamTranslator) Done() bool { return t.done }

// FinishReason is the finish_reason the stream's finish chunk gave (an
// OpenAI value: stop, length, tool_calls, content_filter), "" before it.
func (t *StreamTranslator) FinishReason() string { return t.reason }

// Finished reports whether a chunk with a finishReason arrived, so that the
// end of the body is the answer's end and not a cut.
func (t *StreamTranslator) Finished() bool { return t.finished }

// Usage returns the latest usageMetadata seen (Gemini repeats it, growing,
// on chunks; the last one counts the whole answer). ok is false before any.
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

// Event translates one event, given by its name (ignored: Gemini names
// none) and data, as upstream's one SSE reader parses them, and appends
// the OpenAI frames to dst. Events after End are ignored, and so is content
// after the finish reason; a later usageMetadata still updates Usage.
//
// An error object returns a *Error, a blocked prompt a *BlockedError; data
// that is not a GenerateContentResponse returns an error wrapping
// ErrMalformed. out is then dst.
func (t *StreamTranslator) Event(dst, _, data []byte) (out []byte, err error) {
	if t.done {
		return dst, nil
	}
	var r generateResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return dst, fmt.Errorf("%w: event data: %v", ErrMalformed, err)
	}
	if r.Error != nil && !isNull(r.Error) {
		var eb errorBody
		if json.Unmarshal(data, &eb) == nil {
			if e, ok := fromBody(eb, 0); ok {
				return dst, e
			}
		}
		return dst, fmt.Errorf("%w: unreadable error event", ErrMalformed)
	}
	if r.UsageMetadata != nil {
		u, ok := r.UsageMetadata.openAI()
		t.usage, t.hasUsage = u, ok
	}
	if t.responses == 0 {
		t.id = r.ResponseID
		if t.id == "" {
			t.id = newID()
		}
		t.id = "chatcmpl-" + t.id
	}
	t.responses++
	if len(r.Candidates) == 0 {
		if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" && !t.roleSent {
			return dst, &BlockedError{Reason: r.PromptFeedback.BlockReason, Message: r.PromptFeedback.BlockReasonMessage}
		}
		return dst, nil // a usage-only chunk
	}
	if t.finished {
		return dst, nil
	}
	c := r.Candidates[0]
	responseID := t.id[len("chatcmpl-"):]
	out = dst
	if c.Content != nil {
		for _, p := range c.Content.Parts {
			switch {
			case p.FunctionCall != nil:
				tc, err := toolCall(p, responseID, t.calls)
				if err != nil {
					return dst, err
				}
				out = t.toolCallChunks(out, tc)
			case p.Text != nil && !p.Thought && *p.Text != "":
				out = t.roleChunk(out)
				out = t.write(out, chunkDelta{Content: p.Text}, nil)
			}
		}
	}
	if c.FinishReason != "" {
		out = t.roleChunk(out)
		reason := finishReason(c.FinishReason, t.calls > 0)
		out = t.write(out, chunkDelta{}, &reason)
		t.finished, t.reason = true, reason
	}
	return out, nil
}

// toolCallChunks streams one whole functionCall as OpenAI streams a tool
// call: a first delta with index, id, type, name and empty arguments, then
// the arguments, so a client that concatenates argument pieces by index
// reads the same call as from OpenAI.
func (t *StreamTranslator) toolCallChunks(dst []byte, tc replyToolCall) []byte {
	dst = t.roleChunk(dst)
	n := t.calls
	t.calls++
	args := tc.Function.Arguments
	tc.Index = &n
	tc.Function.Arguments = ""
	dst = t.write(dst, chunkDelta{ToolCalls: []replyToolCall{tc}}, nil)
	more := replyToolCall{Index: &n}
	more.Function.Arguments = args
	return t.write(dst, chunkDelta{ToolCalls: []replyToolCall{more}}, nil)
}

func (t *StreamTranslator) roleChunk(dst []byte) []byte {
	if t.roleSent {
		return dst
	}
	t.roleSent = true
	// Appended, as writeFast's chunks are: the first chunk of every
	// translated stream, so encoding/json's reflection was on the path to
	// each stream's first client bytes (TestRoleChunkIsWrite).
	dst = append(t.appendHead(dst), `{"role":"assistant","content":""}`...)
	return t.appendTail(dst, nil)
}

func (t *StreamTranslator) write(dst []byte, d chunkDelta, finish *string) []byte {
	if d.Role == "" && d.ToolCalls == nil {
		return t.writeFast(dst, d.Content, finish)
	}
	c := chunk{ID: t.id, Object: "chat.completion.chunk", Created: t.created, Model: t.model,
		Choices: []chunkChoice{{Delta: d, FinishReason: finish}}}
	if t.includeUsage {
		return frame(dst, chunkWithNullUsage{chunk: c})
	}
	return frame(dst, c)
}

// writeFast writes a content or finish chunk, one per Gemini chunk of a
// long answer, by appending, without encoding/json's reflection; it writes
// the bytes write's encoding would.
func (t *StreamTranslator) writeFast(dst []byte, text, finish *string) []byte {
	dst = t.appendHead(dst)
	if text != nil {
		dst = append(dst, `{"content":`...)
		dst = jsontext.AppendString(dst, *text)
		dst = append(dst, '}')
	} else {
		dst = append(dst, `{}`...)
	}
	return t.appendTail(dst, finish)
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

// appendTail appends the rest of a chunk after its delta.
func (t *StreamTranslator) appendTail(dst []byte, finish *string) []byte {
	dst = append(dst, `,"logprobs":null,"finish_reason":`...)
	if finish != nil {
		dst = jsontext.AppendString(dst, *finish)
	} else {
		dst = append(dst, `null`...)
	}
	dst = append(dst, `}]`...)
	if t.includeUsage {
		dst = append(dst, `,"usage":null`...)
	}
	return append(dst, "}\n\n"...)
}

func frame(dst []byte, v any) []byte {
	b, err := encode(v)
	if err != nil { // only strings and numbers: cannot fail
		panic("gemini: encode chunk: " + err.Error())
	}
	dst = append(dst, "data: "...)
	dst = append(dst, b...)
	return append(dst, "\n\n"...)
}

// End is called when the provider's body ended. After a finishReason it
// writes the usage chunk, when the client asked for it (with the last
// usageMetadata; "usage":null when Gemini sent none readable), and
// [DONE]. Before one, the answer was cut: it returns dst and ErrIncomplete,
// and the client's [DONE] is never made up.
func (t *StreamTranslator) End(dst []byte) ([]byte, error) {
	if t.done {
		return dst, nil
	}
	if !t.finished {
		return dst, ErrIncomplete
	}
	if t.includeUsage {
		c := chunkWithNullUsage{chunk: chunk{ID: t.id, Object: "chat.completion.chunk", Created: t.created,
			Model: t.model, Choices: []chunkChoice{}}}
		if t.hasUsage {
			c.Usage = newChatUsage(t.usage)
		}
		dst = frame(dst, c)
	}
	t.done = true
	return append(dst, "data: [DONE]\n\n"...), nil
}
