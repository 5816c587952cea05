package mockupstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

const messagesBody = `{"model":"claude-test","max_tokens":64,"system":"be brief","messages":[{"role":"user","content":"hi"}]}`
const messagesStreamBody = `{"model":"claude-test","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
const messagesToolsBody = `{"model":"claude-test","max_tokens":64,"tools":[{"name":"lookup","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}]}`

// anthropicAuth is what the gateway's Anthropic provider must send.
var anthropicAuth = []string{"X-Api-Key", "sk-ant-test", "Anthropic-Version", "2023-06-01"}

func withAuth(headers ...string) []string {
	return append(append([]string(nil), anthropicAuth...), headers...)
}

type anthropicMessage struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Model        string  `json:"model"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Content      []struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content"`
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// TestMessagesGolden pins the exact bytes of a small answer in both modes: what a
// gateway relaying Anthropic verbatim must pass through unchanged.
func TestMessagesGolden(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"non-stream", messagesBody, `{"id":"msg_mock_1","type":"message","role":"assistant","model":"claude-test",` +
			`"content":[{"type":"text","text":"Hello from g chunk 1 2"}],"stop_reason":"end_turn","stop_sequence":null,` +
			`"usage":{"input_tokens":26,"output_tokens":2}}` + "\n"},
		{"stream", messagesStreamBody, "" +
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_mock_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: ping\ndata: {\"type\":\"ping\"}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello from g chunk 1\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" 2\"}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ts := start(t, Behavior{Identity: "g", Chunks: 2})
			resp := postTo(t, context.Background(), ts, pathMessages, tt.body, anthropicAuth...)
			raw := readAll(t, resp)
			if resp.StatusCode != http.StatusOK || string(raw) != tt.want {
				t.Errorf("got %d\n%s\nwant 200\n%s", resp.StatusCode, raw, tt.want)
			}
			if got := resp.Header.Get("Request-Id"); got != "req_mock_1" {
				t.Errorf("Request-Id = %q, want req_mock_1", got)
			}
		})
	}
}

// TestMessagesNonStream covers the message shape on both paths, with and without a
// tool call.
func TestMessagesNonStream(t *testing.T) {
	tests := []struct {
		name, path, body string
		b                Behavior
		headers          []string
		wantTool         string
	}{
		{"text on /v1/messages", pathMessages, messagesBody, Behavior{}, nil, ""},
		{"text on /messages", "/messages", messagesBody, Behavior{Identity: "p", Chunks: 5}, nil, ""},
		{"tool by header", pathMessages, messagesBody, Behavior{}, []string{HeaderToolUse, "get_weather"}, "get_weather"},
		{"first tool of the request", pathMessages, messagesToolsBody, Behavior{ToolUse: ToolUseFirst}, nil, "lookup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ts := start(t, tt.b)
			resp := postTo(t, context.Background(), ts, tt.path, tt.body, withAuth(tt.headers...)...)
			raw := readAll(t, resp)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("got %d %s (%s), want 200 JSON", resp.StatusCode, raw, resp.Header.Get("Content-Type"))
			}
			var m anthropicMessage
			decodeInto(t, string(raw), &m)
			identity, chunks := DefaultIdentity, DefaultChunks
			if tt.b.Identity != "" {
				identity, chunks = tt.b.Identity, tt.b.Chunks
			}
			wantText := "Hello from " + identity + " chunk 1"
			for i := 2; i <= chunks; i++ {
				wantText += " " + strconv.Itoa(i)
			}
			if !strings.HasPrefix(m.ID, "msg_mock_") || m.Type != "message" || m.Role != "assistant" || m.Model != "claude-test" ||
				m.StopSequence != nil || !strings.Contains(string(raw), `"stop_sequence":null`) {
				t.Errorf("message header fields wrong: %s", raw)
			}
			if len(m.Content) == 0 || m.Content[0].Type != "text" || m.Content[0].Text != wantText {
				t.Fatalf("content = %s, want a text block %q first", raw, wantText)
			}
			wantStop, wantOut, wantBlocks := "end_turn", chunks, 1
			if tt.wantTool != "" {
				wantStop, wantOut, wantBlocks = "tool_use", chunks+2, 2
			}
			if len(m.Content) != wantBlocks || m.StopReason == nil || *m.StopReason != wantStop {
				t.Fatalf("content blocks %d stop_reason %v, want %d and %s: %s", len(m.Content), m.StopReason, wantBlocks, wantStop, raw)
			}
			if tt.wantTool != "" {
				tb := m.Content[1]
				if tb.Type != "tool_use" || tb.Name != tt.wantTool || !strings.HasPrefix(tb.ID, "toolu_mock_") ||
					string(tb.Input) != `{"identity":"`+identity+`"}` {
					t.Errorf("tool block = %+v (input %s), want tool_use %s", tb, tb.Input, tt.wantTool)
				}
			}
			if m.Usage.InputTokens != (len(tt.body)+3)/4 || m.Usage.OutputTokens != wantOut {
				t.Errorf("usage = %+v, want input %d output %d", m.Usage, (len(tt.body)+3)/4, wantOut)
			}
		})
	}
}

// TestMessagesStream checks the event order Anthropic's SDKs expect, the text the deltas
// add up to, and that a tool call streams its input as partial JSON in several pieces.
func TestMessagesStream(t *testing.T) {
	tests := []struct {
		name    string
		headers []string
		tool    bool
	}{
		{"text", nil, false},
		{"tool use", []string{HeaderToolUse, "get_weather"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := start(t, Behavior{Comments: 1})
			resp := postTo(t, context.Background(), ts, "/messages", messagesStreamBody, withAuth(tt.headers...)...)
			raw := readAll(t, resp)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("got %d %s, want a 200 event stream", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			events := splitNamedEvents(t, raw)
			want := []string{"", "message_start", "content_block_start", "ping",
				"content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop"}
			if tt.tool {
				want = append(want, "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop")
			}
			want = append(want, "message_delta", "message_stop")
			if got := eventNames(events); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("events = %q, want %q", got, want)
			}
			var text, partial strings.Builder
			var stop struct {
				Delta struct {
					StopReason string `json:"stop_reason"`
				} `json:"delta"`
				Usage struct {
					OutputTokens int `json:"output_tokens"`
				} `json:"usage"`
			}
			for _, e := range events {
				switch e.Name {
				case "content_block_delta":
					var d struct {
						Index int `json:"index"`
						Delta struct {
							Type        string `json:"type"`
							Text        string `json:"text"`
							PartialJSON string `json:"partial_json"`
						} `json:"delta"`
					}
					decodeInto(t, e.Data, &d)
					switch {
					case d.Index == 0 && d.Delta.Type == "text_delta":
						text.WriteString(d.Delta.Text)
					case d.Index == 1 && d.Delta.Type == "input_json_delta":
						if json.Valid([]byte(d.Delta.PartialJSON)) {
							t.Errorf("fragment %q is whole JSON; want it split", d.Delta.PartialJSON)
						}
						partial.WriteString(d.Delta.PartialJSON)
					default:
						t.Errorf("unexpected delta %s", e.Data)
					}
				case "message_delta":
					decodeInto(t, e.Data, &stop)
				}
			}
			if text.String() != "Hello from mock chunk 1 2 3" {
				t.Errorf("text = %q", text.String())
			}
			wantStop, wantOut := "end_turn", 3
			if tt.tool {
				wantStop, wantOut = "tool_use", 5
				if partial.String() != `{"identity":"mock"}` {
					t.Errorf("joined partial_json = %q", partial.String())
				}
				if !strings.Contains(string(raw), `"content_block":{"type":"tool_use","id":"toolu_mock_1","name":"get_weather","input":{}}`) {
					t.Errorf("tool block start missing: %s", raw)
				}
			}
			if stop.Delta.StopReason != wantStop || stop.Usage.OutputTokens != wantOut {
				t.Errorf("message_delta = %+v, want %s with %d output tokens", stop, wantStop, wantOut)
			}
			waitIdle(t, s)
			if st, _ := s.StatsFor(pathMessages); st.Completed != 1 || st.Requests != 1 {
				t.Errorf("messages stats = %+v, want 1 completed", st)
			}
		})
	}
}

// TestMessagesErrors: injected statuses and refusals come back Anthropic-shaped, with
// the error type Anthropic uses for the status, and are counted.
func TestMessagesErrors(t *testing.T) {
	tests := []struct {
		name           string
		b              Behavior
		body           string
		headers        []string
		wantStatus     int
		wantType       string
		wantMessage    string
		wantRetryAfter string
		rejected       bool
	}{
		{"529 overloaded", Behavior{}, messagesBody, withAuth(HeaderStatus, "529"), 529, "overloaded_error", "Overloaded", "", false},
		{"529 stream fails before SSE", Behavior{Status: 529}, messagesStreamBody, anthropicAuth, 529, "overloaded_error", "Overloaded", "", false},
		{"429 with retry-after", Behavior{Status: 429, RetryAfter: "3"}, messagesBody, anthropicAuth, 429, "rate_limit_error", "mock error", "3", false},
		{"401", Behavior{Status: 401}, messagesBody, anthropicAuth, 401, "authentication_error", "mock error", "", false},
		{"403", Behavior{Status: 403}, messagesBody, anthropicAuth, 403, "permission_error", "mock error", "", false},
		{"404", Behavior{Status: 404}, messagesBody, anthropicAuth, 404, "not_found_error", "mock error", "", false},
		{"500", Behavior{FailRate: 1}, messagesBody, anthropicAuth, 500, "api_error", "mock error", "", false},
		{"504", Behavior{Status: 504}, messagesBody, anthropicAuth, 504, "timeout_error", "mock error", "", false},
		{"key status by x-api-key", Behavior{KeyStatus: map[string]int{"sk-ant-test": 429}}, messagesBody, anthropicAuth, 429, "rate_limit_error", "mock error", "", false},
		{"missing x-api-key", Behavior{}, messagesBody, []string{"Anthropic-Version", "2023-06-01"}, 401, "authentication_error", "x-api-key header is required", "", true},
		{"bearer is not x-api-key", Behavior{}, messagesBody, []string{"Authorization", "Bearer sk", "Anthropic-Version", "2023-06-01"}, 401, "authentication_error", "x-api-key header is required", "", true},
		{"missing anthropic-version", Behavior{}, messagesBody, []string{"X-Api-Key", "k"}, 400, "invalid_request_error", "anthropic-version: header is required", "", true},
		{"missing max_tokens", Behavior{}, `{"model":"m","messages":[{}]}`, anthropicAuth, 400, "invalid_request_error", "max_tokens: Field required", "", true},
		{"missing model", Behavior{}, `{"max_tokens":1,"messages":[{}]}`, anthropicAuth, 400, "invalid_request_error", "model: Field required", "", true},
		{"empty messages", Behavior{}, `{"model":"m","max_tokens":1,"messages":[]}`, anthropicAuth, 400, "invalid_request_error", "messages: Field required", "", true},
		{"first tool without tools", Behavior{}, messagesBody, withAuth(HeaderToolUse, ToolUseFirst), 400, "invalid_request_error", "", "", true},
		{"bad mock header", Behavior{}, messagesBody, withAuth(HeaderChunks, "x"), 400, "invalid_request_error", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := start(t, tt.b)
			resp := postTo(t, context.Background(), ts, pathMessages, tt.body, tt.headers...)
			raw := readAll(t, resp)
			if resp.StatusCode != tt.wantStatus || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("got %d %s, want %d JSON", resp.StatusCode, raw, tt.wantStatus)
			}
			var e anthropicError
			decodeInto(t, string(raw), &e)
			if e.Type != "error" || e.Error.Type != tt.wantType || tt.wantMessage != "" && e.Error.Message != tt.wantMessage || e.Error.Message == "" {
				t.Errorf("body = %s, want type %s message %q", raw, tt.wantType, tt.wantMessage)
			}
			if !tt.rejected && (e.RequestID == "" || e.RequestID != resp.Header.Get("Request-Id")) {
				t.Errorf("request_id %q, Request-Id header %q; want the same id", e.RequestID, resp.Header.Get("Request-Id"))
			}
			if got := resp.Header.Get("Retry-After"); got != tt.wantRetryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tt.wantRetryAfter)
			}
			waitIdle(t, s)
			st := s.Stats()
			if tt.rejected && st.Rejected != 1 || !tt.rejected && st.Failed != 1 {
				t.Errorf("stats = %+v, want it counted as rejected=%v", st, tt.rejected)
			}
		})
	}
}

// TestMessagesKeyless: a mock configured keyless (or told so per request) serves a
// request without x-api-key.
func TestMessagesKeyless(t *testing.T) {
	for _, tt := range []struct {
		name    string
		b       Behavior
		headers []string
	}{
		{"behavior", Behavior{Keyless: true}, []string{"Anthropic-Version", "2023-06-01"}},
		{"header", Behavior{}, []string{"Anthropic-Version", "2023-06-01", HeaderKeyless, "true"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ts := start(t, tt.b)
			resp := postTo(t, context.Background(), ts, pathMessages, messagesBody, tt.headers...)
			if raw := readAll(t, resp); resp.StatusCode != http.StatusOK {
				t.Errorf("got %d %s, want 200", resp.StatusCode, raw)
			}
		})
	}
}

// TestMessagesStreamError: ErrorAfterChunks ends the stream as Anthropic reports a
// failure after it started: an error event, cleanly, without message_stop.
func TestMessagesStreamError(t *testing.T) {
	s, ts := start(t, Behavior{})
	resp := postTo(t, context.Background(), ts, pathMessages, messagesStreamBody, withAuth(HeaderErrorAfterChunks, "2")...)
	raw := readAll(t, resp) // a clean end: no unexpected EOF
	events := splitNamedEvents(t, raw)
	want := []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta", "error"}
	if got := eventNames(events); resp.StatusCode != http.StatusOK || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %d with events %q, want 200 with %q", resp.StatusCode, got, want)
	}
	var e anthropicError
	decodeInto(t, events[len(events)-1].Data, &e)
	if e.Error.Type != "overloaded_error" || e.Error.Message != "Overloaded" {
		t.Errorf("error event = %s", events[len(events)-1].Data)
	}
	waitIdle(t, s)
	if st := s.Stats(); st.Failed != 1 || st.Completed != 0 {
		t.Errorf("stats = %+v, want Failed 1", st)
	}
}
