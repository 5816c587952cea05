package gemini_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/upstream"
	"github.com/llmgw/gateway/internal/upstream/gemini"
)

var update = flag.Bool("update", false, "rewrite the stream .want files from the translator (then read them)")

type streamCase struct {
	Name         string         `json:"name"`
	Source       string         `json:"source"`
	SSE          string         `json:"sse"`
	Want         string         `json:"want"`
	IncludeUsage bool           `json:"include_usage"`
	Error        string         `json:"error"`
	Usage        *gemini.Usage  `json:"-"`
	RawUsage     map[string]int `json:"usage"`
	NoUsage      bool           `json:"no_usage"`
}

func loadJSON[T any](t testing.TB, name string) T {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

func fixtureUsage(m map[string]int) gemini.Usage {
	return gemini.Usage{PromptTokens: int64(m["prompt_tokens"]), CompletionTokens: int64(m["completion_tokens"]),
		TotalTokens: int64(m["total_tokens"]), CachedTokens: int64(m["cached_tokens"]), ReasoningTokens: int64(m["reasoning_tokens"])}
}

// relay reads body with upstream's one SSE reader, as the gateway will,
// gives the translator each event that has data, and calls End at the end
// of the body. It returns the client bytes and the first error.
func relay(tr *gemini.StreamTranslator, body io.Reader) ([]byte, error) {
	r := upstream.NewEventReader(body)
	defer r.Close()
	var out []byte
	for {
		ev, comment, err := r.Next()
		if err == io.EOF {
			return tr.End(out)
		}
		if err != nil {
			return out, err
		}
		if comment {
			continue
		}
		f := upstream.ParseEvent(ev)
		if !f.HasData {
			continue
		}
		next, err := tr.Event(out, f.Name, f.Data)
		if !bytes.HasPrefix(next, out) {
			return next, errors.New("Event rewrote dst")
		}
		out = next
		if err != nil {
			return out, err
		}
	}
}

func checkStreamError(t *testing.T, err error, want string) {
	t.Helper()
	var ge *gemini.Error
	var be *gemini.BlockedError
	switch {
	case want == "":
		if err != nil {
			t.Fatalf("err = %v", err)
		}
	case want == "incomplete":
		if !errors.Is(err, gemini.ErrIncomplete) {
			t.Fatalf("err = %v, want ErrIncomplete", err)
		}
	case strings.HasPrefix(want, "blocked:"):
		if !errors.As(err, &be) || be.Reason != strings.TrimPrefix(want, "blocked:") {
			t.Fatalf("err = %v, want %s", err, want)
		}
	case strings.HasPrefix(want, "status:"):
		parts := strings.Split(want, ":")
		if !errors.As(err, &ge) || ge.Status != parts[1] || strconv.Itoa(ge.HTTPStatus) != parts[2] {
			t.Fatalf("err = %v, want %s", err, want)
		}
	default:
		t.Fatalf("bad fixture error %q", want)
	}
}

// TestStreamFixtures replays each testdata/streams fixture through
// upstream's EventReader whole, and split into two reads at every byte
// boundary, and requires exactly the expected OpenAI bytes, error and
// usage every time: where the network cuts the body must not matter.
func TestStreamFixtures(t *testing.T) {
	for _, tc := range loadJSON[[]streamCase](t, "streams.json") {
		t.Run(tc.Name, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/streams/" + tc.SSE)
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				tr := gemini.NewStreamTranslator("gpt-4o", 1700000000, tc.IncludeUsage)
				out, _ := relay(tr, bytes.NewReader(raw))
				if err := os.WriteFile("testdata/streams/"+tc.Want, out, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile("testdata/streams/" + tc.Want)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i <= len(raw); i++ {
				tr := gemini.NewStreamTranslator("gpt-4o", 1700000000, tc.IncludeUsage)
				out, err := relay(tr, io.MultiReader(bytes.NewReader(raw[:i]), bytes.NewReader(raw[i:])))
				if !bytes.Equal(out, want) {
					t.Fatalf("split at %d:\n got %q\nwant %q", i, out, want)
				}
				checkStreamError(t, err, tc.Error)
				if tr.Done() != (tc.Error == "") {
					t.Fatalf("split at %d: Done() = %v", i, tr.Done())
				}
				u, ok := tr.Usage()
				if ok == tc.NoUsage || (ok && u != fixtureUsage(tc.RawUsage)) {
					t.Fatalf("split at %d: Usage() = %+v, %v; want %v", i, u, ok, tc.RawUsage)
				}
				if ok {
					if err := upstream.CheckUsage(upstream.Usage(u)); err != nil {
						t.Fatalf("fixture usage refused: %v", err)
					}
				}
			}
		})
	}
}

// TestStreamToolCallDeltas reassembles the tool_calls deltas as an OpenAI
// client does (by index: id and name from the first, arguments
// concatenated) and requires the calls Gemini sent.
func TestStreamToolCallDeltas(t *testing.T) {
	raw, err := os.ReadFile("testdata/streams/tool_calls.sse")
	if err != nil {
		t.Fatal(err)
	}
	out, err := relay(gemini.NewStreamTranslator("m", 1, false), bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	type call struct{ id, name, args, sig string }
	var calls []call
	finish := ""
	for _, fr := range strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n") {
		data := strings.TrimPrefix(fr, "data: ")
		if data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Index    *int   `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
						ExtraContent struct {
							Google struct {
								ThoughtSignature string `json:"thought_signature"`
							} `json:"google"`
						} `json:"extra_content"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("frame %q: %v", fr, err)
		}
		for _, tc := range c.Choices[0].Delta.ToolCalls {
			if tc.Index == nil {
				t.Fatalf("tool call delta without index: %s", data)
			}
			if *tc.Index == len(calls) {
				calls = append(calls, call{})
			}
			cl := &calls[*tc.Index]
			if tc.ID != "" {
				cl.id, cl.name = tc.ID, tc.Function.Name
			}
			cl.args += tc.Function.Arguments
			cl.sig += tc.ExtraContent.Google.ThoughtSignature
		}
		if f := c.Choices[0].FinishReason; f != nil {
			finish = *f
		}
	}
	want := []call{
		{"call_sT2_0", "get_weather", `{"city":"Paris"}`, "c2lnMQ=="},
		{"call_sT2_1", "get_time", `{"tz":"Europe/Paris"}`, ""},
		{"call_sT2_2", "noop", `{}`, ""},
	}
	if len(calls) != len(want) {
		t.Fatalf("calls = %+v", calls)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Fatalf("call %d = %+v, want %+v", i, calls[i], want[i])
		}
	}
	if finish != "tool_calls" {
		t.Fatalf("finish_reason = %q", finish)
	}
}

// TestStreamMalformed: an event that is not JSON is a protocol error and
// writes nothing; events after End are ignored.
func TestStreamMalformed(t *testing.T) {
	tr := gemini.NewStreamTranslator("m", 1, false)
	out, err := tr.Event([]byte("x"), nil, []byte("[DONE]"))
	if !errors.Is(err, gemini.ErrMalformed) || string(out) != "x" {
		t.Fatalf("out %q err %v", out, err)
	}
	out, err = tr.Event(nil, nil, []byte(`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":"s"}}]}}]}`))
	if !errors.Is(err, gemini.ErrMalformed) || len(out) != 0 {
		t.Fatalf("out %q err %v", out, err)
	}
	out, err = tr.Event(nil, nil, []byte(`{"candidates":[{"finishReason":"STOP"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if out, err = tr.End(out); err != nil || !bytes.HasSuffix(out, []byte("data: [DONE]\n\n")) || !tr.Done() {
		t.Fatalf("End: %q %v", out, err)
	}
	if more, err := tr.Event(nil, nil, []byte(`{"candidates":[{"content":{"parts":[{"text":"late"}]}}]}`)); err != nil || len(more) != 0 {
		t.Fatalf("after End: %q %v", more, err)
	}
}

// FuzzStreamTranslator feeds arbitrary provider bytes through upstream's
// EventReader. Whatever arrives, the translator does not panic, only
// appends, fails only with its typed errors, and leaves the client a
// well-formed OpenAI stream: "data: X\n\n" frames whose X is one line of
// JSON, chunk objects of one id, and [DONE] last exactly when Done.
func FuzzStreamTranslator(f *testing.F) {
	files, _ := filepath.Glob("testdata/streams/*.sse")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, true)
		f.Add(b[:len(b)/2], false)
	}
	f.Add([]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\xff\"},{\"functionCall\":{\"name\":\"\\u0000\",\"args\":{}}}]},\"finishReason\":\"X\"}]}\n\n"), true)
	f.Fuzz(func(t *testing.T, stream []byte, includeUsage bool) {
		tr := gemini.NewStreamTranslator("gpt-\"4o\"\n", 1, includeUsage)
		out, err := relay(tr, bytes.NewReader(stream))
		if err != nil {
			var ge *gemini.Error
			var be *gemini.BlockedError
			var pe *upstream.ProtocolError
			if !errors.Is(err, gemini.ErrMalformed) && !errors.Is(err, gemini.ErrIncomplete) && !errors.As(err, &ge) &&
				!errors.As(err, &be) && !errors.As(err, &pe) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("err = %v", err)
			}
		}
		checkFrames(t, out, tr.Done())
	})
}

func checkFrames(t *testing.T, out []byte, done bool) {
	t.Helper()
	frames := strings.Split(string(out), "\n\n")
	if frames[len(frames)-1] != "" {
		t.Fatalf("output does not end with a blank line: %q", out)
	}
	frames = frames[:len(frames)-1]
	id := ""
	for i, fr := range frames {
		data, ok := strings.CutPrefix(fr, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("frame %q", fr)
		}
		if data == "[DONE]" {
			if !done || i != len(frames)-1 {
				t.Fatalf("[DONE] at %d of %d, done=%v", i, len(frames), done)
			}
			continue
		}
		var c struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("frame %q: %v", data, err)
		}
		if id == "" {
			id = c.ID
		} else if c.ID != id {
			t.Fatalf("ids %q and %q", id, c.ID)
		}
	}
	if done && (len(frames) == 0 || frames[len(frames)-1] != "data: [DONE]") {
		t.Fatalf("Done without [DONE]: %q", out)
	}
}
