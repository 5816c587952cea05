package upstream

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/llmgw/gateway/internal/upstream/anthropic"
	"github.com/llmgw/gateway/internal/upstream/anthropicclient"
)

// Fuzz targets for the usage readers of every format, each fed one usage
// object (two for an Anthropic stream: message_start's and
// message_delta's) inside the body or events its provider sends. Whatever
// the object, a reader never panics, and a usage it reports meets
// holdUsage (CheckUsage; a cost at any price finite, not negative, within
// bounds and exact at a real price) and comes from an object whose counts
// are all sane (refSane): a negative, fractional or absurd count anywhere
// in what it reads refuses the usage rather than being dropped or netted
// out. Where the reader's result is specified whole (chat and embeddings by
// refChat, Responses and Anthropic pass-through by refWide), it is that.
// usage_fuzzref_test.go has the specification.

// oneLine makes b fit in one SSE data line: a line end is JSON whitespace
// outside strings, and inside one it was invalid JSON anyway.
func oneLine(b []byte) []byte {
	return bytes.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, b)
}

// tailJudged reports whether a body's tail reader can be held to the
// specification on usage object b: TailUsage takes the last "usage" key of
// the tail, so an object holding one of its own is left out, and an
// object that is not one (b "{" makes the wrapper's closing brace its
// own: "usage":{} in a cut body) is not b.
func tailJudged(b []byte) bool {
	return !bytes.Contains(b, []byte("usage")) && (json.Valid(b) || !bytes.ContainsAny(b, "{}"))
}

// FuzzChatUsage: the chat usage chunk (with and without the gateway hiding
// it from the client), a chat body's tail and an embeddings body's tail.
func FuzzChatUsage(f *testing.F) {
	addUsageSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		b = oneLine(b)
		want, isObject, readable := refChat(b)
		wantOK := isObject && readable && CheckUsage(want) == nil
		judge := func(what string, u Usage, ok, judged bool) {
			holdUsage(t, what, u, ok)
			if judged && isObject && (ok != wantOK || ok && u != want) {
				t.Fatalf("%s of %q: %+v %v, want %+v %v", what, b, u, ok, want, wantOK)
			}
		}
		ev := []byte(`data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":` + string(b) + "}\n\n")
		for _, hide := range []bool{false, true} {
			p := &PassReader{kind: passChat, hide: hide}
			_, _ = p.Event(nil, bytes.Clone(ev), true)
			u, ok := p.Usage()
			judge("chat chunk", u, ok, true)
		}
		body := []byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],"usage":` + string(b) + "}")
		p := &PassReader{kind: passChat}
		u, ok := p.TailUsage(body)
		judge("chat body", u, ok, tailJudged(b))
		p = &PassReader{kind: passEmbeddings}
		u, ok = p.TailUsage([]byte(`{"object":"list","data":[],"model":"m","usage":` + string(b) + "}"))
		judge("embeddings body", u, ok, tailJudged(b))
	})
}

// judgeWide holds a Responses or Anthropic pass-through usage to refWide.
func judgeWide(t *testing.T, what string, b []byte, u Usage, ok, judged bool) {
	t.Helper()
	holdUsage(t, what, u, ok)
	if !judged {
		return
	}
	sane := refSane(b, wideCountNames, wideDetailNames) && string(b) != "null"
	if ok && !sane {
		t.Fatalf("%s of %q: reported %+v from counts that are not all sane", what, b, u)
	}
	if sane {
		want := refWide(b)
		if wantOK := CheckUsage(want) == nil; ok != wantOK || ok && u != want {
			t.Fatalf("%s of %q: %+v %v, want %+v %v", what, b, u, ok, want, wantOK)
		}
	}
}

// FuzzResponsesUsage: response.completed's usage and a Responses body's
// tail.
func FuzzResponsesUsage(f *testing.F) {
	addUsageSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		b = oneLine(b)
		p := &PassReader{kind: passResponses}
		ev := "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"usage\":" +
			string(b) + "}}\n\n"
		_, _ = p.Event(nil, []byte(ev), true)
		u, ok := p.Usage()
		judgeWide(t, "response.completed", b, u, ok, true)
		p = &PassReader{kind: passResponses}
		u, ok = p.TailUsage([]byte(`{"id":"r","object":"response","status":"completed","output":[],"usage":` + string(b) + "}"))
		judgeWide(t, "responses body", b, u, ok, tailJudged(b))
	})
}

// anthropicEvents is an Anthropic stream whose message_start carries usage
// start and whose message_delta carries usage delta.
func anthropicEvents(start, delta []byte) [][]byte {
	return [][]byte{
		[]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\"," +
			"\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":" + string(start) + "}}\n\n"),
		[]byte("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"),
		[]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n"),
		[]byte("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"),
		[]byte("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":" +
			string(delta) + "}\n\n"),
		[]byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"),
	}
}

// FuzzMessagesUsage: an Anthropic stream's message_start and message_delta
// usage and a Messages body's, read as passed through to an Anthropic
// client and as translated for an OpenAI client.
func FuzzMessagesUsage(f *testing.F) {
	addUsageSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		b = oneLine(b)
		// The delta is b too: each event's usage is judged, the
		// combination with message_start's by the seeds of two objects.
		start, delta := b, b
		if i := bytes.Index(b, []byte(" | ")); i >= 0 {
			start, delta = b[:i], b[i+3:]
		}
		bothSane := func(names []string, details [][2]string) bool {
			return refSane(start, names, details) && refSane(delta, names, details)
		}

		p := &PassReader{kind: passMessages}
		for _, ev := range anthropicEvents(start, delta) {
			_, _ = p.Event(nil, ev, true)
		}
		u, ok := p.Usage()
		holdUsage(t, "messages stream", u, ok)
		if ok && !bothSane(wideCountNames, wideDetailNames) {
			t.Fatalf("messages stream of %q, %q: reported %+v from counts that are not all sane", start, delta, u)
		}
		p = &PassReader{kind: passMessages}
		u, ok = p.TailUsage([]byte(`{"id":"msg_1","type":"message","content":[],"usage":` + string(start) + "}"))
		judgeWide(t, "messages body", start, u, ok, tailJudged(start))

		// Translated for an OpenAI client: the translator's scanner
		// matches exact keys, and escaped ones are left unjudged.
		fa := &fromAnthropic{t: anthropic.NewStreamTranslator("m", 1, true), model: "m", created: 1}
		for _, ev := range anthropicEvents(start, delta) {
			if _, err := fa.Event(nil, ev, false); err != nil {
				break
			}
		}
		u, ok = fa.Usage()
		holdUsage(t, "translated messages stream", u, ok)
		refExact = true
		sane := bothSane(messagesCountNames, nil)
		refExact = false
		if ok && !sane && !bytes.Contains(b, []byte(`\`)) {
			t.Fatalf("translated messages stream of %q, %q: reported %+v from counts that are not all sane", start, delta, u)
		}
		fa = &fromAnthropic{t: anthropic.NewStreamTranslator("m", 1, false), model: "m", created: 1}
		_, _ = fa.Body([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],` +
			`"stop_reason":"end_turn","stop_sequence":null,"usage":` + string(start) + "}"))
		u, ok = fa.Usage()
		holdUsage(t, "translated messages body", u, ok)
		if ok && !refSane(start, messagesCountNames, nil) {
			t.Fatalf("translated messages body of %q: reported %+v from counts that are not all sane", start, u)
		}
	})
}

// FuzzToAnthropicUsage: an OpenAI chat provider's usage, body and usage
// chunk, read for an Anthropic client. Its cache and reasoning counts are
// the cost's as they are on the pass-through.
func FuzzToAnthropicUsage(f *testing.F) {
	addUsageSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		b = oneLine(b)
		want, isObject, readable := refChat(b)
		// A usage of nothing but zeros is no usage on this route.
		wantOK := isObject && readable && CheckUsage(want) == nil && want != Usage{}
		judge := func(what string, u Usage, ok bool, exact bool) {
			holdUsage(t, what, u, ok)
			refExact = exact
			sane := refSane(b, chatCountNames, chatDetails)
			refExact = false
			if exact && bytes.Contains(b, []byte(`\`)) {
				return
			}
			if ok && !sane {
				t.Fatalf("%s of %q: reported %+v from counts that are not all sane", what, b, u)
			}
			if !exact && wantOK && (!ok || u.PromptTokens != want.PromptTokens || u.CompletionTokens != want.CompletionTokens ||
				u.CachedTokens != want.CachedTokens || u.ReasoningTokens != want.ReasoningTokens) {
				t.Fatalf("%s of %q: %+v %v, want %+v", what, b, u, ok, want)
			}
		}
		ta := &toAnthropic{t: anthropicclient.NewStreamTranslator("m"), model: "m"}
		_, _ = ta.Body([]byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},` +
			`"finish_reason":"stop"}],"usage":` + string(b) + "}"))
		u, ok := ta.Usage()
		judge("chat body for an Anthropic client", u, ok, false)

		ta = &toAnthropic{t: anthropicclient.NewStreamTranslator("m"), model: "m"}
		for _, ev := range []string{
			`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`,
			`data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":` + string(b) + "}",
			"data: [DONE]",
		} {
			if _, err := ta.Event(nil, []byte(ev+"\n\n"), false); err != nil {
				break
			}
		}
		u, ok = ta.Usage()
		judge("chat stream for an Anthropic client", u, ok, true)
	})
}
