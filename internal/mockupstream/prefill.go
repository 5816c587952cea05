package mockupstream

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// Prefill: a request whose last message is the assistant's (a prefill, how a
// gateway resumes a cut stream on another provider) is answered, as a model
// would, with the rest of the answer. The mock's answer is a fixed word
// sequence ("Hello from <identity> chunk 1 2 ... n"), so the continuation
// starts at the chunk after the prefill's words: a prefill of the first k
// chunks' text gets chunks k+1..n, and the prefill and the continuation
// concatenate to the whole answer, without overlap or gap. A prefill that
// does not cover the first chunk's words gets the whole answer again. The
// role chunk (chat) and message_start/content_block_start (messages) are
// sent as always; the usage is the mock's usual one.
//
// Two controls make a provider fail at it, as Behavior fields or headers:
// RejectPrefill answers such a request 400, RepeatOnPrefill ignores the
// prefill and answers from the beginning.
const (
	HeaderRejectPrefill   = "X-Mock-Reject-Prefill"
	HeaderRepeatOnPrefill = "X-Mock-Repeat-On-Prefill"
)

// prefill applies a prefill, if the request's last message is one, to comp:
// it reports false when the request was rejected.
func (c *call) prefill(comp *completion) bool {
	text, ok := prefillText(c.body)
	if !ok {
		return true
	}
	reject, repeat := c.b.RejectPrefill, c.b.RepeatOnPrefill
	for _, h := range []struct {
		name string
		dst  *bool
	}{{HeaderRejectPrefill, &reject}, {HeaderRepeatOnPrefill, &repeat}} {
		if v, ok := headerValue(c.r.Header, h.name); ok {
			t, err := strconv.ParseBool(v)
			if err != nil {
				c.reject(http.StatusBadRequest, h.name+": not a boolean", h.name, "invalid_mock_header")
				return false
			}
			*h.dst = t
		}
	}
	c.s.prefill.Add(1)
	if reject {
		c.reject(http.StatusBadRequest, "this provider does not continue a trailing assistant message", "messages", "prefill_unsupported")
		return false
	}
	if !repeat {
		comp.from = continueFrom(text, comp.identity)
	}
	return true
}

// Prefills counts the requests that came with a prefill.
func (s *Server) Prefills() uint64 { return s.prefill.Load() }

// continueFrom is the first chunk after the words of text: chunk 1 is the
// words of "Hello from <identity> chunk 1", each later chunk one word.
func continueFrom(text, identity string) int {
	words := len(strings.Fields(text))
	first := 4 + len(strings.Fields(identity))
	if words < first {
		return 1
	}
	return words - first + 2
}

// prefillText returns the text of the body's last message when it is the
// assistant's: a string content, or the text parts of a content array.
func prefillText(body []byte) (string, bool) {
	if !bytes.Contains(body, []byte(`"assistant"`)) {
		return "", false // the common request pays one substring search
	}
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Messages) == 0 {
		return "", false
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role != "assistant" {
		return "", false
	}
	var s string
	if json.Unmarshal(last.Content, &s) == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(last.Content, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), true
}
