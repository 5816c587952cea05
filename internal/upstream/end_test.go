package upstream

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestEndBeforeLastEvent protects issue 12 at the readers: when a stream's
// body ends cleanly, End tells a cut (ErrEndedEarly, in a ProtocolError the
// loop fails on) from an answer that is whole, for every reader. Nothing is
// ever made up for a cut stream: no end_turn, message_stop or [DONE], and
// no tool_use over arguments that stop mid-JSON.
func TestEndBeforeLastEvent(t *testing.T) {
	const (
		chunk    = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n"
		finish   = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
		spaced   = "data: {\"choices\": [{\"index\": 0, \"delta\": {}, \"finish_reason\" : \"length\"}]}\n\n"
		toolOpen = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get\",\"arguments\":\"{\\\"ci\"}}]},\"finish_reason\":null}]}\n\n"
		inText   = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"say \\\"finish_reason\\\": \\\"stop\\\"\"},\"finish_reason\":null}]}\n\n"
		msgStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"
		msgText  = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n"
		msgDelta = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n"
		respDelta = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n"
		respDone  = "event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"text\":\"hi\"}\n\n"
	)
	tests := []struct {
		name   string
		route  Route
		format string
		events []string
		whole  bool   // End completes the answer instead of failing
		end    string // in End's bytes when whole (a translated close)
	}{
		{"chat cut", RouteChat, FormatOpenAI, []string{chunk, chunk}, false, ""},
		{"chat finish_reason without [DONE]", RouteChat, FormatOpenAI, []string{chunk, finish}, true, ""},
		{"chat spaced finish_reason", RouteChat, FormatOpenAI, []string{chunk, spaced}, true, ""},
		{"chat finish_reason quoted in the text", RouteChat, FormatOpenAI, []string{inText}, false, ""},
		{"chat from anthropic cut", RouteChat, FormatAnthropic, []string{msgStart, msgText}, false, ""},
		{"chat from anthropic without message_stop", RouteChat, FormatAnthropic, []string{msgStart, msgText, msgDelta}, false, ""},
		{"messages from openai cut", RouteMessages, FormatOpenAI, []string{chunk, chunk}, false, ""},
		{"messages from openai cut in tool arguments", RouteMessages, FormatOpenAI, []string{chunk, toolOpen}, false, ""},
		{"messages from openai finish_reason without [DONE]", RouteMessages, FormatOpenAI, []string{chunk, finish}, true, "\"stop_reason\":\"end_turn\""},
		{"messages pass cut", RouteMessages, FormatAnthropic, []string{msgStart, msgText}, false, ""},
		{"messages pass without message_stop", RouteMessages, FormatAnthropic, []string{msgStart, msgText, msgDelta}, false, ""},
		{"responses cut", RouteResponses, FormatOpenAI, []string{respDelta}, false, ""},
		{"responses without response.completed", RouteResponses, FormatOpenAI, []string{respDelta, respDone}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rd := fedReader(t, tt.route, tt.format, tt.events)
			if rd.Done() {
				t.Fatal("Done before the stream's last event")
			}
			out, err := rd.End(nil)
			if !tt.whole {
				var pe *ProtocolError
				if !errors.As(err, &pe) || !errors.Is(err, ErrEndedEarly) {
					t.Fatalf("End = %q, %v; want a ProtocolError wrapping ErrEndedEarly", out, err)
				}
				if len(out) != 0 {
					t.Fatalf("End of a cut stream made %q", out)
				}
				return
			}
			if err != nil {
				t.Fatalf("End of a whole answer: %v", err)
			}
			if !strings.Contains(string(out), tt.end) || (tt.end == "") != (len(out) == 0) {
				t.Fatalf("End = %q, want %q in it", out, tt.end)
			}
		})
	}
}

// TestPassChatDoneAfterCommit: the pass-through chat reader sees [DONE]
// after the commit point too, so a stream that ends with it is complete.
func TestPassChatDoneAfterCommit(t *testing.T) {
	p := PassReader{kind: passChat}
	for _, ev := range []string{"data: {\"choices\":[]}\n\n", "data: [DONE]\r\n\r\n"} {
		if _, err := p.Event(nil, []byte(ev), true); err != nil {
			t.Fatal(err)
		}
	}
	if !p.Done() {
		t.Fatal("[DONE] after the commit point not seen")
	}
}

// FuzzHasFinishReason: whatever the text of a chunk's content (quotes,
// backslashes, the key's own name), the finish_reason test sees exactly the
// chunk's own finish_reason, its value too when it needs no escape, and
// any bytes at all end the scan.
func FuzzHasFinishReason(f *testing.F) {
	f.Add(`say "finish_reason": "stop"`, "stop", false)
	f.Add(`\"finish_reason\":\"`, "", true)
	f.Add(`finish_reason"`, "length", false)
	f.Add("", "", true)
	f.Fuzz(func(t *testing.T, content, reason string, null bool) {
		c, _ := json.Marshal(content)
		r := []byte("null")
		if !null {
			r, _ = json.Marshal(reason)
		}
		ev := `data: {"choices":[{"index":0,"delta":{"content":` + string(c) + `},"finish_reason":` + string(r) + `}]}` + "\n\n"
		v, got := finishValue([]byte(ev), finishKey)
		if got != !null {
			t.Fatalf("finishValue(%s) found %v, want %v", ev, got, !null)
		}
		if plain := string(r[1:len(r)-1]) == reason; got && plain && string(v) != reason {
			t.Fatalf("finishValue(%s) = %q, want %q", ev, v, reason)
		}
		finishValue([]byte(content), finishKey) // raw bytes: must not panic
	})
}
