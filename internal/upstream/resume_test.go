package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestRepeats protects the overlap rule: a continuation that starts the
// answer again, or repeats its last words, is not stitched; one that goes
// on is.
func TestRepeats(t *testing.T) {
	relayed := "Hello from mock chunk 1 2 3 4 5 6 7 8 9 10"
	for _, tt := range []struct {
		first string
		want  bool
	}{
		{"11", false},
		{"Hello from mock chunk 1", true}, // answered afresh
		{"Hello", true},
		{"10", true},              // the last word again
		{"5 6 7 8 9 10 11", true}, // the tail again
		{"and then some", false},
	} {
		if got := repeats(relayed, tt.first); got != tt.want {
			t.Errorf("repeats(%q) = %v, want %v", tt.first, got, tt.want)
		}
	}
}

// TestBuildPrefill: the continuation's body is the request with the
// relayed text as its last, assistant message; anthropic's trimmed.
func TestBuildPrefill(t *testing.T) {
	chat, err := ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	ep, err := NewEndpoint(FormatOpenAI, "http://up/v1", nil, Auth{Style: AuthBearer}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var call Call
	if err := chat.BuildPrefill(ep, "up", "Hello \"you\" ", &call); err != nil {
		t.Fatal(err)
	}
	if want := `{"model":"up","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello \"you\" "}],"stream":true,"stream_options":{"include_usage":true}}`; string(call.Body) != want {
		t.Errorf("body %s\nwant %s", call.Body, want)
	}
	msgs, err := ParseRequest(RouteMessages, []byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"} ],"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	aep, _ := NewEndpoint(FormatAnthropic, "http://up/v1", nil, Auth{Style: AuthXAPIKey}, nil, 0)
	if err := msgs.BuildPrefill(aep, "up", "Hi \n", &call); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(call.Body), `"messages":[{"role":"user","content":"hi"} ,{"role":"assistant","content":"Hi"}]`) {
		t.Errorf("anthropic body %s", call.Body)
	}
	// A request that ends with the client's own prefill is not resumed.
	own, _ := ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Sure"}],"stream":true}`))
	var re *RequestError
	if err := own.BuildPrefill(ep, "up", "Sure, here", &call); !errors.As(err, &re) {
		t.Errorf("own prefill: %v, want a *RequestError", err)
	}
}

// TestStitchChat: a continuation's role chunk is dropped, its id and model
// are the first answer's, a restart is refused.
func TestStitchChat(t *testing.T) {
	chat, _ := ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`))
	ep, _ := NewEndpoint(FormatOpenAI, "http://up/v1", nil, Auth{Style: AuthBearer}, nil, 0)
	var s Stitch
	st := chat.Stitch(ep, &s)
	for _, ev := range []string{
		`data: {"id":"a","model":"m1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n",
		`data: {"id":"a","model":"m1","choices":[{"index":0,"delta":{"content":"Hello world"}}]}` + "\n\n",
	} {
		if out, err := st.Event([]byte(ev)); err != nil || string(out) != ev {
			t.Fatalf("first answer's event changed: %q %v", out, err)
		}
	}
	if !st.Resumable() || st.Text() != "Hello world" {
		t.Fatalf("resumable %v text %q", st.Resumable(), st.Text())
	}
	st.Continue(ep, Usage{}, false)
	out, err := st.Event([]byte(`data: {"id":"b","model":"m2","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n"))
	if err != nil || len(out) != 0 {
		t.Fatalf("role chunk: %q %v, want dropped", out, err)
	}
	out, err = st.Event([]byte(`data: {"id":"b","object":"chat.completion.chunk","model":"m2","choices":[{"index":0,"delta":{"content":", and more"}}]}` + "\n\n"))
	if want := `data: {"id":"a","object":"chat.completion.chunk","model":"m1","choices":[{"index":0,"delta":{"content":", and more"}}]}` + "\n\n"; err != nil || string(out) != want {
		t.Fatalf("got %q %v\nwant %q", out, err, want)
	}
	st = chat.Stitch(ep, &s)
	_, _ = st.Event([]byte(`data: {"id":"a","model":"m1","choices":[{"index":0,"delta":{"content":"Hello world"}}]}` + "\n\n"))
	st.Continue(ep, Usage{}, false)
	if _, err := st.Event([]byte(`data: {"id":"b","model":"m2","choices":[{"index":0,"delta":{"content":"Hello"}}]}` + "\n\n")); !errors.Is(err, ErrRepeats) {
		t.Fatalf("restart: %v, want ErrRepeats", err)
	}
	// A tool call makes the stream not resumable.
	st = chat.Stitch(ep, &s)
	_, _ = st.Event([]byte(`data: {"id":"a","model":"m1","choices":[{"index":0,"delta":{"content":"x","tool_calls":[{"index":0}]}}]}` + "\n\n"))
	if st.Resumable() {
		t.Fatal("a stream with a tool call is resumable")
	}
}

// TestStitchMessages: a messages continuation extends the open text block
// (its message_start, first block start and pings dropped), its later
// events take the first answer's indexes, and message_delta carries the
// summed usage.
func TestStitchMessages(t *testing.T) {
	msgs, _ := ParseRequest(RouteMessages, []byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"stream":true}`))
	ep, _ := NewEndpoint(FormatAnthropic, "http://up/v1", nil, Auth{Style: AuthXAPIKey}, nil, 0)
	ep.Prefill = true // as the planner sets it for every anthropic provider
	var s Stitch
	st := msgs.Stitch(ep, &s)
	ev := func(name, data string) []byte { return []byte("event: " + name + "\ndata: " + data + "\n\n") }
	for _, e := range [][]byte{
		ev("message_start", `{"type":"message_start","message":{"id":"msg_1","model":"m1","usage":{"input_tokens":10,"output_tokens":1}}}`),
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello there"}}`),
	} {
		if out, err := st.Event(e); err != nil || string(out) != string(e) {
			t.Fatalf("first answer's event changed: %q %v", out, err)
		}
	}
	if !st.Resumable() || !st.CanContinue(ep) {
		t.Fatal("an open text block is not resumable")
	}
	st.Continue(ep, Usage{PromptTokens: 10, CompletionTokens: 1, TotalTokens: 11}, true)
	var got strings.Builder
	for _, e := range [][]byte{
		ev("message_start", `{"type":"message_start","message":{"id":"msg_2","model":"m2","usage":{"input_tokens":14,"output_tokens":1}}}`),
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		ev("ping", `{"type":"ping"}`),
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":", friend"}}`),
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`),
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`),
		ev("message_stop", `{"type":"message_stop"}`),
	} {
		out, err := st.Event(e)
		if err != nil {
			t.Fatal(err)
		}
		got.Write(out)
	}
	want := string(ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":", friend"}}`)) +
		string(ev("content_block_stop", `{"type":"content_block_stop","index":0}`)) +
		string(ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":24,"output_tokens":4}}`)) +
		string(ev("message_stop", `{"type":"message_stop"}`))
	if got.String() != want {
		t.Errorf("continuation\n%s\nwant\n%s", got.String(), want)
	}
	if u, ok := st.Sum(Usage{PromptTokens: 14, CompletionTokens: 3, TotalTokens: 17}, true); !ok || u.TotalTokens != 28 {
		t.Errorf("Sum = %+v %v", u, ok)
	}
}

// TestStitchJoinWhitespace: an anthropic continuation is prefilled without
// the relayed text's trailing whitespace, and usually starts with its own:
// the client gets it once, not twice. A continuation that starts without
// it is relayed as it is. An openai prefill keeps the whitespace, so
// nothing is dropped there.
func TestStitchJoinWhitespace(t *testing.T) {
	chat, _ := ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`))
	oa, _ := NewEndpoint(FormatOpenAI, "http://up/v1", nil, Auth{Style: AuthBearer}, nil, 0)
	an, _ := NewEndpoint(FormatAnthropic, "http://up/v1", nil, Auth{Style: AuthXAPIKey}, nil, 0)
	chunk := func(text string) []byte {
		return []byte(`data: {"id":"b","model":"m2","choices":[{"index":0,"delta":{"content":` + strconv.Quote(text) + `}}]}` + "\n\n")
	}
	for _, tc := range []struct {
		ep       *Endpoint
		relayed  string
		cont     []string
		wantText string
	}{
		{an, "Hello, ", []string{" world"}, "Hello, world"},
		{an, "List:\n\n", []string{"\n", "\n1. one"}, "List:\n\n1. one"},
		{an, "x\n", []string{"\n\nfoo"}, "x\n\nfoo"},
		{an, "Hello, ", []string{"world"}, "Hello, world"},
		{oa, "Hello, ", []string{"world"}, "Hello, world"},
	} {
		var s Stitch
		st := chat.Stitch(oa, &s)
		_, _ = st.Event(chunk(tc.relayed))
		st.Continue(tc.ep, Usage{}, false)
		got := tc.relayed
		for _, c := range tc.cont {
			out, err := st.Event(chunk(c))
			if err != nil {
				t.Fatalf("%q + %q: %v", tc.relayed, tc.cont, err)
			}
			var v struct {
				ID      string
				Choices []struct{ Delta struct{ Content string } }
			}
			if err := json.Unmarshal(bytes.TrimSpace(bytes.TrimPrefix(out, []byte("data: "))), &v); err != nil || v.ID != "b" && v.ID != "a" {
				t.Fatalf("%q: continuation event %q is not a chunk: %v", c, out, err)
			}
			got += v.Choices[0].Delta.Content
		}
		if got != tc.wantText || st.Text() != tc.wantText {
			t.Errorf("%s: relayed %q + %q: client text %q (stitch %q), want %q", tc.ep.Format, tc.relayed, tc.cont, got, st.Text(), tc.wantText)
		}
	}
}

// TestStitchManyChoices: a chat stream with a second choice (n > 1) is not
// one text to continue.
func TestStitchManyChoices(t *testing.T) {
	chat, _ := ParseChatRequest([]byte(`{"model":"m","n":2,"messages":[{"role":"user","content":"hi"}],"stream":true}`))
	ep, _ := NewEndpoint(FormatOpenAI, "http://up/v1", nil, Auth{Style: AuthBearer}, nil, 0)
	var s Stitch
	st := chat.Stitch(ep, &s)
	_, _ = st.Event([]byte(`data: {"id":"a","model":"m1","choices":[{"index":0,"delta":{"content":"one"}}]}` + "\n\n"))
	_, _ = st.Event([]byte(`data: {"id":"a","model":"m1","choices":[{"index":1,"delta":{"content":"two"}}]}` + "\n\n"))
	if st.Resumable() {
		t.Fatal("a stream with two choices is resumable")
	}
}

// TestStitchNoModel: a first answer without a model member leaves the
// continuation's own model in place, never an empty value.
func TestStitchNoModel(t *testing.T) {
	chat, _ := ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`))
	ep, _ := NewEndpoint(FormatOpenAI, "http://up/v1", nil, Auth{Style: AuthBearer}, nil, 0)
	var s Stitch
	st := chat.Stitch(ep, &s)
	_, _ = st.Event([]byte(`data: {"id":"a","choices":[{"index":0,"delta":{"content":"Hello world"}}]}` + "\n\n"))
	st.Continue(ep, Usage{}, false)
	out, err := st.Event([]byte(`data: {"id":"b","model":"m2","choices":[{"index":0,"delta":{"content":" and more"}}]}` + "\n\n"))
	if err != nil || !json.Valid(bytes.TrimSpace(bytes.TrimPrefix(out, []byte("data: ")))) {
		t.Fatalf("continuation %q %v: not JSON", out, err)
	}
}
