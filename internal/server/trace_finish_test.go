package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// finishRoutes: one mock behind every wire format, a model per format and
// way of ending (the mock's per-model behaviours end the *-len models at
// the token limit and make an-tool call a tool).
const finishRoutes = `
providers:
  - name: oa
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
%[3]s
  - name: an
    format: anthropic
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
  - name: gem
    format: gemini
    base_url: %[1]s/v1beta
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
  - name: br
    format: bedrock
    base_url: %[1]s
    bedrock: { region: us-east-1 }
    aws: { access_key_id: "${BR_KEY_ID}", secret_access_key: "${BR_SECRET}", session_token: "${BR_TOKEN}" }
    max_concurrency: 8
models:
  - { name: oa, candidates: [{ provider: oa, model: oa-up }] }
  - { name: oa-len, candidates: [{ provider: oa, model: oa-len }] }
  - { name: an-len, candidates: [{ provider: an, model: an-len }] }
  - { name: an-tool, candidates: [{ provider: an, model: an-tool }] }
  - { name: gem-len, candidates: [{ provider: gem, model: gem-len }] }
  - { name: br-len, candidates: [{ provider: br, model: "anthropic.claude-3-5-haiku-20241022-v1:0" }] }
`

// TestTraceFinishReasons: an attempt span carries
// gen_ai.response.finish_reasons, as OpenAI's values, for an answer that
// stopped, called a tool or hit the token limit, stream and not, whatever
// the provider's format and the client's: passed through (chat, messages,
// responses) or translated (anthropic, gemini, bedrock both ways, and the
// Responses API through the chat form).
func TestTraceFinishReasons(t *testing.T) {
	sink := newHTTPSink(t, false)
	env := traceEnv(sink, "BR_KEY_ID", brKeyID, "BR_SECRET", brSecret, "BR_TOKEN", brToken)
	g := start(t, setup{env: env, routes: finishRoutes, prepare: func(g *gateway) {
		g.Primary.EnableBedrock("us-east-1", brKeyID, brSecret, brToken)
		limit := mockupstream.Behavior{Identity: "primary", StopAtMaxTokens: true}
		for _, m := range []string{"oa-len", "an-len", "gem-len", "anthropic.claude-3-5-haiku-20241022-v1:0"} {
			g.Primary.SetModelBehavior(m, limit)
		}
		g.Primary.SetModelBehavior("an-tool", mockupstream.Behavior{Identity: "primary", ToolUse: mockupstream.ToolUseFirst})
	}})
	const (
		chatTools = `,"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}}],"tool_choice":"required"`
		msgTools  = `,"tools":[{"name":"lookup","input_schema":{"type":"object"}}]`
	)
	chat := func(model, extra string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	messages := func(model, extra string) string {
		return `{"model":"` + model + `","max_tokens":64,"messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	responses := func(model, text, extra string) string {
		return `{"model":"` + model + `","input":"` + text + `"` + extra + `}`
	}
	for i, tc := range []struct {
		name, path, body, want string
	}{
		{"chat stop", "/v1/chat/completions", chat("oa", ""), "stop"},
		{"chat tool", "/v1/chat/completions", chat("oa", chatTools), "tool_calls"},
		{"chat length", "/v1/chat/completions", chat("oa-len", ""), "length"},
		{"messages pass length", "/v1/messages", messages("an-len", ""), "length"},
		{"messages pass tool", "/v1/messages", messages("an-tool", msgTools), "tool_calls"},
		{"chat from anthropic length", "/v1/chat/completions", chat("an-len", ""), "length"},
		{"messages from openai length", "/v1/messages", messages("oa-len", ""), "length"},
		{"messages from openai tool", "/v1/messages", messages("oa", msgTools+`,"tool_choice":{"type":"any"}`), "tool_calls"},
		{"chat from gemini length", "/v1/chat/completions", chat("gem-len", ""), "length"},
		{"messages from gemini length", "/v1/messages", messages("gem-len", ""), "length"},
		{"chat from bedrock length", "/v1/chat/completions", chat("br-len", ""), "length"},
		{"responses pass stop", "/v1/responses", responses("oa", "hi", ""), "stop"},
		{"responses pass tool", "/v1/responses", responses("oa", "use the lookup tool", responsesTools), "tool_calls"},
		{"responses from anthropic length", "/v1/responses", responses("an-len", "hi", ""), "length"},
		{"responses from gemini length", "/v1/responses", responses("gem-len", "hi", ""), "length"},
	} {
		for j, stream := range []bool{false, true} {
			name := tc.name
			if stream {
				name += " stream"
			}
			t.Run(name, func(t *testing.T) {
				tid := fmt.Sprintf("%030x%02x", 0xf1+i, j)
				body := strings.Replace(tc.body, "{", fmt.Sprintf(`{"stream":%v,`, stream), 1)
				resp, b, err := g.postStream(t, tc.path, body, "Traceparent", "00-"+tid+"-"+inboundSID+"-01")
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d, %v: %s", resp.StatusCode, err, b)
				}
				tr := treeOf(t, sink.trace(t, tid, 2))
				if len(tr.attempts) != 1 {
					t.Fatalf("attempts %s, want one", names(tr.attempts))
				}
				if got := finishReasons(tr.attempts[0]); got != tc.want {
					t.Errorf("gen_ai.response.finish_reasons %q, want [%s]; answer %s", got, tc.want, b)
				}
			})
		}
	}
}

// finishReasons is an attempt span's gen_ai.response.finish_reasons, its
// values joined by commas ("" when absent; "!kind" when not a string
// array).
func finishReasons(sp *tracepb.Span) string {
	a := attr(sp, "gen_ai.response.finish_reasons")
	if a == nil {
		return ""
	}
	arr := a.GetArrayValue()
	if arr == nil {
		return fmt.Sprintf("!%T", a.Value)
	}
	var out []string
	for _, v := range arr.Values {
		out = append(out, v.GetStringValue())
	}
	return strings.Join(out, ",")
}
