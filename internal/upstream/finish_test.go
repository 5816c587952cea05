package upstream

import (
	"strings"
	"testing"
)

// TestPassFinishReasons: the pass-through readers give why the answer
// ended, as OpenAI's finish_reason values, from what they already read:
// a chat stream's finish chunk, an Anthropic stream's message_delta, a
// Responses stream's last event; a non-stream body from the tail (chat,
// messages) or the head (Responses) the attempt keeps. A key quoted in the
// answer's text is never taken for the member, and a stream that never
// said gives nothing.
func TestPassFinishReasons(t *testing.T) {
	const (
		chunk   = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n"
		inText  = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"say \\\"finish_reason\\\": \\\"stop\\\"\"},\"finish_reason\":null}]}\n\n"
		length  = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\" : \"length\"}],\"usage\":null}\n\n"
		unknown = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"abort\"}]}\n\n"
		msgTool = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n"
		msgMax  = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":2}}\n\n"
		rspDone = "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"a \\\"type\\\":\\\"function_call\\\" b\"}]}]}}\n\n"
		rspCall = "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"output\":[{\"type\":\"function_call\",\"name\":\"f\",\"arguments\":\"{}\"}]}}\n\n"
		rspCut  = "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"output\":[]}}\n\n"
		rspFilt = "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"content_filter\"},\"output\":[]}}\n\n"
	)
	stream := []struct {
		name   string
		kind   passKind
		hide   bool
		events []string
		want   string
	}{
		{"chat length", passChat, false, []string{chunk, inText, length, "data: [DONE]\n\n"}, "length"},
		{"chat length, usage hidden", passChat, true, []string{chunk, length}, "length"},
		{"chat unknown value kept", passChat, false, []string{chunk, unknown}, "abort"},
		{"chat never said", passChat, false, []string{chunk, inText}, ""},
		{"messages tool_use", passMessages, false, []string{msgTool}, "tool_calls"},
		{"messages max_tokens", passMessages, false, []string{msgMax}, "length"},
		{"responses completed", passResponses, false, []string{rspDone}, "stop"},
		{"responses function call", passResponses, false, []string{rspCall}, "tool_calls"},
		{"responses max_output_tokens", passResponses, false, []string{rspCut}, "length"},
		{"responses content_filter", passResponses, false, []string{rspFilt}, "content_filter"},
	}
	for _, tt := range stream {
		t.Run(tt.name, func(t *testing.T) {
			p := PassReader{kind: tt.kind, hide: tt.hide}
			for i, ev := range tt.events {
				if _, err := p.Event(nil, []byte(ev), i > 0); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
			}
			if got := strings.Join(p.FinishReasons(nil, nil), ","); got != tt.want {
				t.Errorf("FinishReasons = %q, want %q", got, tt.want)
			}
		})
	}

	body := []struct {
		name       string
		kind       passKind
		head, tail string
		want       string
	}{
		{"chat, two choices", passChat, "", `ut":"a \"finish_reason\":\"x\""},"finish_reason":"stop"},{"index":1,"message":{"content":"b"},"finish_reason":"length"}],"usage":{"prompt_tokens":1}}`, "stop,length"},
		{"chat, tail starts inside the key", passChat, "", `reason":"stop"}],"usage":{}}`, ""},
		{"messages", passMessages, "", `"text":"hi"}],"stop_reason":"refusal","stop_sequence":null,"usage":{}}`, "content_filter"},
		{"responses completed", passResponses, `{"id":"r","status":"completed","output":[{"type":"message"}]}`, "", "stop"},
		{"responses tool", passResponses, `{"id":"r","status":"completed","output":[{"type":"function_call"}]}`, "", "tool_calls"},
		{"responses incomplete", passResponses, `{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}`, "", "length"},
		{"responses failed", passResponses, `{"status":"failed"}`, "", ""},
		{"responses head cut short", passResponses, `{"status":"completed","output":[{"ty`, "", ""},
		{"embeddings", passEmbeddings, `{"data":[]}`, `"finish_reason":"stop"}`, ""},
	}
	for _, tt := range body {
		t.Run("body "+tt.name, func(t *testing.T) {
			p := PassReader{kind: tt.kind}
			if got := strings.Join(p.FinishReasons([]byte(tt.head), []byte(tt.tail)), ","); got != tt.want {
				t.Errorf("FinishReasons = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestTranslatedFinishReasons: a translating reader's finish reason is its
// stream translator's (the OpenAI value it wrote in the finish chunk), or,
// for a whole body, the chat body's it made: the provider's own reason
// mapped once, where the translation maps it.
func TestTranslatedFinishReasons(t *testing.T) {
	const (
		msgStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"
		msgDelta = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":2}}\n\n"
		message  = `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"max_tokens","usage":{"input_tokens":3,"output_tokens":2}}`
		finish   = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
		chatBody = `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	)
	for _, tt := range []struct {
		name   string
		route  Route
		format string
		events []string
		body   string
		want   string
	}{
		{"chat from anthropic stream", RouteChat, FormatAnthropic, []string{msgStart, msgDelta}, "", "length"},
		{"chat from anthropic body", RouteChat, FormatAnthropic, nil, message, "length"},
		{"responses from anthropic stream", RouteResponses, FormatAnthropic, []string{msgStart, msgDelta}, "", "length"},
		{"responses from anthropic body", RouteResponses, FormatAnthropic, nil, message, "length"},
		{"messages from openai stream", RouteMessages, FormatOpenAI, []string{finish}, "", "tool_calls"},
		{"messages from openai body", RouteMessages, FormatOpenAI, nil, chatBody, "content_filter"},
		{"nothing read", RouteChat, FormatAnthropic, nil, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rd := fedReader(t, tt.route, tt.format, tt.events)
			if tt.body != "" {
				if _, err := rd.Body([]byte(tt.body)); err != nil {
					t.Fatalf("Body: %v", err)
				}
			}
			if got := strings.Join(rd.FinishReasons(nil, nil), ","); got != tt.want {
				t.Errorf("FinishReasons = %q, want %q", got, tt.want)
			}
		})
	}
}

// fedReader is the reader of an attempt on a provider of format for a
// client of route, given events (the first before the commit point).
func fedReader(t *testing.T, route Route, format string, events []string) Reader {
	t.Helper()
	req := &ChatRequest{Route: route, Model: "m", optStart: -1}
	var pass PassReader
	rd := req.Reader(testEndpoint(t, format, Auth{}), &pass)
	for i, ev := range events {
		if _, err := rd.Event(nil, []byte(ev), i > 0); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	return rd
}
