package mockupstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

const weatherTool = `{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",` +
	`"properties":{"city":{"type":"string"},"days":{"type":"integer"},"unit":{"type":"string","enum":["c","f"]},"alerts":{"type":["null","boolean"]}},` +
	`"required":["city","days","unit","alerts"]}}}`
const timeTool = `{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"zone":{"type":"string"}}}}}`

// TestToolCallDecision: when the OpenAI endpoints call a tool, which one,
// and with which arguments (the rules of tools.go), for chat and Responses
// bodies alike.
func TestToolCallDecision(t *testing.T) {
	const weatherArgs = `{"city":"mock","days":1,"unit":"c","alerts":true}`
	tests := []struct {
		name     string
		tools    string // chat tools
		choice   string // tool_choice, "" absent
		messages string
		want     string // tool name, "" for text
		args     string
	}{
		{"required calls the first tool", weatherTool + "," + timeTool, `"required"`, `[{"role":"user","content":"hi"}]`, "get_weather", weatherArgs},
		{"named choice", weatherTool + "," + timeTool, `{"type":"function","function":{"name":"get_time"}}`, `[{"role":"user","content":"hi"}]`, "get_time", `{}`},
		{"asked with use the ... tool", weatherTool + "," + timeTool, "", `[{"role":"user","content":"Please USE THE get_time TOOL now"}]`, "get_time", `{}`},
		{"asked with call, in parts", weatherTool, `"auto"`, `[{"role":"user","content":[{"type":"text","text":"call get_weather for Paris"}]}]`, "get_weather", weatherArgs},
		{"not asked", weatherTool, "", `[{"role":"user","content":"what is the weather?"}]`, "", ""},
		{"none", weatherTool, `"none"`, `[{"role":"user","content":"call get_weather"}]`, "", ""},
		{"after a tool result", weatherTool, `"required"`, `[{"role":"user","content":"call get_weather"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"sunny"}]`, "", ""},
		{"asked after an earlier tool round", weatherTool, "", `[{"role":"user","content":"call get_weather"},{"role":"tool","tool_call_id":"c1","content":"sunny"},{"role":"user","content":"thanks"}]`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			choice := ""
			if tt.choice != "" {
				choice = `,"tool_choice":` + tt.choice
			}
			chat := chatToolCall([]byte(`{"model":"m","tools":[` + tt.tools + `]` + choice + `,"messages":` + tt.messages + `}`))
			if chat.name != tt.want || string(chat.args) != tt.args {
				t.Fatalf("chat: %q %s, want %q %s", chat.name, chat.args, tt.want, tt.args)
			}
			// The same request in the Responses shape: flat tools, items.
			var tools []struct {
				Function json.RawMessage `json:"function"`
			}
			if err := json.Unmarshal([]byte("["+tt.tools+"]"), &tools); err != nil {
				t.Fatal(err)
			}
			var flat []string
			for _, f := range tools {
				flat = append(flat, `{"type":"function",`+strings.TrimPrefix(string(f.Function), "{"))
			}
			rchoice := strings.Replace(choice, `"function":{"name":"get_time"}`, `"name":"get_time"`, 1)
			input := strings.NewReplacer(`{"role":"tool","tool_call_id":"c1","content":"sunny"}`, `{"type":"function_call_output","call_id":"c1","output":"sunny"}`,
				`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}`,
				`{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{}"}`,
				`"type":"text"`, `"type":"input_text"`).Replace(tt.messages)
			resp := responsesToolCall([]byte(`{"model":"m","tools":[` + strings.Join(flat, ",") + `]` + rchoice + `,"input":` + input + `}`))
			if resp.name != tt.want || string(resp.args) != tt.args {
				t.Fatalf("responses: %q %s, want %q %s", resp.name, resp.args, tt.want, tt.args)
			}
		})
	}
	if c := responsesToolCall([]byte(`{"model":"m","tools":[{"type":"function","name":"get_time"}],"input":"call get_time please"}`)); c.name != "get_time" || string(c.args) != "{}" {
		t.Fatalf("responses with a string input: %q %s", c.name, c.args)
	}
}

// TestChatToolCallWire: the chat endpoint's tool call, stream and not, is
// what OpenAI's SDK reads as one: the accumulated call has its id, name and
// arguments, finish_reason tool_calls, and no text.
func TestChatToolCallWire(t *testing.T) {
	_, ts := start(t, Behavior{Usage: true})
	body := `{"model":"m","tools":[` + weatherTool + `],"tool_choice":"required","messages":[{"role":"user","content":"hi"}]`
	var whole openai.ChatCompletion
	if err := json.Unmarshal(readAll(t, post(t, context.Background(), ts, body+`}`)), &whole); err != nil {
		t.Fatal(err)
	}
	msg := whole.Choices[0].Message
	if whole.Choices[0].FinishReason != "tool_calls" || msg.Content != "" || len(msg.ToolCalls) != 1 ||
		msg.ToolCalls[0].Function.Name != "get_weather" || !strings.HasPrefix(msg.ToolCalls[0].ID, "call_mock_") ||
		msg.ToolCalls[0].Function.Arguments != `{"city":"mock","days":1,"unit":"c","alerts":true}` {
		t.Fatalf("non-stream answer %+v", whole.Choices)
	}
	raw := readAll(t, post(t, context.Background(), ts, body+`,"stream":true,"stream_options":{"include_usage":true}}`))
	var acc openai.ChatCompletionAccumulator
	finished := false
	for _, ev := range splitEvents(t, raw) {
		data := strings.TrimPrefix(ev, "data: ")
		if data == "[DONE]" {
			continue
		}
		var chunk openai.ChatCompletionChunk
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		acc.AddChunk(chunk)
		if _, ok := acc.JustFinishedToolCall(); ok {
			finished = true
		}
	}
	if !strings.HasSuffix(string(raw), "data: [DONE]\n\n") || acc.Usage.TotalTokens == 0 || !finished {
		t.Fatalf("stream end, usage or finished call missing:\n%s", raw)
	}
	got := acc.Choices[0]
	if got.FinishReason != "tool_calls" || got.Message.Content != "" || len(got.Message.ToolCalls) != 1 ||
		!strings.HasPrefix(got.Message.ToolCalls[0].ID, "call_mock_") ||
		got.Message.ToolCalls[0].Function.Name != "get_weather" || got.Message.ToolCalls[0].Function.Arguments != msg.ToolCalls[0].Function.Arguments {
		t.Fatalf("accumulated stream %+v", got)
	}
	// After the tool's result the answer is text again.
	after := readAll(t, post(t, context.Background(), ts, `{"model":"m","tools":[`+weatherTool+`],"tool_choice":"required","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"c","content":"sunny"}]}`))
	if !strings.Contains(string(after), `"content":"Hello from mock`) || strings.Contains(string(after), "tool_calls") {
		t.Fatalf("answer after the tool result: %s", after)
	}
}

// TestResponsesToolCallWire: the Responses endpoint's function call, stream
// and not, decodes with OpenAI's SDK types: a function_call output item
// with call_id, name and arguments, its argument events, and a completed
// response holding it.
func TestResponsesToolCallWire(t *testing.T) {
	_, ts := start(t, Behavior{})
	body := `{"model":"m","tools":[{"type":"function","name":"get_time","parameters":{"type":"object","properties":{"zone":{"type":"string"}},"required":["zone"]}}],"input":"use the get_time tool"`
	check := func(r responses.Response, where string) {
		t.Helper()
		if len(r.Output) != 1 || r.Output[0].Type != "function_call" || r.Status != "completed" {
			t.Fatalf("%s: output %+v", where, r.Output)
		}
		fc := r.Output[0].AsFunctionCall()
		if fc.Name != "get_time" || fc.Arguments != `{"zone":"mock"}` || !strings.HasPrefix(fc.CallID, "call_mock_") {
			t.Fatalf("%s: function call %+v", where, fc)
		}
	}
	var whole responses.Response
	if err := json.Unmarshal(readAll(t, postTo(t, context.Background(), ts, "/v1/responses", body+`}`)), &whole); err != nil {
		t.Fatal(err)
	}
	check(whole, "non-stream")
	events := splitNamedEvents(t, readAll(t, postTo(t, context.Background(), ts, "/v1/responses", body+`,"stream":true}`)))
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done", "response.completed"}
	if got := eventNames(events); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("events %v, want %v", got, want)
	}
	var delta string
	for _, e := range events {
		var ev responses.ResponseStreamEventUnion
		if err := json.Unmarshal([]byte(e.Data), &ev); err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		switch e.Name {
		case "response.function_call_arguments.delta":
			delta += ev.AsResponseFunctionCallArgumentsDelta().Delta
		case "response.completed":
			check(ev.AsResponseCompleted().Response, "stream")
		}
	}
	if delta != `{"zone":"mock"}` {
		t.Fatalf("argument deltas %q", delta)
	}
}
