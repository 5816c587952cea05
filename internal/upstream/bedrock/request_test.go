package bedrock

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestChatToConverse: every translated chat field lands where the Converse
// reference puts it: system blocks, alternating merged messages, image
// bytes, toolUse/toolResult blocks, toolConfig with its choice, and
// inferenceConfig; the URL path escapes the model id as the AWS SDK does.
func TestChatToConverse(t *testing.T) {
	body := `{"model":"claude","stream":true,"stream_options":{"include_usage":true},
	"messages":[
	 {"role":"system","content":"Be brief."},
	 {"role":"developer","content":[{"type":"text","text":"Use metric units."}]},
	 {"role":"user","content":[{"type":"text","text":"Weather?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]},
	 {"role":"assistant","content":null,"tool_calls":[{"id":"tooluse_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Oslo\"}"}}]},
	 {"role":"tool","tool_call_id":"tooluse_1","content":"{\"temp\": 3}"},
	 {"role":"user","content":"thanks"}],
	"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather now","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
	"tool_choice":{"type":"function","function":{"name":"get_weather"}},
	"max_tokens":256,"temperature":0.2,"top_p":0.9,"stop":["END"],"user":"u-1"}`
	got, err := ChatToConverse([]byte(body), Options{Model: "us.anthropic.claude-sonnet-4-20250514-v1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse-stream"; got.Path != want {
		t.Errorf("path: got %s, want %s", got.Path, want)
	}
	if !got.Stream || !got.IncludeUsage {
		t.Errorf("stream %v, include usage %v: want both", got.Stream, got.IncludeUsage)
	}
	want := `{"messages":[{"role":"user","content":[{"text":"Weather?"},{"image":{"format":"png","source":{"bytes":"iVBORw0KGgo="}}}]},` +
		`{"role":"assistant","content":[{"toolUse":{"toolUseId":"tooluse_1","name":"get_weather","input":{"city":"Oslo"}}}]},` +
		`{"role":"user","content":[{"toolResult":{"toolUseId":"tooluse_1","content":[{"json":{"temp":3}}]}},{"text":"thanks"}]}],` +
		`"system":[{"text":"Be brief."},{"text":"Use metric units."}],` +
		`"inferenceConfig":{"maxTokens":256,"temperature":0.2,"topP":0.9,"stopSequences":["END"]},` +
		`"toolConfig":{"tools":[{"toolSpec":{"name":"get_weather","description":"Weather now","inputSchema":{"json":{"type":"object","properties":{"city":{"type":"string"}}}}}}],"toolChoice":{"tool":{"name":"get_weather"}}}}`
	if string(got.Body) != want {
		t.Errorf("body\n got: %s\nwant: %s", got.Body, want)
	}
}

// TestPathEscapesARNs: an ARN's ':' and '/' are escaped in the path, as
// the AWS SDK escapes a modelId label.
func TestPathEscapesARNs(t *testing.T) {
	arn := "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-haiku-20241022-v1:0"
	want := "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream"
	if got := Path(arn, true); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// TestChatToConverseChoices: tool_choice and the defaults map as the
// package documents, and a replayed call without tools still declares
// its tool (Converse refuses toolUse blocks without a toolConfig).
func TestChatToConverseChoices(t *testing.T) {
	tools := `"tools":[{"type":"function","function":{"name":"f"}}]`
	for _, tc := range []struct {
		name, body, want string
		maxTokens        int64
	}{
		{"auto", `{"messages":[{"role":"user","content":"x"}],` + tools + `,"tool_choice":"auto"}`,
			`{"messages":[{"role":"user","content":[{"text":"x"}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object","properties":{}}}}}],"toolChoice":{"auto":{}}}}`, 0},
		{"required", `{"messages":[{"role":"user","content":"x"}],` + tools + `,"tool_choice":"required"}`,
			`{"messages":[{"role":"user","content":[{"text":"x"}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object","properties":{}}}}}],"toolChoice":{"any":{}}}}`, 0},
		{"none without tools", `{"messages":[{"role":"user","content":"x"}],"tool_choice":"none"}`,
			`{"messages":[{"role":"user","content":[{"text":"x"}]}]}`, 0},
		{"default max tokens", `{"messages":[{"role":"user","content":"x"}]}`,
			`{"messages":[{"role":"user","content":[{"text":"x"}]}],"inferenceConfig":{"maxTokens":4096}}`, 4096},
		{"max_completion_tokens", `{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":7}`,
			`{"messages":[{"role":"user","content":[{"text":"x"}]}],"inferenceConfig":{"maxTokens":7}}`, 4096},
		{"replayed call", `{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"g","arguments":""}}]},{"role":"tool","tool_call_id":"c1","content":"sunny"}]}`,
			`{"messages":[{"role":"user","content":[{"text":"x"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"c1","name":"g","input":{}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"c1","content":[{"text":"sunny"}]}}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"g","inputSchema":{"json":{"type":"object"}}}}]}}`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChatToConverse([]byte(tc.body), Options{Model: "m", MaxTokens: tc.maxTokens})
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Body) != tc.want {
				t.Errorf("\n got: %s\nwant: %s", got.Body, tc.want)
			}
			if got.Path != "/model/m/converse" {
				t.Errorf("path %s", got.Path)
			}
		})
	}
}

// TestChatToConverseRefusals: what Converse cannot honour is refused
// naming the field, never dropped in silence.
func TestChatToConverseRefusals(t *testing.T) {
	msg := `"messages":[{"role":"user","content":"x"}]`
	for _, tc := range []struct{ body, param string }{
		{`{` + msg + `,"n":2}`, "n"},
		{`{` + msg + `,"logprobs":true}`, "logprobs"},
		{`{` + msg + `,"seed":1}`, "seed"},
		{`{` + msg + `,"response_format":{"type":"json_object"}}`, "response_format"},
		{`{` + msg + `,"temperature":1.5}`, "temperature"},
		{`{` + msg + `,"parallel_tool_calls":false}`, "parallel_tool_calls"},
		{`{` + msg + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`, "tool_choice"},
		{`{` + msg + `,"tool_choice":"required"}`, "tool_choice"},
		{`{` + msg + `,"frobnicate":1}`, "frobnicate"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`, "messages[0].content[0].image_url.url"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/tiff;base64,AAAA"}}]}]}`, "messages[0].content[0].image_url.url"},
		{`{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA","format":"wav"}}]}]}`, "messages[0].content[0].type"},
		{`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
		{`{"messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id"},
		{`{"messages":[{"role":"system","content":"only system"}]}`, "messages"},
	} {
		_, err := ChatToConverse([]byte(tc.body), Options{Model: "m"})
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Param != tc.param {
			t.Errorf("%s: got %v, want a refusal of %s", tc.body, err, tc.param)
		}
	}
	if _, err := ChatToConverse([]byte(`{`+msg+`}`), Options{}); err == nil {
		t.Error("no model: got no error")
	}
}

// TestConverseBodyIsJSON: every translated body is valid JSON whatever the
// prompt holds (HTML is not escaped away).
func TestConverseBodyIsJSON(t *testing.T) {
	got, err := ChatToConverse([]byte(`{"messages":[{"role":"user","content":"<b>&</b>"}]}`), Options{Model: "m"})
	if err != nil || !json.Valid(got.Body) || string(got.Body) != `{"messages":[{"role":"user","content":[{"text":"<b>&</b>"}]}]}` {
		t.Fatalf("got %s, %v", got.Body, err)
	}
}
