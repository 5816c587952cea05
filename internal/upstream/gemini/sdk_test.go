package gemini_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/genai"

	"github.com/llmgw/gateway/internal/upstream"
	"github.com/llmgw/gateway/internal/upstream/gemini"
)

// The wire shapes of Google's Go SDK (google.golang.org/genai), whose types
// carry the REST API's JSON names: a body this package writes must decode
// into them with no field left over, and a fixture this package reads must
// be one the SDK reads.

type sdkRequest struct {
	Contents          []*genai.Content        `json:"contents"`
	SystemInstruction *genai.Content          `json:"systemInstruction"`
	Tools             []*genai.Tool           `json:"tools"`
	ToolConfig        *genai.ToolConfig       `json:"toolConfig"`
	GenerationConfig  *genai.GenerationConfig `json:"generationConfig"`
}

type sdkResponse struct {
	Candidates     []*genai.Candidate                           `json:"candidates"`
	PromptFeedback *genai.GenerateContentResponsePromptFeedback `json:"promptFeedback"`
	UsageMetadata  *genai.GenerateContentResponseUsageMetadata  `json:"usageMetadata"`
	ModelVersion   string                                       `json:"modelVersion"`
	ResponseID     string                                       `json:"responseId"`
}

func strictDecode(t *testing.T, b []byte, v any) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		t.Fatalf("the SDK's types refuse %s: %v", b, err)
	}
}

// TestRequestsDecodeIntoSDK: every translated request fixture is a
// GenerateContentRequest as the SDK spells it, and the values the
// translation means reach the SDK's fields.
func TestRequestsDecodeIntoSDK(t *testing.T) {
	type fixture struct {
		Name string          `json:"name"`
		Body json.RawMessage `json:"body"`
		Want json.RawMessage `json:"want"`
	}
	n := 0
	for _, tc := range loadJSON[[]fixture](t, "requests.json") {
		if tc.Want == nil {
			continue
		}
		res, err := gemini.ChatToGemini(tc.Body, gemini.Options{Model: "gemini-2.5-flash"})
		if err != nil {
			t.Fatalf("%s: %v", tc.Name, err)
		}
		var r sdkRequest
		strictDecode(t, res.Body, &r)
		if len(r.Contents) == 0 {
			t.Fatalf("%s: no contents", tc.Name)
		}
		n++
	}
	if n < 5 {
		t.Fatalf("only %d fixtures decoded", n)
	}

	// The tools fixture, field by field through the SDK's types.
	body := `{"messages":[{"role":"user","content":"w?"},
		{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
		  "extra_content":{"google":{"thought_signature":"c2lnMQ=="}}}]},
		{"role":"tool","tool_call_id":"c1","content":"sunny"}],
		"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
		"tool_choice":"required","temperature":0.2,"max_tokens":9,
		"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}}}`
	res, err := gemini.ChatToGemini([]byte(body), gemini.Options{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	var r sdkRequest
	strictDecode(t, res.Body, &r)
	call := r.Contents[1].Parts[0]
	resp := r.Contents[2].Parts[0].FunctionResponse
	gc := r.GenerationConfig
	switch {
	case r.Contents[1].Role != genai.RoleModel || call.FunctionCall.Name != "get_weather" || call.FunctionCall.Args["city"] != "Paris":
		t.Fatalf("function call %+v", call.FunctionCall)
	case string(call.ThoughtSignature) != "sig1":
		t.Fatalf("thought signature %q", call.ThoughtSignature)
	case r.Contents[2].Role != genai.RoleUser || resp.Name != "get_weather" || resp.Response["output"] != "sunny":
		t.Fatalf("function response %+v", resp)
	case r.Tools[0].FunctionDeclarations[0].Name != "get_weather" || r.Tools[0].FunctionDeclarations[0].ParametersJsonSchema == nil:
		t.Fatalf("tools %+v", r.Tools[0].FunctionDeclarations[0])
	case r.ToolConfig.FunctionCallingConfig.Mode != genai.FunctionCallingConfigModeAny:
		t.Fatalf("tool config %+v", r.ToolConfig.FunctionCallingConfig)
	case gc.Temperature == nil || *gc.Temperature != 0.2 || gc.MaxOutputTokens != 9 ||
		gc.ResponseMIMEType != "application/json" || gc.ResponseJsonSchema == nil:
		t.Fatalf("generation config %+v", gc)
	}
}

// TestResponseFixturesAreSDKResponses: the response fixtures, but those
// broken on purpose, and every stream event are GenerateContentResponses
// the SDK reads with nothing left over.
func TestResponseFixturesAreSDKResponses(t *testing.T) {
	type fixture struct {
		Name       string          `json:"name"`
		Body       json.RawMessage `json:"body"`
		SDKInvalid bool            `json:"sdk_invalid"`
	}
	for _, tc := range loadJSON[[]fixture](t, "responses.json") {
		if !tc.SDKInvalid {
			var r sdkResponse
			strictDecode(t, tc.Body, &r)
		}
	}
	files, _ := filepath.Glob("testdata/streams/*.sse")
	for _, name := range files {
		raw, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		r := upstream.NewEventReader(bytes.NewReader(raw))
		for {
			ev, comment, err := r.Next()
			if err != nil {
				break
			}
			f := upstream.ParseEvent(ev)
			if comment || !f.HasData {
				continue
			}
			if strings.Contains(string(f.Data), `"error"`) {
				var e struct {
					Error *genai.APIError `json:"error"`
				}
				decodeEvent(t, f.Data, &e)
				continue
			}
			var resp sdkResponse
			strictDecode(t, f.Data, &resp)
		}
		r.Close()
	}
}

// decodeEvent decodes an error event into genai.APIError, which
// names only code, message, status and details.
func decodeEvent(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

// TestAbsurdUsageRefused: counts no model can produce reach the gateway's
// one usage rule, which refuses them, rather than being counted.
func TestAbsurdUsageRefused(t *testing.T) {
	for _, body := range []string{
		`{"usageMetadata":{"promptTokenCount":1e15,"candidatesTokenCount":1}}`,
		`{"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":-3}}`,
		`{"usageMetadata":{"promptTokenCount":10,"cachedContentTokenCount":11}}`,
		`{"usageMetadata":{"promptTokenCount":9000000000000000000,"toolUsePromptTokenCount":9000000000000000000}}`,
	} {
		u, ok := gemini.BodyUsage([]byte(body))
		if !ok {
			t.Fatalf("%s: not read", body)
		}
		if err := upstream.CheckUsage(upstream.Usage(u)); err == nil {
			t.Fatalf("%s: usage %+v accepted", body, u)
		}
	}
	u, ok := gemini.BodyUsage([]byte(`{"usageMetadata":{"promptTokenCount":10,"cachedContentTokenCount":4,"candidatesTokenCount":3,"thoughtsTokenCount":2}}`))
	if !ok || upstream.CheckUsage(upstream.Usage(u)) != nil || u.CompletionTokens != 5 || u.ReasoningTokens != 2 {
		t.Fatalf("plausible usage %+v %v refused", u, ok)
	}
}
