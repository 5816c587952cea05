package upstream

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/llmgw/gateway/internal/jsontext"
)

// The bytes a resume changes (resume.go): the continuation's request, the
// client's with the relayed text as its last message, and the members of
// a continuation's events that must be the first answer's.

// spliceMember replaces the value of the top-level member key (quoted) of
// the JSON object b with val (the last of duplicate keys, as memberSpan
// finds it); b is returned unchanged without one.
func spliceMember(b []byte, key string, val []byte) []byte {
	_, vs, ve, ok := memberSpan(b, []byte(key))
	if !ok {
		return b
	}
	out := make([]byte, 0, len(b)-(ve-vs)+len(val))
	return append(append(append(out, b[:vs]...), val...), b[ve:]...)
}

// spliceChatContent replaces the delta content of a chat chunk's first
// choice with text; b is returned unchanged without one.
func spliceChatContent(b []byte, text string) []byte {
	_, cs, ce, ok := memberSpan(b, []byte(`"choices"`))
	if !ok || b[cs] != '[' {
		return b
	}
	es := jsontext.SkipSpace(b, cs+1)
	ee := jsontext.SkipValue(b, es)
	if es >= ce || ee <= es {
		return b
	}
	el := b[es:ee]
	_, ds, de, ok := memberSpan(el, []byte(`"delta"`))
	if !ok {
		return b
	}
	delta := spliceMember(el[ds:de], `"content"`, jsontext.AppendString(nil, text))
	out := make([]byte, 0, len(b)+len(delta))
	out = append(out, b[:es+ds]...)
	out = append(out, delta...)
	return append(out, b[es+de:]...)
}

// trailingSpace is the whitespace s ends with.
func trailingSpace(s []byte) string {
	return string(s[len(bytes.TrimRight(s, " \t\r\n")):])
}

// BuildPrefill sets call's URL and Body for a continuation on ep: the
// client's request with text appended to its messages as a last assistant
// message, then built for ep as Build would (the model spliced, or the
// whole translated). Anthropic refuses a prefill that ends with
// whitespace, so it is trimmed for an anthropic provider.
func (r *ChatRequest) BuildPrefill(ep *Endpoint, model, text string, call *Call) error {
	if r.Route != RouteChat && r.Route != RouteMessages {
		return &RequestError{Message: "only chat and messages streams are resumed"}
	}
	var req struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if json.Unmarshal(r.Body, &req) != nil || len(req.Messages) == 0 || req.Messages[len(req.Messages)-1].Role == "assistant" {
		// The client's own prefill: what the model wrote continues it, and
		// two assistant messages in a row are not one prefill everywhere.
		return &RequestError{Param: "messages", Message: "the request ends with an assistant message"}
	}
	if ep.Format == FormatAnthropic {
		text = strings.TrimRight(text, " \t\r\n")
	}
	msg := append([]byte(`{"role":"assistant","content":`), jsontext.AppendString(nil, text)...)
	body, ok := appendMessage(r.Body, append(msg, '}'))
	if !ok {
		return &RequestError{Param: "messages", Message: "messages is not an array"}
	}
	pr, err := ParseRequest(r.Route, body)
	if err != nil {
		return err
	}
	return pr.Build(ep, model, call)
}

// appendMessage returns a copy of body with msg appended to its top-level
// messages array.
func appendMessage(body, msg []byte) ([]byte, bool) {
	_, vs, ve, ok := memberSpan(body, []byte(`"messages"`))
	if !ok || body[vs] != '[' || body[ve-1] != ']' {
		return nil, false
	}
	out := make([]byte, 0, len(body)+len(msg)+1)
	out = append(out, body[:ve-1]...)
	if jsontext.SkipSpace(body, vs+1) != ve-1 {
		out = append(out, ',')
	}
	return append(append(out, msg...), body[ve-1:]...), true
}
