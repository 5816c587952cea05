package anthropicclient

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const clientModel = "claude-sonnet-4-5"

// translateAll feeds events one by one, then Finish if the stream did not
// end itself, as the handler will.
func translateAll(events [][]byte) ([]byte, *StreamTranslator, error) {
	t := NewStreamTranslator(clientModel)
	var out []byte
	var err error
	for _, ev := range events {
		if out, err = feed(t, out, ev); err != nil {
			return out, t, err
		}
	}
	if !t.Done() {
		out = t.Finish(out)
	}
	return out, t, nil
}

// variants of one provider body: as written, with CRLF line ends, with
// keep-alive comments between events, and handed over whole in one call.
func variants(body []byte) map[string][][]byte {
	crlf := bytes.ReplaceAll(body, []byte("\n"), []byte("\r\n"))
	var kept [][]byte
	for _, ev := range splitEvents(body) {
		kept = append(kept, []byte(": keep-alive\n\n"), ev)
	}
	return map[string][][]byte{
		"lf":        splitEvents(body),
		"crlf":      splitEvents(crlf),
		"keepalive": kept,
		"whole":     {body},
	}
}

func TestStreamFixtures(t *testing.T) {
	wantErr := map[string]func(t *testing.T, err error){
		"error_chunk": func(t *testing.T, err error) {
			var pe *ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *ProviderError", err)
			}
			want := ProviderError{Type: "server_error", Code: "500", Message: "The server had an error while processing your request."}
			if *pe != want || pe.Status() != 500 {
				t.Errorf("error = %+v (status %d), want %+v", *pe, pe.Status(), want)
			}
		},
	}
	files, err := filepath.Glob("testdata/streams/*.openai.sse")
	if err != nil || len(files) < 6 {
		t.Fatalf("fixtures: %v %d", err, len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".openai.sse")
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		wantRaw, err := os.ReadFile(strings.TrimSuffix(f, ".openai.sse") + ".anthropic.sse")
		if err != nil {
			t.Fatal(err)
		}
		want, err := parseFrames(wantRaw)
		if err != nil {
			t.Fatalf("%s expected frames: %v", name, err)
		}
		for vname, events := range variants(body) {
			t.Run(name+"/"+vname, func(t *testing.T) {
				out, tr, err := translateAll(events)
				if check, ok := wantErr[name]; ok {
					check(t, err)
					if !tr.Done() || !tr.Started() {
						t.Errorf("after error: Done %v Started %v", tr.Done(), tr.Started())
					}
				} else if err != nil {
					t.Fatalf("Event: %v", err)
				}
				got, err := parseFrames(out)
				if err != nil {
					t.Fatalf("output not well-formed: %v\n%s", err, out)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("events mismatch\ngot:\n%s\nwant:\n%s", out, wantRaw)
				}
				if _, ok := wantErr[name]; ok {
					return
				}
				if err := checkOrder(got); err != nil {
					t.Errorf("order: %v\n%s", err, out)
				}
				if _, err := accumulate(got); err != nil {
					t.Errorf("accumulate: %v", err)
				}
			})
		}
	}
}

// TestStreamAccumulatesLikeNonStream: the message an SDK accumulates from
// the parallel tool stream is the message it would get unstreamed.
func TestStreamAccumulatesLikeNonStream(t *testing.T) {
	body, err := os.ReadFile("testdata/streams/parallel_tools.openai.sse")
	if err != nil {
		t.Fatal(err)
	}
	out, tr, err := translateAll(splitEvents(body))
	if err != nil {
		t.Fatal(err)
	}
	frames, err := parseFrames(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := accumulate(frames)
	if err != nil {
		t.Fatal(err)
	}
	chat := `{"id":"chatcmpl-tool","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
		{"id":"call_weather","type":"function","function":{"name":"get_weather","arguments":"{\"location\": \"Paris\"}"}},
		{"id":"call_time","type":"function","function":{"name":"get_time","arguments":"{\"tz\": \"Europe/Paris\"}"}}]},
		"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":120,"completion_tokens":40,"total_tokens":160,"prompt_tokens_details":{"cached_tokens":100}}}`
	msg, usage, err := ChatToMessage([]byte(chat), clientModel)
	if err != nil {
		t.Fatal(err)
	}
	if want := decode(t, msg); !reflect.DeepEqual(any(got), want) {
		t.Errorf("accumulated\n%s\nunstreamed\n%s", mustJSON(t, got), mustJSON(t, want))
	}
	if u, ok := tr.Usage(); !ok || u != usage || u != (Usage{Prompt: 120, Completion: 40, Total: 160, Cached: 100}) {
		t.Errorf("Usage() = %+v %v, non-stream usage %+v", u, ok, usage)
	}
}

func chunk(delta string) []byte {
	return []byte(`data: {"id":"chatcmpl-t","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n")
}

func TestStreamCases(t *testing.T) {
	cases := []struct {
		name    string
		events  []string
		wantErr error // matched with errors.Is; nil: none
		check   func(t *testing.T, msg map[string]any, frames []frame)
	}{
		{
			name: "tool calls without index, told apart by id",
			events: []string{
				string(chunk(`{"tool_calls":[{"id":"call_a","function":{"name":"a","arguments":"{\"x\""}}]}`)),
				string(chunk(`{"tool_calls":[{"function":{"arguments":":1}"}}]}`)),
				string(chunk(`{"tool_calls":[{"id":"call_b","function":{"name":"b","arguments":"{}"}}]}`)),
				"data: [DONE]\n\n",
			},
			check: func(t *testing.T, msg map[string]any, _ []frame) {
				want := decode(t, []byte(`[{"type":"tool_use","id":"call_a","name":"a","input":{"x":1}},{"type":"tool_use","id":"call_b","name":"b","input":{}}]`))
				if !reflect.DeepEqual(msg["content"], want) || msg["stop_reason"] != "tool_use" {
					t.Errorf("message %s", mustJSON(t, msg))
				}
			},
		},
		{
			name: "calls with neither index nor id, told apart by name",
			events: []string{
				string(chunk(`{"tool_calls":[{"function":{"name":"a","arguments":"{\"x\":"}},{"function":{"arguments":"1}"}},{"function":{"name":"b","arguments":"{}"}}]}`)),
				"data: [DONE]\n\n",
			},
			check: func(t *testing.T, msg map[string]any, _ []frame) {
				content := msg["content"].([]any)
				if len(content) != 2 {
					t.Fatalf("content %s", mustJSON(t, content))
				}
				a, b := content[0].(map[string]any), content[1].(map[string]any)
				if a["name"] != "a" || !reflect.DeepEqual(a["input"], map[string]any{"x": 1.0}) || b["name"] != "b" {
					t.Errorf("content %s", mustJSON(t, content))
				}
			},
		},
		{
			name: "id repeated in every fragment",
			events: []string{
				string(chunk(`{"tool_calls":[{"id":"c","function":{"name":"a","arguments":"{\"x\""}}]}`)),
				string(chunk(`{"tool_calls":[{"id":"c","function":{"name":"a","arguments":":2}"}}]}`)),
				"data: [DONE]\n\n",
			},
			check: func(t *testing.T, msg map[string]any, _ []frame) {
				want := decode(t, []byte(`[{"type":"tool_use","id":"c","name":"a","input":{"x":2}}]`))
				if !reflect.DeepEqual(msg["content"], want) {
					t.Errorf("content %s", mustJSON(t, msg["content"]))
				}
			},
		},
		{
			name: "two whole calls in one chunk, arguments as an object",
			events: []string{
				string(chunk(`{"tool_calls":[{"index":0,"id":"c0","function":{"name":"a","arguments":{"k": "v"}}},{"index":1,"id":"c1","function":{"name":"b","arguments":"{\"n\":2}"}}]}`)),
				"data: [DONE]\n\n",
			},
			check: func(t *testing.T, msg map[string]any, _ []frame) {
				want := decode(t, []byte(`[{"type":"tool_use","id":"c0","name":"a","input":{"k":"v"}},{"type":"tool_use","id":"c1","name":"b","input":{"n":2}}]`))
				if !reflect.DeepEqual(msg["content"], want) {
					t.Errorf("content %s", mustJSON(t, msg["content"]))
				}
			},
		},
		{
			name: "legacy function_call",
			events: []string{
				string(chunk(`{"function_call":{"name":"f","arguments":""}}`)),
				string(chunk(`{"function_call":{"arguments":"{\"q\":\"go\"}"}}`)),
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"function_call"}]}` + "\n\n",
			},
			check: func(t *testing.T, msg map[string]any, _ []frame) {
				content := msg["content"].([]any)
				if len(content) != 1 {
					t.Fatalf("content %v", content)
				}
				b := content[0].(map[string]any)
				if b["name"] != "f" || !strings.HasPrefix(b["id"].(string), "toolu_") || !reflect.DeepEqual(b["input"], map[string]any{"q": "go"}) {
					t.Errorf("block %v", b)
				}
			},
		},
		{
			name: "missing chunk id gets a random message id",
			events: []string{
				`data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}` + "\n\n",
				"data: [DONE]\n\n",
			},
			check: func(t *testing.T, msg map[string]any, _ []frame) {
				if id := msg["id"].(string); !strings.HasPrefix(id, "msg_") || len(id) != 28 {
					t.Errorf("id %q", id)
				}
			},
		},
		{
			name: "usage in the first chunk reaches message_start",
			events: []string{
				`data: {"id":"u","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":{"prompt_tokens":7,"completion_tokens":0}}` + "\n\n",
				`data: {"id":"u","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}` + "\n\n",
				"data: [DONE]\n\n",
			},
			check: func(t *testing.T, msg map[string]any, frames []frame) {
				start := frames[0].Data["message"].(map[string]any)["usage"].(map[string]any)
				if start["input_tokens"] != 7.0 {
					t.Errorf("message_start usage %v", start)
				}
				if u := msg["usage"].(map[string]any); u["input_tokens"] != 7.0 || u["output_tokens"] != 2.0 {
					t.Errorf("final usage %v", u)
				}
			},
		},
		{
			name: "refusal streamed as text",
			events: []string{
				string(chunk(`{"content":null,"refusal":"I can't help"}`)),
				string(chunk(`{"refusal":" with that."}`)),
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n",
			},
			check: func(t *testing.T, msg map[string]any, _ []frame) {
				want := decode(t, []byte(`[{"type":"text","text":"I can't help with that."}]`))
				if !reflect.DeepEqual(msg["content"], want) || msg["stop_reason"] != "refusal" {
					t.Errorf("message %s", mustJSON(t, msg))
				}
			},
		},
		{
			name: "data split over two lines",
			events: []string{
				"data: {\"id\":\"chatcmpl-ml\",\r\ndata: \"choices\":[{\"index\":0,\"delta\":{\"content\":\"joined\"}}]}\r\n\r\n",
				"data: [DONE]\n\n",
			},
			check: func(t *testing.T, msg map[string]any, _ []frame) {
				if msg["id"] != "msg_ml" || msg["content"].([]any)[0].(map[string]any)["text"] != "joined" {
					t.Errorf("message %s", mustJSON(t, msg))
				}
			},
		},
		{
			name: "other choices and unknown fields ignored",
			events: []string{
				`event: chunk` + "\n" + `id: 5` + "\n" + `data: {"id":"o","choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"mine","reasoning_content":"hmm"}}]}` + "\n\n",
				"data: [DONE]\n\n",
			},
			check: func(t *testing.T, msg map[string]any, _ []frame) {
				want := decode(t, []byte(`[{"type":"text","text":"mine"}]`))
				if !reflect.DeepEqual(msg["content"], want) {
					t.Errorf("content %s", mustJSON(t, msg["content"]))
				}
			},
		},
		{
			name: "interleaved tool call fragments",
			events: []string{
				string(chunk(`{"tool_calls":[{"index":0,"id":"c0","function":{"name":"a","arguments":"{"}}]}`)),
				string(chunk(`{"tool_calls":[{"index":1,"id":"c1","function":{"name":"b","arguments":"{"}}]}`)),
				string(chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}`)),
			},
			wantErr: ErrBadResponse,
		},
		{
			name:    "chunk not JSON",
			events:  []string{string(chunk(`{"content":"a"}`)), "data: {not json\n\n"},
			wantErr: ErrBadResponse,
		},
		{
			name:    "chunk not an object",
			events:  []string{"data: [1,2]\n\n"},
			wantErr: ErrBadResponse,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			events := make([][]byte, len(c.events))
			for i, e := range c.events {
				events[i] = []byte(e)
			}
			out, tr, err := translateAll(events)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) || !tr.Done() {
					t.Fatalf("err = %v, Done %v; want %v", err, tr.Done(), c.wantErr)
				}
				if _, err := parseFrames(out); err != nil {
					t.Errorf("output before the error not well-formed: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			frames, err := parseFrames(out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if err := checkOrder(frames); err != nil {
				t.Fatalf("order: %v\n%s", err, out)
			}
			msg, err := accumulate(frames)
			if err != nil {
				t.Fatalf("accumulate: %v\n%s", err, out)
			}
			c.check(t, msg, frames)
		})
	}
}

func TestStreamLifecycle(t *testing.T) {
	tr := NewStreamTranslator(`model "quoted"`)
	if tr.Started() || tr.Done() {
		t.Fatal("fresh translator started or done")
	}
	if _, ok := tr.Usage(); ok {
		t.Error("usage before any chunk")
	}
	out, err := feed(tr, nil, []byte(": keep-alive\r\n\r\n"))
	if err != nil || len(out) != 0 || tr.Started() {
		t.Fatalf("comment produced %q, %v", out, err)
	}
	out = tr.Finish(nil)
	frames, err := parseFrames(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkOrder(frames); err != nil {
		t.Fatal(err)
	}
	if m := frames[0].Data["message"].(map[string]any); m["model"] != `model "quoted"` {
		t.Errorf("model %v", m["model"])
	}
	if frames[1].Data["delta"].(map[string]any)["stop_reason"] != "end_turn" {
		t.Errorf("stop_reason of an unexplained end: %v", frames[1].Data)
	}
	if !tr.Done() {
		t.Error("not Done after Finish")
	}
	// Nothing after the end: not a late chunk, not a second Finish.
	if out, err := feed(tr, []byte("x"), chunk(`{"content":"late"}`)); err != nil || string(out) != "x" {
		t.Errorf("event after end: %q %v", out, err)
	}
	if out := tr.Finish([]byte("y")); string(out) != "y" {
		t.Errorf("second Finish: %q", out)
	}
}

// TestStreamAppendsToDst: output is appended, never overwriting dst.
func TestStreamAppendsToDst(t *testing.T) {
	tr := NewStreamTranslator("m")
	out, err := feed(tr, []byte("prefix|"), chunk(`{"content":"a"}`))
	if err != nil || !bytes.HasPrefix(out, []byte("prefix|event: message_start\n")) {
		t.Fatalf("%q %v", out, err)
	}
}
