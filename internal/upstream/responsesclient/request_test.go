package responsesclient

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestResponsesToChat: request bodies as OpenAI's Responses API reference
// writes them, and the chat completions body each becomes.
func TestResponsesToChat(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"string input", `{"model":"gpt-4.1","input":"Tell me a three sentence bedtime story about a unicorn."}`,
			`{"model":"up","messages":[{"role":"user","content":"Tell me a three sentence bedtime story about a unicorn."}]}`},
		{"instructions and settings", `{"model":"m","instructions":"Talk like a pirate.","input":"Are semicolons optional in JavaScript?","max_output_tokens":256,"temperature":0.2,"top_p":0.9,"store":false,"metadata":{"a":"b"},"reasoning":{"effort":"low"},"user":"u1"}`,
			`{"model":"up","messages":[{"role":"system","content":"Talk like a pirate."},{"role":"user","content":"Are semicolons optional in JavaScript?"}],"max_completion_tokens":256,"temperature":0.2,"top_p":0.9,"user":"u1"}`},
		{"message items", `{"model":"m","input":[{"role":"developer","content":"Be brief."},{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_text","text":"there"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello!","annotations":[]}]}]}`,
			`{"model":"up","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi\nthere"},{"role":"assistant","content":"Hello!"}]}`},
		{"image", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"what is in this image?"},{"type":"input_image","image_url":"data:image/png;base64,iVBOR","detail":"high"}]}]}`,
			`{"model":"up","messages":[{"role":"user","content":[{"type":"text","text":"what is in this image?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBOR","detail":"high"}}]}]}`},
		{"tools and a call's round trip", `{"model":"m","stream":true,"tools":[{"type":"function","name":"get_weather","description":"Get current temperature","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]},"strict":true}],"tool_choice":{"type":"function","name":"get_weather"},"parallel_tool_calls":false,"input":[{"role":"user","content":"Weather in Paris?"},{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA"},{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":"{\"location\":\"Paris\"}"},{"type":"function_call_output","call_id":"call_1","output":"14C"}]}`,
			`{"model":"up","messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"Paris\"}"}}]},{"role":"tool","content":"14C","tool_call_id":"call_1"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"Get current temperature","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]},"strict":true}}],"tool_choice":{"function":{"name":"get_weather"},"type":"function"},"parallel_tool_calls":false,"stream":true,"stream_options":{"include_usage":true}}`},
		{"json schema", `{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"event","schema":{"type":"object"},"strict":true}}}`,
			`{"model":"up","messages":[{"role":"user","content":"x"}],"response_format":{"json_schema":{"name":"event","schema":{"type":"object"},"strict":true},"type":"json_schema"}}`},
		{"json object, tool_choice without tools dropped", `{"model":"m","input":"x","tool_choice":"required","text":{"format":{"type":"json_object"}}}`,
			`{"model":"up","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResponsesToChat([]byte(tc.in), "up", nil)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
			if !json.Valid(got) {
				t.Fatal("invalid JSON")
			}
		})
	}
}

// TestResponsesToChatRefuses: what has no chat form is the client's 400,
// naming the field.
func TestResponsesToChatRefuses(t *testing.T) {
	for _, tc := range []struct{ in, param string }{
		{`{"model":"m","input":"x","tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{`{"model":"m","input":"x","tools":[{"type":"function","name":"f"},{"type":"file_search","vector_store_ids":["vs"]}]}`, "tools[1].type"},
		{`{"model":"m","input":"x","tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`, "tools[0].type"},
		{`{"model":"m","input":"x","tools":[{"type":"mcp","server_label":"s"}]}`, "tools[0].type"},
		{`{"model":"m","input":"x","previous_response_id":"resp_1"}`, "previous_response_id"},
		{`{"model":"m","input":"x","conversation":"conv_1"}`, "conversation"},
		{`{"model":"m","input":"x","background":true}`, "background"},
		{`{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].id"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, "input[0].content[0].type"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"f"}]}]}`, "input[0].content[0].image_url"},
		{`{"model":"m","input":[{"role":"critic","content":"x"}]}`, "input[0].role"},
		{`{"model":"m","input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"file_search"}}`, "tool_choice"},
		{`{"model":"m","input":"x","text":{"format":{"type":"grammar"}}}`, "text.format.type"},
	} {
		_, err := ResponsesToChat([]byte(tc.in), "up", nil)
		var re *RequestError
		if !errors.As(err, &re) || re.Param != tc.param {
			t.Errorf("%s: got %v, want a refusal of %s", tc.in, err, tc.param)
		}
	}
}
