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

// decode unmarshals JSON into a generic value for structural comparison.
func decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMessagesToChatFixtures drives every testdata/requests case: the
// Anthropic request must translate to exactly the chat request given.
func TestMessagesToChatFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/requests/*.json")
	if err != nil || len(files) < 8 {
		t.Fatalf("fixtures: %v %d", err, len(files))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var fx struct {
				Request json.RawMessage `json:"request"`
				Stream  bool            `json:"stream"`
				Want    json.RawMessage `json:"want"`
			}
			if err := json.Unmarshal(raw, &fx); err != nil {
				t.Fatal(err)
			}
			got, stream, err := MessagesToChat(fx.Request, "upstream-model")
			if err != nil {
				t.Fatalf("MessagesToChat: %v", err)
			}
			if stream != fx.Stream {
				t.Errorf("stream = %v, want %v", stream, fx.Stream)
			}
			if g, w := decode(t, got), decode(t, fx.Want); !reflect.DeepEqual(g, w) {
				t.Errorf("chat request mismatch\ngot:  %s\nwant: %s", mustJSON(t, g), mustJSON(t, w))
			}
		})
	}
}

func TestMessagesToChatToolChoice(t *testing.T) {
	const tools = `"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],`
	cases := []struct {
		name, choice string
		noTools      bool
		wantChoice   any // nil: absent
		wantParallel any // nil: absent
	}{
		{name: "absent", choice: ``},
		{name: "auto", choice: `"tool_choice":{"type":"auto"},`, wantChoice: "auto"},
		{name: "any", choice: `"tool_choice":{"type":"any"},`, wantChoice: "required"},
		{name: "none", choice: `"tool_choice":{"type":"none"},`, wantChoice: "none"},
		{name: "tool", choice: `"tool_choice":{"type":"tool","name":"get_weather"},`,
			wantChoice: map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}},
		{name: "auto without parallel", choice: `"tool_choice":{"type":"auto","disable_parallel_tool_use":true},`,
			wantChoice: "auto", wantParallel: false},
		{name: "any without parallel", choice: `"tool_choice":{"type":"any","disable_parallel_tool_use":true},`,
			wantChoice: "required", wantParallel: false},
		{name: "parallel allowed", choice: `"tool_choice":{"type":"auto","disable_parallel_tool_use":false},`, wantChoice: "auto"},
		{name: "no tools drops choice", choice: `"tool_choice":{"type":"any","disable_parallel_tool_use":true},`, noTools: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := `{"model":"m","max_tokens":10,` + c.choice
			if !c.noTools {
				body += tools
			}
			body += `"messages":[{"role":"user","content":"hi"}]}`
			got, _, err := MessagesToChat([]byte(body), "up")
			if err != nil {
				t.Fatal(err)
			}
			m := decode(t, got).(map[string]any)
			if g := m["tool_choice"]; !reflect.DeepEqual(g, c.wantChoice) {
				t.Errorf("tool_choice = %#v, want %#v", g, c.wantChoice)
			}
			if g := m["parallel_tool_calls"]; !reflect.DeepEqual(g, c.wantParallel) {
				t.Errorf("parallel_tool_calls = %#v, want %#v", g, c.wantParallel)
			}
			_, hasTools := m["tools"]
			if hasTools == c.noTools {
				t.Errorf("tools present = %v", hasTools)
			}
		})
	}
}

func TestMessagesToChatErrors(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, body, param string
	}{
		{"missing max_tokens", `{"model":"m",` + msgs + `}`, "max_tokens"},
		{"null max_tokens", `{"model":"m","max_tokens":null,` + msgs + `}`, "max_tokens"},
		{"zero max_tokens", `{"model":"m","max_tokens":0,` + msgs + `}`, "max_tokens"},
		{"fractional max_tokens", `{"model":"m","max_tokens":1.5,` + msgs + `}`, "max_tokens"},
		{"string max_tokens", `{"model":"m","max_tokens":"100",` + msgs + `}`, "max_tokens"},
		{"not JSON", `{"model":`, ""},
		{"messages not a list", `{"max_tokens":5,"messages":"hi"}`, "messages"},
		{"no messages", `{"max_tokens":5,"messages":[]}`, "messages"},
		{"tool role", `{"max_tokens":5,"messages":[{"role":"tool","content":"x"}]}`, "messages.0.role"},
		{"system message with image", `{"max_tokens":5,"messages":[{"role":"system","content":[{"type":"image"}]}]}`, "messages.0.content.0.type"},
		{"missing content", `{"max_tokens":5,"messages":[{"role":"user"}]}`, "messages.0.content"},
		{"content number", `{"max_tokens":5,"messages":[{"role":"user","content":5}]}`, "messages.0.content"},
		{"temperature string", `{"max_tokens":5,"temperature":"hot",` + msgs + `}`, "temperature"},
		{"stream string", `{"max_tokens":5,"stream":"yes",` + msgs + `}`, "stream"},
		{"system image", `{"max_tokens":5,"system":[{"type":"image"}],` + msgs + `}`, "system.0.type"},
		{"pdf document", `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"}}]}]}`, "messages.0.content.1.source.type"},
		{"file image", `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`, "messages.0.content.0.source.type"},
		{"base64 image without media type", `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","data":"AA"}}]}]}`, "messages.0.content.0.source"},
		{"unknown block", `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"search_result"}]}]}`, "messages.0.content.0.type"},
		{"block without type", `{"max_tokens":5,"messages":[{"role":"user","content":[{"text":"x"}]}]}`, "messages.0.content.0.type"},
		{"tool_use in user turn", `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"b","input":{}}]}]}`, "messages.0.content.0.type"},
		{"tool_result in assistant turn", `{"max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`, "messages.0.content.0.type"},
		{"tool_use without id", `{"max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"b","input":{}}]}]}`, "messages.0.content.0.id"},
		{"tool_use without name", `{"max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","input":{}}]}]}`, "messages.0.content.0.name"},
		{"tool_use input list", `{"max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"b","input":[1]}]}]}`, "messages.0.content.0.input"},
		{"tool_result without id", `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, "messages.0.content.0.tool_use_id"},
		{"server tool", `{"max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}],` + msgs + `}`, "tools.0.type"},
		{"tool without name", `{"max_tokens":5,"tools":[{"input_schema":{"type":"object"}}],` + msgs + `}`, "tools.0.name"},
		{"tool schema not object", `{"max_tokens":5,"tools":[{"name":"a","input_schema":"x"}],` + msgs + `}`, "tools.0.input_schema"},
		{"tool_choice without name", `{"max_tokens":5,"tools":[{"name":"a"}],"tool_choice":{"type":"tool"},` + msgs + `}`, "tool_choice.name"},
		{"output format not json_schema", `{"max_tokens":5,"output_config":{"format":{"type":"xml"}},` + msgs + `}`, "output_config.format.type"},
		{"output format without schema", `{"max_tokens":5,"output_format":{"type":"json_schema"},` + msgs + `}`, "output_format.schema"},
		{"output_config not an object", `{"max_tokens":5,"output_config":[],` + msgs + `}`, "output_config"},
		{"tool_choice unknown", `{"max_tokens":5,"tools":[{"name":"a"}],"tool_choice":{"type":"sometimes"},` + msgs + `}`, "tool_choice.type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chat, _, err := MessagesToChat([]byte(c.body), "up")
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v (%T), chat = %s; want *RequestError", err, err, chat)
			}
			if re.Param != c.param {
				t.Errorf("Param = %q, want %q (message %q)", re.Param, c.param, re.Message)
			}
			if re.Message == "" {
				t.Error("empty Message")
			}
		})
	}
}

// TestRequestErrorDoesNotEchoContent guards the rule that errors may be
// logged: a refused block's content must not appear in the error.
func TestRequestErrorDoesNotEchoContent(t *testing.T) {
	body := `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"SECRET-PAYLOAD"}}]}]}`
	_, _, err := MessagesToChat([]byte(body), "up")
	if err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("err = %v", err)
	}
}

func TestMessagesToChatKeepsNumbersAndHTML(t *testing.T) {
	body := `{"max_tokens":9007199254740993,"temperature":0.30000000000000004,"messages":[{"role":"user","content":"<b>&</b>"}]}`
	got, _, err := MessagesToChat([]byte(body), "up")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"max_tokens":9007199254740993`, `"temperature":0.30000000000000004`, `"content":"<b>&</b>"`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("%s missing from %s", want, got)
		}
	}
}
