package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/llmgw/gateway/internal/jsontext"
)

// Resuming a stream cut after its commit point (docs/architecture.md,
// "Resuming a cut stream"): a Stitch watches what a resumable stream relays
// (its text, whether a tool call or another kind of block opened, the
// answer's id and model), and once the loop has started a continuation on
// the next candidate with that text as a trailing assistant message
// (ChatRequest.BuildPrefill), it rewrites the continuation's events so that
// the client sees one message: the first answer's id and model, no second
// role chunk or message_start/content_block_start, block indexes following
// the first answer's, usage summed. It reads and rewrites the client's
// bytes (the reader's output), so a translated stream is stitched like a
// passed-through one: what was relayed is exactly what the continuation is
// asked to continue.

// ErrRepeats is a continuation that began by repeating text the client
// already has (or did not continue the open text block): it is never
// stitched, the stream ends with its error frame.
var ErrRepeats = errors.New("the continuation repeats the relayed answer")

// Stitch is one resumable stream's record of what reached its client and,
// after a resume, the rewriter of the continuation. The zero value is
// unused; ChatRequest.Stitch readies one.
type Stitch struct {
	kind passKind // passChat or passMessages
	text []byte   // the text relayed so far, both parts
	tool bool     // a tool call, or a block that is not text, was relayed
	many bool     // chat: a choice other than the first was relayed (n > 1): not one text to continue
	id   []byte   // the first answer's id, as a JSON string
	mdl  []byte   // the first answer's model, as a JSON string
	// chat: the first answer's created, as JSON
	created []byte
	// messages: the index of the last block started, and whether it is an
	// open text block (a cut inside it is resumable)
	index int
	open  bool

	cont     bool // rewriting a continuation
	base     int  // messages: the open block the continuation's block 0 extends
	seenText bool // the continuation's first text went by (and was checked)
	spaceYet bool // the continuation has sent only whitespace so far: its start is not checked yet
	// ws is the whitespace the client has that the prefill lacked (an
	// anthropic prefill is sent without its trailing whitespace): the
	// continuation's own copy of it is dropped, so the join is not doubled.
	ws       string
	prior    Usage
	hasPrior bool
	contIn   int64 // the continuation's input tokens (its message_start)
	scratch  []byte
	buf      []byte // the rewritten event
}

// Stitch readies s for an attempt on ep and returns it, or nil when the
// request is not a chat or messages stream (Responses and embeddings are
// not resumed). Stitch reads the client's bytes, so a translated stream is
// watched and rewritten like a passed-through one.
func (r *ChatRequest) Stitch(ep *Endpoint, s *Stitch) *Stitch {
	if !r.Stream || !ep.Serves(r.Route) {
		return nil
	}
	kind := passChat
	switch r.Route {
	case RouteChat:
	case RouteMessages:
		kind = passMessages
	default:
		return nil
	}
	*s = Stitch{kind: kind, text: s.text[:0], id: s.id[:0], mdl: s.mdl[:0], created: s.created[:0],
		scratch: s.scratch[:0], buf: s.buf[:0], index: -1}
	return s
}

// CanContinue reports whether a continuation may be asked of ep: it
// serves the client's route and takes a prefill (anthropic natively, openai
// only with the routes file's prefill: true).
func (s *Stitch) CanContinue(ep *Endpoint) bool {
	route := RouteChat
	if s.kind == passMessages {
		route = RouteMessages
	}
	return ep.Prefill && ep.Serves(route)
}

// Sum is the usage of the whole answer: u, the last part's, plus the
// parts' before it.
func (s *Stitch) Sum(u Usage, has bool) (Usage, bool) {
	if !s.hasPrior {
		return u, has
	}
	if !has {
		return s.prior, true
	}
	return addUsage(u, s.prior), true
}

// addUsage is the usage of two parts of one stream.
func addUsage(a, b Usage) Usage {
	return Usage{PromptTokens: a.PromptTokens + b.PromptTokens, CompletionTokens: a.CompletionTokens + b.CompletionTokens,
		TotalTokens: a.TotalTokens + b.TotalTokens, CachedTokens: a.CachedTokens + b.CachedTokens,
		CacheWriteTokens: a.CacheWriteTokens + b.CacheWriteTokens, ReasoningTokens: a.ReasoningTokens + b.ReasoningTokens}
}

// Resumable reports whether the stream relayed so far may be continued:
// some text, no tool call, one choice (chat), and (messages) its text
// block still open.
func (s *Stitch) Resumable() bool {
	if s.tool || s.many || len(bytes.TrimSpace(s.text)) == 0 || len(s.id) == 0 {
		return false
	}
	return s.kind == passChat || s.open
}

// Text is the text relayed so far.
func (s *Stitch) Text() string { return string(s.text) }

// Continue switches s to rewriting a continuation on ep; prior is the
// usage the parts before it reported (has: any).
func (s *Stitch) Continue(ep *Endpoint, prior Usage, has bool) {
	s.ws = ""
	if ep.Format == FormatAnthropic {
		s.ws = trailingSpace(s.text) // BuildPrefill trims it
	}
	if has {
		if s.hasPrior {
			prior = addUsage(prior, s.prior)
		}
		s.prior, s.hasPrior = prior, true
	}
	s.cont, s.seenText, s.spaceYet, s.contIn, s.base = true, false, false, 0, s.index
}

// Undecided reports whether the continuation has sent only whitespace so
// far, so that its start is not checked yet: the attempt holds such events
// back until its first words are, and a repeat is then refused before any
// byte of it reached the client.
func (s *Stitch) Undecided() bool { return s.cont && s.spaceYet && !s.seenText }

// Prior is the usage of the parts before the continuation.
func (s *Stitch) Prior() (Usage, bool) { return s.prior, s.hasPrior }

// Event watches the client bytes of one relayed provider event (out: the
// reader's output, one event or, translated, several) and, during a
// continuation, returns what the client gets instead: nothing for an event
// that would open a second message, else the events with the first
// answer's id, model (and created), block indexes and the summed usage.
// Before a continuation out is returned as it is. The bytes are valid
// until the next call.
func (s *Stitch) Event(out []byte) ([]byte, error) {
	if !s.cont {
		for rest := out; len(rest) > 0; {
			var f EventFields
			f, rest, s.scratch = nextEvent(rest, s.scratch)
			if f.HasData {
				s.watch(f)
			}
		}
		return out, nil
	}
	acc := s.buf[:0]
	for rest := out; len(rest) > 0; {
		var f EventFields
		f, rest, s.scratch = nextEvent(rest, s.scratch)
		if !f.HasData {
			continue // a comment: not for a continuation's client
		}
		var err error
		if acc, err = s.rewrite(acc, f); err != nil {
			return nil, err
		}
	}
	s.buf = acc
	return acc, nil
}

type chatChunk struct {
	ID      json.RawMessage `json:"id"`
	Model   json.RawMessage `json:"model"`
	Created json.RawMessage `json:"created"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role         *string         `json:"role"`
			Content      *string         `json:"content"`
			ToolCalls    json.RawMessage `json:"tool_calls"`
			FunctionCall json.RawMessage `json:"function_call"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
}

// text is the chunk's content; it notes a tool call.
func (s *Stitch) chunkText(c *chatChunk) (text string, role bool) {
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			s.many = true
		}
		if len(ch.Delta.ToolCalls) > 0 && string(ch.Delta.ToolCalls) != "null" ||
			len(ch.Delta.FunctionCall) > 0 && string(ch.Delta.FunctionCall) != "null" {
			s.tool = true
		}
		if ch.Delta.Content != nil {
			text += *ch.Delta.Content
		}
		role = role || ch.Delta.Role != nil
	}
	return text, role
}

type messagesEvent struct {
	Index        *int `json:"index"`
	ContentBlock *struct {
		Type string `json:"type"`
	} `json:"content_block"`
	Delta *struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"delta"`
	Message *struct {
		ID    json.RawMessage `json:"id"`
		Model json.RawMessage `json:"model"`
		Usage *wideUsage      `json:"usage"`
	} `json:"message"`
	Usage *wideUsage `json:"usage"`
}

// messagesNamed: the events Stitch reads; others pass as they are.
func messagesNamed(name string) bool {
	switch name {
	case "message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta":
		return true
	}
	return false
}

// watch follows one event of the first answer.
func (s *Stitch) watch(f EventFields) {
	if s.kind == passChat {
		var c chatChunk
		if isDoneData(f.Data) || json.Unmarshal(f.Data, &c) != nil {
			return
		}
		if len(s.id) == 0 && len(c.ID) > 0 {
			s.id, s.mdl = append(s.id[:0], c.ID...), append(s.mdl[:0], c.Model...)
			s.created = append(s.created[:0], c.Created...)
		}
		text, _ := s.chunkText(&c)
		s.text = append(s.text, text...)
		return
	}
	name := string(f.Name)
	var e messagesEvent
	if !messagesNamed(name) || json.Unmarshal(f.Data, &e) != nil {
		return
	}
	switch name {
	case "message_start":
		if e.Message != nil {
			s.id, s.mdl = append(s.id[:0], e.Message.ID...), append(s.mdl[:0], e.Message.Model...)
		}
	case "content_block_start":
		if e.Index != nil {
			s.index = *e.Index
		}
		s.open = e.ContentBlock != nil && e.ContentBlock.Type == "text"
		s.tool = s.tool || !s.open
	case "content_block_delta":
		if e.Delta != nil && e.Delta.Type == "text_delta" {
			s.text = append(s.text, e.Delta.Text...)
		}
	case "content_block_stop":
		s.open = false
	}
}

// rewrite appends to dst what the client gets for one event of a
// continuation.
func (s *Stitch) rewrite(dst []byte, f EventFields) ([]byte, error) {
	if s.kind == passChat {
		return s.rewriteChat(dst, f.Data)
	}
	return s.rewriteMessages(dst, f)
}

func (s *Stitch) rewriteChat(dst, d []byte) ([]byte, error) {
	var c chatChunk
	if isDoneData(d) || json.Unmarshal(d, &c) != nil {
		return appendDataLines(dst, d), nil
	}
	text, role := s.chunkText(&c)
	if role && text == "" && len(c.Choices) == 1 && c.Choices[0].FinishReason == nil && !s.tool {
		return dst, nil // the continuation's role chunk: the client has one
	}
	for _, ch := range c.Choices {
		if ch.FinishReason != nil {
			s.seenText = true // the continuation ends: nothing of it can repeat any more
		}
	}
	if err := s.checkStart(text); err != nil {
		return nil, err
	}
	b := append([]byte(nil), d...)
	if t := s.dropSpace(text); len(t) != len(text) {
		text, b = t, spliceChatContent(b, t)
	}
	s.text = append(s.text, text...)
	b = spliceMember(b, `"id"`, s.id)
	if len(s.mdl) > 0 {
		b = spliceMember(b, `"model"`, s.mdl)
	}
	if len(s.created) > 0 {
		b = spliceMember(b, `"created"`, s.created)
	}
	if s.hasPrior && len(c.Usage) > 0 && c.Usage[0] == '{' {
		var w wideUsage
		if json.Unmarshal(c.Usage, &w) == nil {
			u := w.usage()
			sum := []byte(`{"prompt_tokens":` + strconv.FormatInt(u.PromptTokens+s.prior.PromptTokens, 10) +
				`,"completion_tokens":` + strconv.FormatInt(u.CompletionTokens+s.prior.CompletionTokens, 10) +
				`,"total_tokens":` + strconv.FormatInt(u.TotalTokens+s.prior.TotalTokens, 10) + `}`)
			b = spliceMember(b, `"usage"`, sum)
		}
	}
	return appendDataLines(dst, b), nil
}

func (s *Stitch) rewriteMessages(dst []byte, f EventFields) ([]byte, error) {
	name := string(f.Name)
	if name == "ping" {
		return dst, nil
	}
	var e messagesEvent
	if !messagesNamed(name) || json.Unmarshal(f.Data, &e) != nil {
		return appendDataLines(appendEventName(dst, name), f.Data), nil
	}
	switch name {
	case "message_start":
		if e.Message != nil && e.Message.Usage != nil {
			s.contIn = e.Message.Usage.usage().PromptTokens
		}
		return dst, nil
	case "content_block_stop", "message_delta":
		s.seenText = true // the text ends: nothing of it can repeat any more
	case "content_block_start":
		if e.Index != nil && *e.Index == 0 {
			if e.ContentBlock == nil || e.ContentBlock.Type != "text" {
				return nil, ErrRepeats // not a continuation of the open text
			}
			return dst, nil
		}
		if e.ContentBlock != nil && e.ContentBlock.Type != "text" {
			s.tool = true
		}
	}
	b := append([]byte(nil), f.Data...)
	if name == "content_block_delta" && e.Delta != nil && e.Delta.Type == "text_delta" {
		if err := s.checkStart(e.Delta.Text); err != nil {
			return nil, err
		}
		text := e.Delta.Text
		if t := s.dropSpace(text); len(t) != len(text) {
			text = t
			b = spliceMember(b, `"delta"`, append(jsontext.AppendString([]byte(`{"type":"text_delta","text":`), t), '}'))
		}
		s.text = append(s.text, text...)
	}
	if e.Index != nil {
		// The continuation's block 0 goes on the open text block, its
		// later blocks after it; a continuation cut in turn is resumable
		// only inside an open text block, as the first answer.
		at := s.base + *e.Index
		switch name {
		case "content_block_start":
			s.index, s.open = at, e.ContentBlock != nil && e.ContentBlock.Type == "text"
		case "content_block_stop":
			s.open = s.open && at != s.index
		}
		b = spliceMember(b, `"index"`, strconv.AppendInt(nil, int64(at), 10))
	}
	if name == "message_delta" && e.Usage != nil {
		u := e.Usage.usage()
		in := s.contIn
		if u.PromptTokens > 0 {
			in = u.PromptTokens // a translated stream's, known at its end
		}
		b = spliceMember(b, `"usage"`, []byte(`{"input_tokens":`+strconv.FormatInt(in+s.prior.PromptTokens, 10)+
			`,"output_tokens":`+strconv.FormatInt(e.Usage.OutputTokens+s.prior.CompletionTokens, 10)+`}`))
	}
	return appendDataLines(appendEventName(dst, name), b), nil
}

func appendEventName(dst []byte, name string) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	return append(dst, '\n')
}

// dropSpace takes from the start of a continuation's text the whitespace
// the client already has (s.ws), so that the join is not doubled: a
// continuation of "Hello, " prefilled as "Hello," starts " world", and
// the client gets "world".
func (s *Stitch) dropSpace(text string) string {
	if s.ws == "" || text == "" {
		return text
	}
	n := 0
	for n < len(text) && n < len(s.ws) && text[n] == s.ws[n] {
		n++
	}
	if n < len(text) {
		s.ws = "" // the continuation says something of its own now
	} else {
		s.ws = s.ws[n:]
	}
	return text[n:]
}

// checkStart checks the continuation's first text (not only whitespace)
// against what was relayed: a continuation that starts the way the answer
// started (the fallback answered afresh), or that starts with the relayed
// text's last words (it repeats where it was asked to go on), is not
// stitched.
func (s *Stitch) checkStart(text string) error {
	if s.seenText {
		return nil
	}
	p := strings.TrimLeft(text, " \t\r\n")
	if p == "" {
		s.spaceYet = s.spaceYet || text != ""
		return nil // decided by the first text that says something
	}
	s.seenText = true
	if repeats(string(s.text), p) {
		return ErrRepeats
	}
	return nil
}

// repeats reports whether p, the first text of a continuation (leading
// space trimmed), repeats relayed: one is a prefix of the other as the
// answer began, or p is what relayed ends with, or p starts with a suffix
// of relayed (from a word's start, four bytes or more).
func repeats(relayed, p string) bool {
	r := strings.TrimLeft(relayed, " \t\r\n")
	if n := min(len(p), len(r)); n > 0 && p[:n] == r[:n] {
		return true
	}
	end := strings.TrimRight(relayed, " \t\r\n")
	if q := strings.TrimRight(p, " \t\r\n"); len(q) >= 2 && strings.HasSuffix(end, q) {
		return true
	}
	// A suffix of the relayed text, from a word's start, that p starts
	// with: the continuation repeats where it was asked to go on.
	for k := max(0, len(end)-tailLen); k < len(end)-3; k++ {
		if (k == 0 || isSpace(end[k-1])) && !isSpace(end[k]) && strings.HasPrefix(p, end[k:]) {
			return true
		}
	}
	return false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// tailLen is how far back from the relayed text's end a repeated suffix
// is looked for.
const tailLen = 64
