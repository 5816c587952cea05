package bedrock

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// streamResult is what a client reads from the chunks.
type streamResult struct {
	content string
	calls   map[int]*struct{ id, name, args string }
	finish  string
	usage   *Usage
	done    bool
	chunks  int
}

func readChunks(t *testing.T, out []byte) streamResult {
	t.Helper()
	r := streamResult{calls: map[int]*struct{ id, name, args string }{}}
	for _, f := range strings.Split(string(out), "\n\n") {
		if f == "" {
			continue
		}
		d, ok := strings.CutPrefix(f, "data: ")
		if !ok {
			t.Fatalf("frame %q", f)
		}
		if d == "[DONE]" {
			r.done = true
			continue
		}
		r.chunks++
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens     int64 `json:"prompt_tokens"`
				CompletionTokens int64 `json:"completion_tokens"`
				TotalTokens      int64 `json:"total_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("chunk %s: %v", d, err)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				r.content += *ch.Delta.Content
			}
			for _, tc := range ch.Delta.ToolCalls {
				e := r.calls[tc.Index]
				if e == nil {
					e = &struct{ id, name, args string }{}
					r.calls[tc.Index] = e
				}
				e.id += tc.ID
				e.name += tc.Function.Name
				e.args += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				r.finish = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			r.usage = &Usage{PromptTokens: c.Usage.PromptTokens, CompletionTokens: c.Usage.CompletionTokens, TotalTokens: c.Usage.TotalTokens}
		}
	}
	return r
}

func translateFixture(t *testing.T, name string, includeUsage bool) ([]byte, *StreamTranslator) {
	t.Helper()
	tr := NewStreamTranslator("claude", 1, includeUsage)
	var out []byte
	for _, e := range fixtureEvents(t, name) {
		var err error
		if out, err = tr.Event(out, []byte(e.Event), e.Data); err != nil {
			t.Fatalf("%s: %v", e.Event, err)
		}
	}
	out, err := tr.End(out)
	if err != nil {
		t.Fatal(err)
	}
	return out, tr
}

// TestStreamFixtures: the reference's streams (text, parallel tool calls
// with input split across deltas, a guardrail) become the chunks an OpenAI
// client joins into the same answer, with the finish reason and the usage
// chunk last before [DONE].
func TestStreamFixtures(t *testing.T) {
	out, tr := translateFixture(t, "stream_text.jsonl", true)
	r := readChunks(t, out)
	if r.content != "Hello, world! é\n\"quoted\"" || r.finish != "stop" || !r.done || !tr.Done() {
		t.Errorf("text stream: %+v\n%s", r, out)
	}
	if want := (Usage{PromptTokens: 25, CompletionTokens: 7, TotalTokens: 32}); r.usage == nil || *r.usage != want {
		t.Errorf("usage chunk: got %+v, want %+v", r.usage, want)
	}
	if u, ok := tr.Usage(); !ok || u.CachedTokens != 5 {
		t.Errorf("Usage: %+v %v", u, ok)
	}

	out, _ = translateFixture(t, "stream_tool.jsonl", false)
	r = readChunks(t, out)
	if r.finish != "tool_calls" || r.content != "Let me check." || len(r.calls) != 2 || r.usage != nil {
		t.Fatalf("tool stream: %+v\n%s", r, out)
	}
	if c := r.calls[0]; c.id != "tooluse_abc123" || c.name != "get_weather" || c.args != `{"city": "Seattle"}` {
		t.Errorf("call 0: %+v", c)
	}
	if c := r.calls[1]; c.id != "tooluse_def456" || c.name != "get_time" || c.args != `{}` {
		t.Errorf("call 1: %+v", c)
	}

	out, _ = translateFixture(t, "stream_guardrail.jsonl", false)
	if r = readChunks(t, out); r.finish != "content_filter" || !r.done {
		t.Errorf("guardrail stream: %+v", r)
	}
}

// TestStreamCutAndException: a stream that ends before messageStop is a
// cut (ErrIncomplete, no [DONE] made up); an exception event is a *Error
// before any byte for the client; messageStop without metadata still
// ends cleanly.
func TestStreamCutAndException(t *testing.T) {
	tr := NewStreamTranslator("m", 1, false)
	out, _ := tr.Event(nil, []byte("messageStart"), []byte(`{"role":"assistant"}`))
	if len(out) != 0 {
		t.Errorf("messageStart wrote %s: the role chunk is held until content", out)
	}
	_, err := tr.Event(out, []byte(ExceptionEvent), []byte(`{"__type":"ModelStreamErrorException","message":"boom"}`))
	var be *Error
	if !errors.As(err, &be) || be.Type != TypeModelStream || be.Message != "boom" {
		t.Errorf("exception: got %v", err)
	}
	out, _ = tr.Event(nil, []byte("contentBlockDelta"), []byte(`{"contentBlockIndex":0,"delta":{"text":"hi"}}`))
	if end, err := tr.End(out); !errors.Is(err, ErrIncomplete) || !bytes.Equal(end, out) {
		t.Errorf("cut: got %v", err)
	}
	if _, err := tr.Event(nil, []byte("contentBlockDelta"), []byte(`{not json`)); !errors.Is(err, ErrMalformed) {
		t.Errorf("malformed: got %v", err)
	}
	if _, err := tr.Event(nil, []byte("contentBlockDelta"), []byte(`{"contentBlockIndex":4,"delta":{"toolUse":{"input":"{"}}}`)); !errors.Is(err, ErrMalformed) {
		t.Errorf("input without a tool: got %v", err)
	}

	tr = NewStreamTranslator("m", 1, true)
	out, _ = tr.Event(nil, []byte("messageStop"), []byte(`{"stopReason":"max_tokens"}`))
	out, err = tr.End(out)
	r := readChunks(t, out)
	if err != nil || r.finish != "length" || !r.done || r.usage != nil {
		t.Errorf("no metadata: %v %+v", err, r)
	}
}

// TestWriteTextIsWrite: the text fast path writes exactly the bytes the
// encoding/json path writes, for texts that need escaping too.
func TestWriteTextIsWrite(t *testing.T) {
	for _, usage := range []bool{false, true} {
		tr := NewStreamTranslator(`m"<&>`, 1700000000, usage)
		for _, s := range []string{"plain", "é \u2028 \n\t\"quote\" <b>&amp;</b> \x01", ""} {
			fast := tr.writeText(nil, s)
			slow := tr.write(nil, chunkDelta{Content: &s}, nil)
			if !bytes.Equal(fast, slow) {
				t.Errorf("usage %v %q:\nfast %s\nslow %s", usage, s, fast, slow)
			}
		}
	}
}

// TestRoleChunkIsWrite: the appended role chunk is the bytes the
// encoding/json path writes, with and without the usage member.
func TestRoleChunkIsWrite(t *testing.T) {
	for _, usage := range []bool{false, true} {
		tr := NewStreamTranslator(`m"<&>`, 1700000000, usage)
		empty := ""
		slow := tr.write(nil, chunkDelta{Role: "assistant", Content: &empty}, nil)
		fast := tr.roleChunk([]byte("before"))
		if string(fast) != "before"+string(slow) {
			t.Errorf("usage %v:\nfast %s\nslow %s", usage, fast, slow)
		}
		if again := tr.roleChunk(nil); len(again) != 0 {
			t.Errorf("a second role chunk: %s", again)
		}
	}
}
