package upstream

import (
	"errors"
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
	msgs, err := ParseRequest(RouteMessages, []byte(`{"model":"m","max_tokens":5,"messages":[ ],"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	aep, _ := NewEndpoint(FormatAnthropic, "http://up/v1", nil, Auth{Style: AuthXAPIKey}, nil, 0)
	if err := msgs.BuildPrefill(aep, "up", "Hi \n", &call); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(call.Body), `"messages":[ {"role":"assistant","content":"Hi"}]`) {
		t.Errorf("anthropic body %s", call.Body)
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
	st.Continue(Usage{}, false)
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
	st.Continue(Usage{}, false)
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
