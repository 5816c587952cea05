package mockupstream

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// TestToolUseEndsAfterToolResult: with ToolUse set, the Anthropic, Converse
// and Gemini endpoints call the tool until the last message carries its
// result, and then answer text, so an agent SDK's loop (call, run the tool,
// send the result, read the answer) ends.
func TestToolUseEndsAfterToolResult(t *testing.T) {
	s, ts := start(t, Behavior{Chunks: 1, ToolUse: ToolUseFirst})
	s.EnableBedrock("us-east-1", "AKIDMOCK", "mock-secret", "mock-token")
	creds := aws.Credentials{AccessKeyID: "AKIDMOCK", SecretAccessKey: "mock-secret", SessionToken: "mock-token"}
	const (
		anthropicAsk    = `{"role":"user","content":"hi"}`
		anthropicResult = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"42"}]}`
		anthropicCall   = `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"lookup","input":{}}]}`
		converseAsk     = `{"role":"user","content":[{"text":"hi"}]}`
		converseCall    = `{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"lookup","input":{}}}]}`
		converseResult  = `{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":"42"}]}}]}`
		geminiAsk       = `{"role":"user","parts":[{"text":"hi"}]}`
		geminiCall      = `{"role":"model","parts":[{"functionCall":{"name":"lookup","args":{}}}]}`
		geminiResult    = `{"role":"user","parts":[{"functionResponse":{"name":"lookup","response":{"result":"42"}}}]}`
	)
	anthropic := func(msgs string) string {
		return `{"model":"claude-test","max_tokens":64,"tools":[{"name":"lookup","input_schema":{"type":"object"}}],"messages":[` + msgs + `]}`
	}
	converse := func(msgs string) string {
		return `{"toolConfig":{"tools":[{"toolSpec":{"name":"lookup","inputSchema":{"json":{"type":"object"}}}}]},"messages":[` + msgs + `]}`
	}
	gemini := func(contents string) string {
		return `{"tools":[{"functionDeclarations":[{"name":"lookup"}]}],"contents":[` + contents + `]}`
	}
	for _, tc := range []struct {
		name, body string
		call       bool
	}{
		{"anthropic asks", anthropic(anthropicAsk), true},
		{"anthropic answers the result", anthropic(anthropicAsk + "," + anthropicCall + "," + anthropicResult), false},
		{"anthropic asks again after a result", anthropic(anthropicAsk + "," + anthropicCall + "," + anthropicResult + `,{"role":"assistant","content":"ok"},` + anthropicAsk), true},
		{"converse asks", converse(converseAsk), true},
		{"converse answers the result", converse(converseAsk + "," + converseCall + "," + converseResult), false},
		{"gemini asks", gemini(geminiAsk), true},
		{"gemini answers the result", gemini(geminiAsk + "," + geminiCall + "," + geminiResult), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var resp *http.Response
			switch {
			case strings.HasPrefix(tc.name, "anthropic"):
				resp = postTo(t, context.Background(), ts, pathMessages, tc.body, withAuth()...)
			case strings.HasPrefix(tc.name, "converse"):
				resp = signedConverse(t, ts.URL+"/model/anthropic.claude-v2%3A1/converse", creds, tc.body)
			default:
				resp = postTo(t, context.Background(), ts, pathGeminiFor("gemini-2.5-flash", "generateContent"), tc.body, "X-Goog-Api-Key", "k")
			}
			body := string(readAll(t, resp))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			called := strings.Contains(body, `"name":"lookup"`)
			stop := strings.Contains(body, `"tool_use"`) || strings.Contains(body, `"functionCall"`)
			if called != tc.call || stop != tc.call || !strings.Contains(body, "Hello from mock chunk 1") {
				t.Fatalf("tool call %v (stop %v), want %v: %s", called, stop, tc.call, body)
			}
		})
	}
}
