package cache

import (
	"bytes"
	"encoding/json"
	"strings"
)

// chatChunk is what the chat builder reads of a chat.completion.chunk.
// Members it does not know at the top (OpenAI's "obfuscation") are
// per-chunk and not part of the answer.
type chatChunk struct {
	chatHead
	Choices []struct {
		Index        *int                       `json:"index"`
		Delta        map[string]json.RawMessage `json:"delta"`
		FinishReason *string                    `json:"finish_reason"`
		Logprobs     json.RawMessage            `json:"logprobs"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// chatHead is what every chunk of a completion and the completion share.
type chatHead struct {
	ID                string          `json:"id"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint json.RawMessage `json:"system_fingerprint"`
	ServiceTier       json.RawMessage `json:"service_tier"`
}

// chatToolCall is a tool call of a chunk's delta (with its index) or of a
// stored message (in array order).
type chatToolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function *struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatBuilder assembles an OpenAI chat stream into a chat completion.
type chatBuilder struct {
	a           *Assembler
	id, model   string
	created     int64
	fingerprint json.RawMessage
	tier        json.RawMessage
	choices     map[int]*chatChoice
	usage       json.RawMessage
	done        bool // [DONE] arrived
}

type chatChoice struct {
	role  string
	strs  map[string]*strings.Builder // content, refusal, reasoning_content, ...
	tools map[int]*chatTool
	// finish is the finish_reason; "" until one arrives
	finish string
}

type chatTool struct {
	id, typ    string
	name, args strings.Builder
}

func (b *chatBuilder) event(_, data []byte) error {
	if b.done {
		return ErrNotStorable // nothing follows [DONE] in a stream the gateway wrote
	}
	if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		b.done = true
		return nil
	}
	var c chatChunk
	if json.Unmarshal(data, &c) != nil {
		return ErrNotStorable
	}
	if !isNull(c.Error) {
		return ErrIncomplete // the provider's error event: a failed answer
	}
	if b.id == "" {
		b.id = c.ID
	}
	if b.model == "" {
		b.model = c.Model
	}
	if b.created == 0 {
		b.created = c.Created
	}
	if !isNull(c.SystemFingerprint) {
		b.fingerprint = compact(c.SystemFingerprint)
	}
	if !isNull(c.ServiceTier) {
		b.tier = compact(c.ServiceTier)
	}
	if !isNull(c.Usage) {
		if c.Usage[0] != '{' {
			return ErrNotStorable
		}
		b.usage = compact(c.Usage)
	}
	for _, ch := range c.Choices {
		if ch.Index == nil || *ch.Index < 0 || *ch.Index >= maxIndex || !isNull(ch.Logprobs) {
			return ErrNotStorable // logprobs come per token and are not kept
		}
		cc := b.choice(*ch.Index)
		if err := b.delta(cc, ch.Delta); err != nil {
			return err
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			cc.finish = *ch.FinishReason
		}
	}
	return nil
}

func (b *chatBuilder) choice(i int) *chatChoice {
	if b.choices == nil {
		b.choices = map[int]*chatChoice{}
	}
	cc := b.choices[i]
	if cc == nil {
		cc = &chatChoice{strs: map[string]*strings.Builder{}, tools: map[int]*chatTool{}}
		b.choices[i] = cc
	}
	return cc
}

// delta applies one choice's delta: a string member is a piece of the
// message's member of that name (content, refusal, a provider's
// reasoning_content), tool_calls are joined by their index. Any other
// value would need the provider's own rule to join, so the stream is not
// stored.
func (b *chatBuilder) delta(cc *chatChoice, d map[string]json.RawMessage) error {
	for k, v := range d {
		if isNull(v) {
			continue
		}
		switch k {
		case "role":
			if json.Unmarshal(v, &cc.role) != nil {
				return ErrNotStorable
			}
		case "tool_calls":
			var tcs []chatToolCall
			if json.Unmarshal(v, &tcs) != nil {
				return ErrNotStorable
			}
			for _, tc := range tcs {
				if err := b.toolDelta(cc, tc); err != nil {
					return err
				}
			}
		default:
			var s string
			if json.Unmarshal(v, &s) != nil {
				return ErrNotStorable
			}
			sb := cc.strs[k]
			if sb == nil {
				sb = &strings.Builder{}
				cc.strs[k] = sb
			}
			if err := b.a.grow(len(s) + len(k)); err != nil {
				return err
			}
			sb.WriteString(s)
		}
	}
	return nil
}

func (b *chatBuilder) toolDelta(cc *chatChoice, tc chatToolCall) error {
	if tc.Index == nil || *tc.Index < 0 || *tc.Index >= maxIndex {
		return ErrNotStorable
	}
	t := cc.tools[*tc.Index]
	if t == nil {
		t = &chatTool{}
		cc.tools[*tc.Index] = t
	}
	if tc.ID != "" {
		t.id = tc.ID
	}
	if tc.Type != "" {
		t.typ = tc.Type
	}
	if f := tc.Function; f != nil {
		if err := b.a.grow(len(tc.ID) + len(f.Name) + len(f.Arguments)); err != nil {
			return err
		}
		t.name.WriteString(f.Name)
		t.args.WriteString(f.Arguments)
	}
	return nil
}

// body writes the chat completion: every choice finished and [DONE] came.
func (b *chatBuilder) body(usage []byte) ([]byte, error) {
	if !b.done || len(b.choices) == 0 {
		return nil, ErrIncomplete
	}
	o := newObject(nil)
	o.str("id", b.id)
	o.str("object", "chat.completion")
	o.int("created", b.created)
	o.str("model", b.model)
	o.key("choices")
	o.b = append(o.b, '[')
	for n, i := range sortedKeys(b.choices) {
		cc := b.choices[i]
		if cc.finish == "" {
			return nil, ErrIncomplete
		}
		if n > 0 {
			o.b = append(o.b, ',')
		}
		c := newObject(o.b)
		c.int("index", int64(i))
		c.raw("message", cc.message())
		c.raw("logprobs", []byte("null"))
		c.str("finish_reason", cc.finish)
		o.b = c.end()
	}
	o.b = append(o.b, ']')
	switch {
	case b.usage != nil:
		o.raw("usage", b.usage)
	case usage != nil:
		o.raw("usage", usage)
	}
	if b.fingerprint != nil {
		o.raw("system_fingerprint", b.fingerprint)
	}
	if b.tier != nil {
		o.raw("service_tier", b.tier)
	}
	return o.end(), nil
}

// message is the choice's message as a non-stream answer has it: content
// null when no text came (a tool call), the tool calls in index order.
func (cc *chatChoice) message() []byte {
	role := cc.role
	if role == "" {
		role = "assistant"
	}
	m := newObject(nil)
	m.str("role", role)
	if c, ok := cc.strs["content"]; ok {
		m.str("content", c.String())
	} else {
		m.raw("content", []byte("null"))
	}
	for _, k := range sortedKeys(cc.strs) {
		if k != "content" {
			m.str(k, cc.strs[k].String())
		}
	}
	if len(cc.tools) > 0 {
		m.key("tool_calls")
		m.b = append(m.b, '[')
		for n, i := range sortedKeys(cc.tools) {
			t := cc.tools[i]
			if n > 0 {
				m.b = append(m.b, ',')
			}
			typ := t.typ
			if typ == "" {
				typ = "function"
			}
			tc := newObject(m.b)
			tc.str("id", t.id)
			tc.str("type", typ)
			fn := newObject(nil)
			fn.str("name", t.name.String())
			fn.str("arguments", t.args.String())
			tc.raw("function", fn.end())
			m.b = tc.end()
		}
		m.b = append(m.b, ']')
	}
	return m.end()
}
