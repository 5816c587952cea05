package responsesclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// events splits a Responses stream into its events' names and data,
// checking each frame's shape: an event: line matching the data's type, a
// sequence_number counting from 0.
func events(t testing.TB, stream []byte) (names []string, data []map[string]any) {
	t.Helper()
	for i, frame := range strings.Split(strings.TrimSuffix(string(stream), "\n\n"), "\n\n") {
		if frame == "" {
			continue
		}
		name, d, ok := strings.Cut(frame, "\ndata: ")
		if !ok || !strings.HasPrefix(name, "event: ") {
			t.Fatalf("frame %q", frame)
		}
		name = strings.TrimPrefix(name, "event: ")
		var v map[string]any
		if err := json.Unmarshal([]byte(d), &v); err != nil {
			t.Fatalf("frame %q: %v", frame, err)
		}
		if v["type"] != name || v["sequence_number"] != float64(i) {
			t.Fatalf("frame %d %q: type or sequence_number", i, frame)
		}
		names, data = append(names, name), append(data, v)
	}
	return names, data
}

func translate(t testing.TB, chunks ...string) ([]byte, error) {
	tr := NewStreamTranslator("claude-x")
	var out []byte
	for _, c := range chunks {
		var err error
		if out, err = tr.Data(out, []byte(c)); err != nil {
			return out, err
		}
	}
	return out, nil
}

const (
	roleChunk  = `{"id":"c1","object":"chat.completion.chunk","created":1741290958,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
	usageChunk = `{"id":"c1","object":"chat.completion.chunk","created":1741290958,"model":"m","choices":[],"usage":{"prompt_tokens":36,"completion_tokens":87,"total_tokens":123,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":2}}}`
)

func textChunk(s string) string {
	b, _ := json.Marshal(s)
	return `{"id":"c1","choices":[{"index":0,"delta":{"content":` + string(b) + `},"finish_reason":null}]}`
}

func finishChunk(r string) string {
	return `{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"` + r + `"}]}`
}

// TestStreamText: a text answer is the event sequence OpenAI's reference
// gives, and response.completed carries the text and the usage.
func TestStreamText(t *testing.T) {
	out, err := translate(t, roleChunk, textChunk("Hi"), textChunk(" there"), finishChunk("stop"), usageChunk, "[DONE]")
	if err != nil {
		t.Fatal(err)
	}
	names, data := events(t, out)
	want := "response.created response.in_progress response.output_item.added response.content_part.added " +
		"response.output_text.delta response.output_text.delta response.output_text.done response.content_part.done " +
		"response.output_item.done response.completed"
	if strings.Join(names, " ") != want {
		t.Fatalf("events %v", names)
	}
	if data[6]["text"] != "Hi there" {
		t.Fatalf("output_text.done %v", data[6])
	}
	resp := data[len(data)-1]["response"].(map[string]any)
	if resp["status"] != "completed" || resp["model"] != "claude-x" || resp["created_at"] != float64(1741290958) {
		t.Fatalf("response %v", resp)
	}
	u := resp["usage"].(map[string]any)
	if u["input_tokens"] != float64(36) || u["output_tokens"] != float64(87) || u["total_tokens"] != float64(123) ||
		u["input_tokens_details"].(map[string]any)["cached_tokens"] != float64(4) ||
		u["output_tokens_details"].(map[string]any)["reasoning_tokens"] != float64(2) {
		t.Fatalf("usage %v", u)
	}
	item := resp["output"].([]any)[0].(map[string]any)
	if item["type"] != "message" || item["content"].([]any)[0].(map[string]any)["text"] != "Hi there" {
		t.Fatalf("output %v", item)
	}
}

// TestStreamToolCalls: each call is one function_call item, its argument
// fragments relayed as deltas and whole in .done.
func TestStreamToolCalls(t *testing.T) {
	call := func(i int, id, name, args string) string {
		a, _ := json.Marshal(args)
		head := `{"index":` + string(rune('0'+i))
		if id != "" {
			head += `,"id":"` + id + `","type":"function"`
		}
		fn := `"function":{"arguments":` + string(a)
		if name != "" {
			fn += `,"name":"` + name + `"`
		}
		return `{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[` + head + `,` + fn + `}}]},"finish_reason":null}]}`
	}
	out, err := translate(t, roleChunk, textChunk("Checking."), call(0, "call_a", "get_weather", ""), call(0, "", "", `{"loc`),
		call(0, "", "", `ation":"Paris"}`), call(1, "call_b", "get_time", `{}`), finishChunk("tool_calls"), usageChunk, "[DONE]")
	if err != nil {
		t.Fatal(err)
	}
	names, data := events(t, out)
	want := "response.created response.in_progress response.output_item.added response.content_part.added " +
		"response.output_text.delta response.output_text.done response.content_part.done response.output_item.done " +
		"response.output_item.added response.function_call_arguments.delta response.function_call_arguments.delta " +
		"response.function_call_arguments.done response.output_item.done " +
		"response.output_item.added response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done " +
		"response.completed"
	if strings.Join(names, " ") != want {
		t.Fatalf("events %v", names)
	}
	if d := data[11]; d["arguments"] != `{"location":"Paris"}` || d["output_index"] != float64(1) {
		t.Fatalf("arguments.done %v", d)
	}
	out2 := data[len(data)-1]["response"].(map[string]any)["output"].([]any)
	if len(out2) != 3 || out2[1].(map[string]any)["call_id"] != "call_a" || out2[2].(map[string]any)["name"] != "get_time" {
		t.Fatalf("output %v", out2)
	}
}

// TestStreamIncomplete: a length finish is response.incomplete, saying why.
func TestStreamIncomplete(t *testing.T) {
	out, err := translate(t, roleChunk, textChunk("Once upon"), finishChunk("length"), "[DONE]")
	if err != nil {
		t.Fatal(err)
	}
	names, data := events(t, out)
	last := data[len(data)-1]["response"].(map[string]any)
	if names[len(names)-1] != "response.incomplete" || last["status"] != "incomplete" ||
		last["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" {
		t.Fatalf("%v %v", names, last)
	}
}

// TestStreamErrors: an error object is a *ProviderError, a broken chunk
// ErrBadResponse; what came before is returned with either.
func TestStreamErrors(t *testing.T) {
	out, err := translate(t, roleChunk, textChunk("a"), `{"error":{"message":"overloaded","type":"server_error"}}`)
	var pe *ProviderError
	if !errors.As(err, &pe) || !bytes.Contains(out, []byte("response.output_text.delta")) {
		t.Fatalf("%v %s", err, out)
	}
	if _, err := translate(t, roleChunk, `{"choices":[`); !errors.Is(err, ErrBadResponse) {
		t.Fatalf("broken chunk: %v", err)
	}
}

// TestFinishWithoutDone: a stream that gave its finish_reason and ended
// closes cleanly; Finish after the terminal event adds nothing.
func TestFinishWithoutDone(t *testing.T) {
	tr := NewStreamTranslator("m")
	out, _ := tr.Data(nil, []byte(textChunk("x")))
	out, _ = tr.Data(out, []byte(finishChunk("stop")))
	if !tr.Finished() || tr.Done() {
		t.Fatal("state")
	}
	out = tr.Finish(out)
	n := len(out)
	if out = tr.Finish(out); len(out) != n || !tr.Done() {
		t.Fatal("second Finish wrote")
	}
	names, _ := events(t, out)
	if names[len(names)-1] != "response.completed" {
		t.Fatal(names)
	}
}

// TestChatToResponse: a chat.completion is the Response object the
// reference shows: output items and usage.
func TestChatToResponse(t *testing.T) {
	body := `{"id":"chatcmpl-1","object":"chat.completion","created":1741476542,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"Boston\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":3}}}`
	b, err := ChatToResponse([]byte(body), "claude-x")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		ID, Object, Status, Model string
		CreatedAt                 int64 `json:"created_at"`
		Output                    []struct {
			Type, ID, Role, CallID, Name, Arguments string
			Content                                 []struct{ Type, Text string }
		}
		Usage struct {
			InputTokens        int64 `json:"input_tokens"`
			OutputTokens       int64 `json:"output_tokens"`
			TotalTokens        int64 `json:"total_tokens"`
			InputTokensDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		}
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.ID, "resp_") || r.Object != "response" || r.Status != "completed" || r.Model != "claude-x" || r.CreatedAt != 1741476542 {
		t.Fatalf("%s", b)
	}
	if len(r.Output) != 2 || r.Output[0].Type != "message" || r.Output[0].Content[0].Text != "Hello." ||
		r.Output[1].Type != "function_call" || !bytes.Contains(b, []byte(`"call_id":"call_1"`)) ||
		!bytes.Contains(b, []byte(`"arguments":"{\"location\":\"Boston\"}"`)) {
		t.Fatalf("%s", b)
	}
	if r.Usage.InputTokens != 19 || r.Usage.OutputTokens != 10 || r.Usage.TotalTokens != 29 || r.Usage.InputTokensDetails.CachedTokens != 3 {
		t.Fatalf("%s", b)
	}
	b, _ = ChatToResponse([]byte(`{"choices":[{"message":{"content":"Once"},"finish_reason":"length"}]}`), "m")
	if !bytes.Contains(b, []byte(`"status":"incomplete","error":null,"incomplete_details":{"reason":"max_output_tokens"}`)) {
		t.Fatalf("%s", b)
	}
	if _, err := ChatToResponse([]byte(`{"choices":[]}`), "m"); !errors.Is(err, ErrBadResponse) {
		t.Fatal(err)
	}
}
