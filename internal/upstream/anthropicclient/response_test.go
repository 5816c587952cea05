package anthropicclient

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestChatToMessageFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/responses/*.json")
	if err != nil || len(files) < 4 {
		t.Fatalf("fixtures: %v %d", err, len(files))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var fx struct {
				Chat  json.RawMessage `json:"chat"`
				Want  json.RawMessage `json:"want"`
				Usage Usage           `json:"usage"`
			}
			if err := json.Unmarshal(raw, &fx); err != nil {
				t.Fatal(err)
			}
			got, usage, err := ChatToMessage(fx.Chat, "claude-sonnet-4-5")
			if err != nil {
				t.Fatalf("ChatToMessage: %v", err)
			}
			if g, w := decode(t, got), decode(t, fx.Want); !reflect.DeepEqual(g, w) {
				t.Errorf("message mismatch\ngot:  %s\nwant: %s", mustJSON(t, g), mustJSON(t, w))
			}
			if usage != fx.Usage {
				t.Errorf("usage = %+v, want %+v", usage, fx.Usage)
			}
		})
	}
}

func TestChatToMessageStopReasons(t *testing.T) {
	cases := []struct {
		finish string // JSON value
		calls  bool
		want   string
	}{
		{`"stop"`, false, "end_turn"},
		{`"length"`, false, "max_tokens"},
		{`"length"`, true, "max_tokens"},
		{`"tool_calls"`, true, "tool_use"},
		{`"function_call"`, true, "tool_use"},
		{`"content_filter"`, false, "refusal"},
		{`"stop"`, true, "tool_use"},
		{`null`, false, "end_turn"},
		{`"eos"`, false, "end_turn"},
	}
	for _, c := range cases {
		msg := `{"role":"assistant","content":"x"}`
		if c.calls {
			msg = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
		}
		body := `{"id":"chatcmpl-1","choices":[{"index":0,"message":` + msg + `,"finish_reason":` + c.finish + `}]}`
		got, _, err := ChatToMessage([]byte(body), "m")
		if err != nil {
			t.Fatalf("%s: %v", c.finish, err)
		}
		m := decode(t, got).(map[string]any)
		if m["stop_reason"] != c.want {
			t.Errorf("finish %s (calls %v): stop_reason %v, want %s", c.finish, c.calls, m["stop_reason"], c.want)
		}
		if v, ok := m["stop_sequence"]; !ok || v != nil {
			t.Errorf("stop_sequence = %v, present %v; want null", v, ok)
		}
	}
}

func TestChatToMessageShapes(t *testing.T) {
	cases := []struct {
		name, body  string
		wantContent string // JSON
		wantUsage   string // JSON of the usage object
	}{
		{
			name:        "empty content, no usage",
			body:        `{"id":"chatcmpl-e","choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}]}`,
			wantContent: `[]`,
			wantUsage:   `{"input_tokens":0,"output_tokens":0}`,
		},
		{
			name:        "content parts",
			body:        `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},"finish_reason":"stop"}]}`,
			wantContent: `[{"type":"text","text":"ab"}]`,
			wantUsage:   `{"input_tokens":0,"output_tokens":0}`,
		},
		{
			name:        "arguments as object, legacy function_call",
			body:        `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","function_call":{"name":"f","arguments":{"a":1}}},"finish_reason":"function_call"}]}`,
			wantContent: `[{"type":"tool_use","id":"*","name":"f","input":{"a":1}}]`,
			wantUsage:   `{"input_tokens":0,"output_tokens":0}`,
		},
		{
			name:        "arguments not an object",
			body:        `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c1","function":{"name":"f","arguments":"[1,2]"}},{"id":"c2","function":{"name":"g","arguments":"not json"}}]},"finish_reason":"tool_calls"}]}`,
			wantContent: `[{"type":"tool_use","id":"c1","name":"f","input":{}},{"type":"tool_use","id":"c2","name":"g","input":{}}]`,
			wantUsage:   `{"input_tokens":0,"output_tokens":0}`,
		},
		{
			name:        "second choice ignored",
			body:        `{"id":"x","choices":[{"index":1,"message":{"content":"B"},"finish_reason":"stop"},{"index":0,"message":{"content":"A"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`,
			wantContent: `[{"type":"text","text":"A"}]`,
			wantUsage:   `{"input_tokens":3,"output_tokens":1}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _, err := ChatToMessage([]byte(c.body), "m")
			if err != nil {
				t.Fatal(err)
			}
			m := decode(t, got).(map[string]any)
			content := m["content"].([]any)
			for _, b := range content {
				if blk := b.(map[string]any); blk["type"] == "tool_use" && strings.HasPrefix(blk["id"].(string), "toolu_") {
					blk["id"] = "*" // generated
				}
			}
			if w := decode(t, []byte(c.wantContent)); !reflect.DeepEqual(content, w) {
				t.Errorf("content = %s, want %s", mustJSON(t, content), c.wantContent)
			}
			if w := decode(t, []byte(c.wantUsage)); !reflect.DeepEqual(m["usage"], w) {
				t.Errorf("usage = %v, want %s", m["usage"], c.wantUsage)
			}
		})
	}
}

func TestChatToMessageIDs(t *testing.T) {
	for _, c := range []struct{ chatID, prefix string }{
		{"chatcmpl-abc", "msg_abc"},
		{"gen-17", "msg_gen-17"},
		{"", "msg_"},
	} {
		body := `{"id":"` + c.chatID + `","choices":[{"index":0,"message":{"content":"x"},"finish_reason":"stop"}]}`
		got, _, err := ChatToMessage([]byte(body), "m")
		if err != nil {
			t.Fatal(err)
		}
		id := decode(t, got).(map[string]any)["id"].(string)
		if !strings.HasPrefix(id, c.prefix) || (c.chatID == "" && len(id) != len("msg_")+24) || (c.chatID != "" && id != c.prefix) {
			t.Errorf("chat id %q: message id %q", c.chatID, id)
		}
	}
}

func TestChatToMessageErrors(t *testing.T) {
	cases := []struct {
		name, body string
		provider   *ProviderError // nil: ErrBadResponse expected
	}{
		{"not JSON", `<html>`, nil},
		{"no choices", `{"id":"x","choices":[]}`, nil},
		{"error object", `{"error":{"message":"model overloaded","type":"server_error","code":"overloaded"}}`,
			&ProviderError{Type: "server_error", Code: "overloaded", Message: "model overloaded"}},
		{"error string", `{"error":"bad gateway"}`, &ProviderError{Message: "bad gateway"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := ChatToMessage([]byte(c.body), "m")
			if c.provider == nil {
				if !errors.Is(err, ErrBadResponse) {
					t.Fatalf("err = %v, want ErrBadResponse", err)
				}
				return
			}
			var pe *ProviderError
			if !errors.As(err, &pe) || *pe != *c.provider {
				t.Fatalf("err = %#v, want %#v", err, c.provider)
			}
			if strings.Contains(pe.Error(), pe.Message) {
				t.Errorf("Error() %q carries the provider's message", pe.Error())
			}
		})
	}
}
