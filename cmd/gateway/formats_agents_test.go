package main

import (
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// agentsResult is one line of test/aisdk/agents.mjs.
type agentsResult struct {
	Call         string              `json:"call"`
	FinalOutput  string              `json:"finalOutput"`
	Calls        []map[string]string `json:"calls"`
	Items        []string            `json:"items"`
	Deltas       int                 `json:"deltas"`
	InputTokens  int                 `json:"inputTokens"`
	OutputTokens int                 `json:"outputTokens"`
	Requests     int                 `json:"requests"`
}

// TestOpenAIAgentsSDK runs the OpenAI Agents SDK (@openai/agents: an Agent
// with one function tool on its default OpenAI Responses model, the client's
// baseURL the gateway, tracing off) against models whose candidates are
// only anthropic and bedrock: anthropic first, bedrock first, and anthropic
// down failing over to bedrock. For run and a streamed run: the model calls
// the tool with JSON arguments, the SDK runs it and sends its output back,
// and the model's answer is the final output, over two model requests with
// usage. The streamed run also sends an image part and maxTokens, which reach
// the provider as its own image block and token limit.
func TestOpenAIAgentsSDK(t *testing.T) {
	n := requireNode(t, "@openai/agents")
	f := startJSFleet(t, mockupstream.Behavior{ToolUse: mockupstream.ToolUseFirst})
	for _, m := range jsModels {
		t.Run(m.name, func(t *testing.T) {
			got := runScript[agentsResult](t, n, "agents.mjs", f.g.base+"/v1", fmtClientToken, m.name)
			if len(got) != 2 || got[0].Call != "run" || got[1].Call != "run stream" {
				t.Fatalf("results %+v", got)
			}
			for _, r := range got {
				if len(r.Calls) != 1 || r.Calls[0]["identity"] != m.arg || len(r.Calls[0]) != 1 {
					t.Errorf("%s: the tool got %v, want one call with {identity: %s}", r.Call, r.Calls, m.arg)
				}
				if !strings.HasPrefix(r.FinalOutput, "Hello from "+m.identity) {
					t.Errorf("%s: final output %q", r.Call, r.FinalOutput)
				}
				// The tool call (after its text: the anthropic and bedrock
				// mocks write some first), the tool's output, then the answer.
				want := "tool_call_item,tool_call_output_item,message_output_item"
				if m.identity != "openai" {
					want = "message_output_item," + want
				}
				if items := strings.Join(r.Items, ","); items != want {
					t.Errorf("%s: items %s, want %s", r.Call, items, want)
				}
				if r.Requests != 2 || r.InputTokens <= 0 || r.OutputTokens <= 0 {
					t.Errorf("%s: usage %+v, want two requests with tokens", r.Call, r)
				}
			}
			if got[1].Deltas < 2 {
				t.Errorf("the streamed run got %d text deltas: it did not stream", got[1].Deltas)
			}
			// The streamed run's answering request, the last upstream call,
			// carried the tool's result, the image and the token limit.
			marks := jsMarks[m.identity]
			wantContains(t, "the upstream request", f.lastBody(t, m), append(marks.image, marks.maxTokens, marks.toolResult, "result for "+m.arg)...)
		})
	}
	f.checkServed(t)
}
