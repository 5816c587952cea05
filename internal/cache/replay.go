package cache

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/llmgw/gateway/internal/jsontext"
	"github.com/llmgw/gateway/internal/upstream"
)

// A hit served to a stream request is the stored answer written as the
// stream a provider would have sent, in the client route's format: the
// text in one or a few events, each tool call's head then its arguments,
// the finish reason, the usage (on chat only when the client asked for
// include_usage) and the end marker. Assembling the replay gives the
// stored answer back.

// pieceBytes is the most text one replayed event carries.
const pieceBytes = 4 << 10

// Replay is the stored answer body of route as the SSE body a stream
// request is served. includeUsage: the chat client asked for
// stream_options.include_usage (the messages stream always has usage).
// An error: body is not an answer of the route (a hit then misses).
func Replay(route upstream.Route, body []byte, includeUsage bool) ([]byte, error) {
	switch route {
	case upstream.RouteChat:
		return replayChat(body, includeUsage)
	case upstream.RouteMessages:
		return replayMessages(body)
	}
	return nil, ErrRoute
}

// pieces cuts s into pieces of at most pieceBytes, at rune boundaries.
func pieces(s string) []string {
	var out []string
	for len(s) > pieceBytes {
		n := pieceBytes
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		if n == 0 {
			n = pieceBytes
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// appendData appends one SSE event of data d, named name unless "".
func appendData(dst []byte, name string, d []byte) []byte {
	if name != "" {
		dst = append(append(append(dst, "event: "...), name...), '\n')
	}
	dst = append(append(dst, "data: "...), d...)
	return append(dst, "\n\n"...)
}

// storedCompletion is what replayChat reads of a stored chat completion.
type storedCompletion struct {
	chatHead
	Choices []struct {
		Index        int                        `json:"index"`
		Message      map[string]json.RawMessage `json:"message"`
		FinishReason *string                    `json:"finish_reason"`
		Logprobs     json.RawMessage            `json:"logprobs"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
}

// chatReplay writes chunks that share the completion's id, created and
// model.
type chatReplay struct {
	c            *storedCompletion
	includeUsage bool
	out          []byte
}

// chunk appends a chunk of one choice: its delta, and its finish_reason
// and logprobs when not nil.
func (r *chatReplay) chunk(index int, delta []byte, finish *string, logprobs json.RawMessage) {
	ch := newObject(nil)
	ch.int("index", int64(index))
	ch.raw("delta", delta)
	if isNull(logprobs) {
		logprobs = json.RawMessage("null")
	}
	ch.raw("logprobs", compact(logprobs))
	if finish != nil {
		ch.str("finish_reason", *finish)
	} else {
		ch.raw("finish_reason", []byte("null"))
	}
	r.event(append(append([]byte{'['}, ch.end()...), ']'), nil)
}

// event appends a chat.completion.chunk with choices (a JSON array) and,
// in the usage chunk, usage.
func (r *chatReplay) event(choices, usage []byte) {
	o := newObject(nil)
	o.str("id", r.c.ID)
	o.str("object", "chat.completion.chunk")
	o.int("created", r.c.Created)
	o.str("model", r.c.Model)
	if !isNull(r.c.SystemFingerprint) {
		o.raw("system_fingerprint", compact(r.c.SystemFingerprint))
	}
	if !isNull(r.c.ServiceTier) {
		o.raw("service_tier", compact(r.c.ServiceTier))
	}
	o.raw("choices", choices)
	if r.includeUsage {
		if usage == nil {
			usage = []byte("null") // as OpenAI: every chunk has it, null until the last
		}
		o.raw("usage", usage)
	}
	r.out = appendData(r.out, "", o.end())
}

func replayChat(body []byte, includeUsage bool) ([]byte, error) {
	var c storedCompletion
	if json.Unmarshal(body, &c) != nil || len(c.Choices) == 0 {
		return nil, ErrNotStorable
	}
	r := &chatReplay{c: &c, includeUsage: includeUsage, out: make([]byte, 0, 2*len(body)+1024)}
	for _, ch := range c.Choices {
		if err := r.choice(ch.Index, ch.Message, ch.FinishReason, ch.Logprobs); err != nil {
			return nil, err
		}
	}
	if includeUsage && !isNull(c.Usage) {
		r.event([]byte("[]"), compact(c.Usage))
	}
	return append(r.out, "data: [DONE]\n\n"...), nil
}

// choice appends one choice's chunks: the role (with "" content when the
// message has text), the text and the message's other strings in pieces,
// its other members as they are, each tool call's head and arguments, and
// the finish reason.
func (r *chatReplay) choice(index int, msg map[string]json.RawMessage, finish *string, logprobs json.RawMessage) error {
	role := "assistant"
	if v, ok := msg["role"]; ok && !isNull(v) && json.Unmarshal(v, &role) != nil {
		return ErrNotStorable
	}
	d := newObject(nil)
	d.str("role", role)
	var content *string
	if v, ok := msg["content"]; ok && !isNull(v) {
		if json.Unmarshal(v, &content) != nil {
			return ErrNotStorable // content parts: not a model's answer
		}
		d.str("content", "")
	}
	r.chunk(index, d.end(), nil, nil)
	if content != nil && *content != "" {
		r.texts(index, "content", *content)
	}
	others := newObject(nil)
	for _, k := range sortedKeys(msg) {
		v := msg[k]
		switch {
		case k == "role" || k == "content" || k == "tool_calls" || isNull(v):
		case v[0] == '"':
			var s string
			if json.Unmarshal(v, &s) != nil {
				return ErrNotStorable
			}
			r.texts(index, k, s)
		default:
			others.raw(k, compact(v))
		}
	}
	if others.n > 0 {
		r.chunk(index, others.end(), nil, nil)
	}
	if v, ok := msg["tool_calls"]; ok && !isNull(v) {
		var tcs []chatToolCall
		if json.Unmarshal(v, &tcs) != nil {
			return ErrNotStorable
		}
		for i, tc := range tcs {
			r.toolCall(index, i, tc)
		}
	}
	if finish == nil {
		stop := "stop"
		finish = &stop
	}
	r.chunk(index, []byte("{}"), finish, logprobs)
	return nil
}

// texts appends the string member k of a message in pieces.
func (r *chatReplay) texts(index int, k, s string) {
	for _, p := range pieces(s) {
		d := newObject(nil)
		d.str(k, p)
		r.chunk(index, d.end(), nil, nil)
	}
}

// toolCall appends call i's head (index, id, type, name, no arguments yet)
// and its arguments in pieces, as OpenAI streams them.
func (r *chatReplay) toolCall(index, i int, tc chatToolCall) {
	typ := tc.Type
	if typ == "" {
		typ = "function"
	}
	head := newObject(nil)
	head.int("index", int64(i))
	head.str("id", tc.ID)
	head.str("type", typ)
	var name, args string
	if tc.Function != nil {
		name, args = tc.Function.Name, tc.Function.Arguments
	}
	head.raw("function", jsontext.AppendString([]byte(`{"name":`), name))
	head.b = append(head.b, `,"arguments":""}`...)
	r.chunk(index, toolCalls(head.end()), nil, nil)
	if args == "" {
		return
	}
	for _, p := range pieces(args) {
		a := newObject(nil)
		a.int("index", int64(i))
		a.raw("function", jsontext.AppendString([]byte(`{"arguments":`), p))
		a.b = append(a.b, '}')
		r.chunk(index, toolCalls(a.end()), nil, nil)
	}
}

func toolCalls(call []byte) []byte {
	b := append([]byte(`{"tool_calls":[`), call...)
	return append(b, "]}"...)
}
