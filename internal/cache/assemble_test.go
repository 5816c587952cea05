package cache

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/upstream"
)

// chatStream is an OpenAI stream as OpenAI sends it: a role chunk, text in
// pieces, two tool calls whose arguments come in several deltas, the
// finish, the usage chunk and [DONE], with usage null in every chunk.
const chatStream = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"x"}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Héllo <b>"},"logprobs":null,"finish_reason":null}],"usage":null}

: keep-alive

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"world"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":0}}}

data: [DONE]

`

const chatStored = `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Héllo <b>world","tool_calls":[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":0}},"system_fingerprint":"fp_1"}`

// messagesStream is an Anthropic stream: text, a tool_use whose input
// comes in pieces, a ping, the final usage in message_delta.
const messagesStream = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_read_input_tokens":5,"output_tokens":1}}}` + "\n\n" +
	"event: content_block_start\n" +
	`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
	"event: ping\n" + `data: {"type":"ping"}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me "}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"check <x>."}}` + "\n\n" +
	"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
	"event: content_block_start\n" +
	`data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": "}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}` + "\n\n" +
	"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":1}` + "\n\n" +
	"event: message_delta\n" +
	`data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}` + "\n\n" +
	"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"

const messagesStored = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Let me check <x>."},{"type":"tool_use","id":"toolu_1","input":{"city":"Paris"},"name":"get_weather"}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"cache_read_input_tokens":5,"input_tokens":25,"output_tokens":40}}`

// TestAssemble: a complete stream becomes the non-stream answer, text
// joined, tool calls joined by index, finish and usage kept, written in
// any pieces (every split point, "\r\n" line ends cut in half).
func TestAssemble(t *testing.T) {
	for _, tt := range []struct {
		route        upstream.Route
		stream, want string
	}{
		{upstream.RouteChat, chatStream, chatStored},
		{upstream.RouteMessages, messagesStream, messagesStored},
	} {
		for _, crlf := range []bool{false, true} {
			stream := tt.stream
			if crlf {
				stream = strings.ReplaceAll(stream, "\n", "\r\n")
			}
			got, err := Assemble(tt.route, []byte(stream), 1<<20, nil)
			if err != nil || string(got) != tt.want {
				t.Fatalf("%s crlf=%v: Assemble = %s, %v\nwant %s", tt.route, crlf, got, err, tt.want)
			}
			for _, step := range []int{1, 7, 64} {
				a := NewAssembler(tt.route, 1<<20)
				for i := 0; i < len(stream); i += step {
					_, _ = a.Write([]byte(stream[i:min(i+step, len(stream))]))
				}
				if got, err := a.Body(nil); err != nil || string(got) != tt.want {
					t.Fatalf("%s crlf=%v written %d bytes at a time: %s, %v", tt.route, crlf, step, got, err)
				}
			}
		}
	}
}

// TestAssembleUsageFallback: a chat stream without the usage chunk (the
// client did not ask for it) is stored with the usage the gateway read.
func TestAssembleUsageFallback(t *testing.T) {
	stream := strings.Replace(chatStream, `"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":0}}`, `"choices":[],"usage":null`, 1)
	got, err := Assemble(upstream.RouteChat, []byte(stream), 1<<20, ChatUsage(upstream.Usage{PromptTokens: 12, CompletionTokens: 30, TotalTokens: 42, CachedTokens: 3}))
	if err != nil || !bytes.Contains(got, []byte(`"usage":{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":3}}`)) {
		t.Fatalf("Assemble = %s, %v; want the fallback usage", got, err)
	}
}

// TestAssembleRefuses: a cut, failed, unended or unusual stream has no
// stored form, for the reason a cache operator would expect.
func TestAssembleRefuses(t *testing.T) {
	cut := func(s, before string) string { return s[:strings.Index(s, before)] }
	tests := []struct {
		name   string
		route  upstream.Route
		stream string
		max    int64
		want   error
	}{
		{"chat without [DONE]", upstream.RouteChat, cut(chatStream, "data: [DONE]"), 1 << 20, ErrIncomplete},
		{"chat without finish", upstream.RouteChat, strings.Replace(chatStream, `"finish_reason":"tool_calls"`, `"finish_reason":null`, 1), 1 << 20, ErrIncomplete},
		{"chat cut in an event", upstream.RouteChat, chatStream[:len(chatStream)-300], 1 << 20, ErrIncomplete},
		{"chat error event", upstream.RouteChat, cut(chatStream, "data: [DONE]") + `data: {"error":{"message":"boom"}}` + "\n\n", 1 << 20, ErrIncomplete},
		{"chat logprobs", upstream.RouteChat, strings.Replace(chatStream, `"content":"world"},"logprobs":null`, `"content":"world"},"logprobs":{"content":[]}`, 1), 1 << 20, ErrNotStorable},
		{"chat not JSON", upstream.RouteChat, "data: {not json\n\n" + chatStream, 1 << 20, ErrNotStorable},
		{"chat after [DONE]", upstream.RouteChat, chatStream + chatStream, 1 << 20, ErrNotStorable},
		{"chat too large", upstream.RouteChat, chatStream, 100, ErrTooLarge},
		{"messages without message_stop", upstream.RouteMessages, cut(messagesStream, "event: message_stop"), 1 << 20, ErrIncomplete},
		{"messages error event", upstream.RouteMessages, cut(messagesStream, "event: message_delta") + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n", 1 << 20, ErrIncomplete},
		{"messages input not JSON", upstream.RouteMessages, strings.Replace(messagesStream, `\"Paris\"}`, `\"Paris`, 1), 1 << 20, ErrNotStorable},
		{"messages block gap", upstream.RouteMessages, strings.Replace(messagesStream, `"index":1,"content_block"`, `"index":2,"content_block"`, 1), 1 << 20, ErrNotStorable},
		{"messages too large", upstream.RouteMessages, messagesStream, 200, ErrTooLarge},
		{"embeddings", upstream.RouteEmbeddings, chatStream, 1 << 20, ErrRoute},
	}
	for _, tt := range tests {
		if got, err := Assemble(tt.route, []byte(tt.stream), tt.max, nil); !errors.Is(err, tt.want) {
			t.Errorf("%s: Assemble = %s, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}

// TestReplayRoundTrip: a stored answer replayed as a stream and assembled
// again is the same answer, byte for byte, for both formats; the stream of
// a provider's own non-stream answer assembles to the same content.
func TestReplayRoundTrip(t *testing.T) {
	long := strings.Repeat("é", 3*pieceBytes) // cut at rune boundaries into several events
	thinking := `{"id":"msg_2","type":"message","role":"assistant","model":"claude-x","content":[{"type":"thinking","signature":"sig==","thinking":"hmm"},{"type":"text","citations":[{"cited_text":"a","type":"char_location"}],"text":"` + long + `"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":4}}`
	for _, tt := range []struct {
		route  upstream.Route
		stored string
	}{
		{upstream.RouteChat, chatStored},
		{upstream.RouteChat, strings.Replace(chatStored, "Héllo <b>world", long, 1)},
		{upstream.RouteMessages, messagesStored},
		{upstream.RouteMessages, thinking},
	} {
		sse, err := Replay(tt.route, []byte(tt.stored), true)
		if err != nil {
			t.Fatalf("Replay: %v", err)
		}
		got, err := Assemble(tt.route, sse, 1<<20, nil)
		if err != nil || string(got) != tt.stored {
			t.Errorf("%s: Assemble(Replay(x)) = %s, %v\nwant %s\nstream:\n%s", tt.route, got, err, tt.stored, sse)
		}
		if n := bytes.Count(sse, []byte("\n\n")); tt.stored != messagesStored && tt.stored != chatStored && n > 20 {
			t.Errorf("%s: %d events for the long answer, want a few", tt.route, n)
		}
	}
	// OpenAI's own non-stream answer: refusal null, annotations.
	provider := `{"id":"chatcmpl-9","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hi","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	sse, err := Replay(upstream.RouteChat, []byte(provider), false)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sse, []byte(`"usage"`)) {
		t.Errorf("replay without include_usage carries usage:\n%s", sse)
	}
	if !bytes.HasSuffix(sse, []byte("data: [DONE]\n\n")) {
		t.Errorf("replay does not end with [DONE]:\n%s", sse)
	}
}

// TestAssembleReplayContent: replay(assemble(x)) has x's content: the
// stream assembled, replayed and assembled again is the same answer.
func TestAssembleReplayContent(t *testing.T) {
	for _, tt := range []struct {
		route  upstream.Route
		stream string
	}{{upstream.RouteChat, chatStream}, {upstream.RouteMessages, messagesStream}} {
		a, err := Assemble(tt.route, []byte(tt.stream), 1<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		sse, err := Replay(tt.route, a, true)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Assemble(tt.route, sse, 1<<20, nil)
		if err != nil || !jsonEqual(a, b) {
			t.Errorf("%s: %s, %v\nwant %s", tt.route, b, err, a)
		}
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// FuzzAssemble: whatever bytes a stream holds, the assembler does not
// panic, what it stores is JSON, writing it in two pieces changes nothing,
// and the stored answer replayed and assembled again is itself.
func FuzzAssemble(f *testing.F) {
	f.Add(true, []byte(chatStream), 10)
	f.Add(false, []byte(messagesStream), 100)
	f.Add(true, []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\r\n\r\ndata: [DONE]\r\n\r\n"), 3)
	f.Fuzz(func(t *testing.T, chat bool, sse []byte, cut int) {
		route := upstream.RouteMessages
		if chat {
			route = upstream.RouteChat
		}
		whole, err := Assemble(route, sse, 1<<20, nil)
		if cut = max(0, min(cut, len(sse))); true {
			a := NewAssembler(route, 1<<20)
			_, _ = a.Write(sse[:cut])
			_, _ = a.Write(sse[cut:])
			parts, perr := a.Body(nil)
			if !bytes.Equal(parts, whole) || (err == nil) != (perr == nil) {
				t.Fatalf("in two pieces at %d: %s, %v; whole: %s, %v", cut, parts, perr, whole, err)
			}
		}
		if err != nil {
			return
		}
		if !json.Valid(whole) {
			t.Fatalf("stored form is not JSON: %s", whole)
		}
		replayed, err := Replay(route, whole, true)
		if err != nil {
			t.Fatalf("Replay(%s): %v", whole, err)
		}
		again, err := Assemble(route, replayed, 1<<20, nil)
		if err != nil || !bytes.Equal(again, whole) {
			t.Fatalf("Assemble(Replay(%s)) = %s, %v", whole, again, err)
		}
	})
}

// TestAssembleHugeEvent: an event larger than the SSE reader takes, in
// the write that ended whole events, is refused, not a panic, and the writes after it too.
func TestAssembleHugeEvent(t *testing.T) {
	a := NewAssembler(upstream.RouteChat, 16<<20)
	head := chatStream[:strings.Index(chatStream, "data: [DONE]")]
	if n, err := a.Write([]byte(head + "data: " + strings.Repeat("x", upstream.MaxEventBytes+1))); n != len(head)+upstream.MaxEventBytes+7 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	_, _ = a.Write([]byte("\n\ndata: [DONE]\n\n"))
	if _, err := a.Body(nil); !errors.Is(err, ErrNotStorable) {
		t.Errorf("Body = %v, want ErrNotStorable", err)
	}
}
