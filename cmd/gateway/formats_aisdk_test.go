package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// The JavaScript SDK checks (TestVercelAISDK, TestOpenAIAgentsSDK) run node
// scripts from test/aisdk against the real binary serving /v1/responses from
// models whose only candidates are anthropic and bedrock providers (the mock
// upstream in those modes), so every call goes through the Responses ⇄ chat
// translation.

// aisdkInstallHint names the command for what the node checks lack: Node.js
// (and so npm) with the packages, or only the packages.
func aisdkInstallHint(nodeErr, modulesErr error) string {
	switch {
	case nodeErr != nil:
		return "needs Node.js and the JavaScript SDKs: apt-get install nodejs npm && (cd test/aisdk && npm ci)"
	case modulesErr != nil:
		return "needs the JavaScript SDKs' packages in test/aisdk/node_modules: (cd test/aisdk && npm ci)"
	}
	return ""
}

// TestAISDKInstallHint: the skip message of the node checks asks for what
// is missing; with Node.js installed it asks only for npm ci.
func TestAISDKInstallHint(t *testing.T) {
	missing := errors.New("missing")
	for _, tt := range []struct {
		node, modules error
		want, not     string
	}{
		{missing, missing, "apt-get install nodejs npm && (cd test/aisdk && npm ci)", ""},
		{missing, nil, "apt-get install nodejs npm", ""},
		{nil, missing, "(cd test/aisdk && npm ci)", "apt-get"},
	} {
		got := aisdkInstallHint(tt.node, tt.modules)
		if !strings.Contains(got, tt.want) || (tt.not != "" && strings.Contains(got, tt.not)) {
			t.Errorf("node %v, modules %v: %q, want %q without %q", tt.node, tt.modules, got, tt.want, tt.not)
		}
	}
}

// nodeChecks is test/aisdk with node to run its scripts.
type nodeChecks struct {
	node, dir string
}

// requireNode finds node and the package a script imports (test/aisdk's
// node_modules/<pkg>, installed by .ci/run's npm ci). Without them the test
// fails under CI and otherwise skips naming the install command.
func requireNode(t *testing.T, pkg string) nodeChecks {
	t.Helper()
	dir, err := filepath.Abs("../../test/aisdk")
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", pkg))
	if err != nil || modErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node or test/aisdk/node_modules/%s missing under CI (node: %v, modules: %v)", pkg, err, modErr)
		}
		t.Skip(aisdkInstallHint(err, modErr))
	}
	return nodeChecks{node: node, dir: dir}
}

// nodeScriptTimeout bounds one script: each makes a handful of loopback
// calls and finishes in a few seconds.
const nodeScriptTimeout = 30 * time.Second

// run runs script with args and decodes its output, one JSON object a line,
// into a slice of T.
func runScript[T any](t *testing.T, n nodeChecks, script string, args ...string) []T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), nodeScriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.node, append([]string{script}, args...)...)
	cmd.Dir = n.dir
	// No proxy: the scripts call only the gateway on loopback (loopback.mjs
	// refuses any other origin).
	cmd.Env = append(os.Environ(), "NO_PROXY=*", "no_proxy=*", "OPENAI_AGENTS_DISABLE_TRACING=1")
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node %s %v: %v\n%s\n%s", script, args[2:], err, out, stderr)
	}
	t.Logf("node %s %v: %v", script, args[2:], time.Since(start).Round(time.Millisecond))
	var got []T
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r T
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("unreadable line %q: %v", line, err)
		}
		got = append(got, r)
	}
	return got
}

// The bedrock provider's credentials: the mock checks every request's SigV4
// signature with them, as AWS would.
const (
	jsBedrockKeyID  = "AKIAJSSENTINEL4Q7Z2"
	jsBedrockSecret = "jsSENTINELsecretK7MDENGbPxRfiCYEXAMPLEKEY"
	jsBedrockToken  = "jsSENTINELsessionTokenEXAMPLE0123456789"
	jsBedrockModel  = "anthropic.claude-3-5-haiku-20241022-v1:0"
	jsBedrockPath   = "/model/" + jsBedrockModel + "/converse"
	jsAnthropicPath = "/v1/messages"
)

// jsFleet is a gateway whose models have only anthropic and bedrock
// candidates, each in its own mock upstream, and one openai model for the
// pass-through.
type jsFleet struct {
	g                                *fmtGateway
	anthropic, bedrock, down, openai *mockupstream.Server
}

// jsModel is a model of the fleet, the format of the mock that serves it
// (its identity), and the identity argument that mock's tool call carries.
type jsModel struct {
	name, identity, arg string
}

// jsModels: anthropic first (bedrock behind it), bedrock first (anthropic
// behind it), an anthropic candidate that is down (529, overloaded) failing
// over to bedrock, and an openai provider, passed through. The anthropic and
// bedrock mocks call the tool with {"identity":"<their identity>"}, the
// OpenAI one with its schema's placeholder, "mock" (mockupstream's tools.go).
var jsModels = []jsModel{
	{"anthropic-first", "anthropic", "anthropic"},
	{"bedrock-first", "bedrock", "bedrock"},
	{"anthropic-down", "bedrock", "bedrock"},
	{"openai-only", "openai", "mock"},
}

// jsUpstreamMarks is how a mock's request body shows what the SDK sent, in
// its format.
type jsUpstreamMarks struct {
	toolResult string   // a tool's result
	image      []string // the 1x1 PNG
	maxTokens  string   // a token limit of 50
}

var jsMarks = map[string]jsUpstreamMarks{
	"anthropic": {`"type":"tool_result"`, []string{`"type":"image"`, `"media_type":"image/png"`}, `"max_tokens":50`},
	"bedrock":   {`"toolResult"`, []string{`"image":{"format":"png"`}, `"maxTokens":50`},
	"openai":    {`"type":"function_call_output"`, []string{`"type":"input_image"`, `"image_url":"data:image/png;base64,`}, `"max_output_tokens":50`},
}

func startJSFleet(t *testing.T, b mockupstream.Behavior) *jsFleet {
	t.Helper()
	f := &jsFleet{}
	var aURL, bURL, downURL, oURL string
	b.Chunks = 3
	b.Identity = "anthropic"
	f.anthropic, aURL = mockServer(t, b)
	b.Identity = "bedrock"
	f.bedrock, bURL = mockServer(t, b)
	f.bedrock.EnableBedrock("us-east-1", jsBedrockKeyID, jsBedrockSecret, jsBedrockToken)
	f.down, downURL = mockServer(t, mockupstream.Behavior{Identity: "down", Status: 529})
	f.openai, oURL = mockServer(t, mockupstream.Behavior{Identity: "openai", Chunks: 3})
	t.Setenv("JS_BR_KEY_ID", jsBedrockKeyID)
	t.Setenv("JS_BR_SECRET", jsBedrockSecret)
	t.Setenv("JS_BR_TOKEN", jsBedrockToken)
	f.g = startFormats(t, `
providers:
  - { name: claude, format: anthropic, base_url: "`+aURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4 }
  - { name: claude-down, format: anthropic, base_url: "`+downURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4 }
  - name: br
    format: bedrock
    base_url: "`+bURL+`"
    bedrock: { region: us-east-1 }
    aws: { access_key_id: "${JS_BR_KEY_ID}", secret_access_key: "${JS_BR_SECRET}", session_token: "${JS_BR_TOKEN}" }
    max_concurrency: 4
  - { name: oa, base_url: "`+oURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4 }
models:
  - name: anthropic-first
    candidates: [{ provider: claude, model: claude-sonnet-4-5 }, { provider: br, model: "`+jsBedrockModel+`", priority: 1 }]
  - name: bedrock-first
    candidates: [{ provider: br, model: "`+jsBedrockModel+`" }, { provider: claude, model: claude-sonnet-4-5, priority: 1 }]
  - name: anthropic-down
    candidates: [{ provider: claude-down, model: claude-sonnet-4-5 }, { provider: br, model: "`+jsBedrockModel+`", priority: 1 }]
  - name: openai-only
    candidates: [{ provider: oa, model: gpt-4.1-mini }]
`)
	return f
}

// lastBody is the body of the last request the mock serving m got.
func (f *jsFleet) lastBody(t *testing.T, m jsModel) string {
	t.Helper()
	srv, path := f.anthropic, jsAnthropicPath
	switch m.identity {
	case "bedrock":
		srv, path = f.bedrock, jsBedrockPath
	case "openai":
		srv, path = f.openai, "/v1/responses"
	}
	r, ok := srv.LastRequestAt(path)
	if !ok {
		t.Fatalf("%s got no request", m.identity)
	}
	return string(r.Body)
}

// checkServed fails unless the anthropic candidate that is down was tried,
// and every admission slot is back.
func (f *jsFleet) checkServed(t *testing.T) {
	t.Helper()
	if st, _ := f.down.StatsFor(jsAnthropicPath); st.Requests == 0 {
		t.Fatal("the anthropic candidate that is down was never tried: anthropic-down did not fail over")
	}
	f.g.gatesIdle(t)
}

// wantContains fails unless s contains every one of want.
func wantContains(t *testing.T, what, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("%s: %q not in %s", what, w, s)
		}
	}
}

// aisdkResult is one line of test/aisdk/check.mjs.
type aisdkResult struct {
	Call              string              `json:"call"`
	Text              string              `json:"text"`
	Parts             int                 `json:"parts"`
	FinishReason      string              `json:"finishReason"`
	InputTokens       int                 `json:"inputTokens"`
	OutputTokens      int                 `json:"outputTokens"`
	Calls             []map[string]string `json:"calls"`
	StepFinishReasons []string            `json:"stepFinishReasons"`
	ToolResults       []map[string]string `json:"toolResults"`
	ItemReferences    int                 `json:"itemReferences"` // request bodies naming an item_reference
}

// TestVercelAISDK runs the Vercel AI SDK's default OpenAI provider (`ai`
// with `@ai-sdk/openai`: openai(model) calls /v1/responses) against models
// whose candidates are only anthropic and bedrock: anthropic first, bedrock
// first, and anthropic down failing over to bedrock. Text: streamText, and
// generateText with an image part and maxOutputTokens, which reach the
// provider as its own image block and token limit. Tools: generateText and
// streamText with one tool the model calls with JSON arguments; the SDK runs
// it, sends the result back, and the model's answer ends the loop (finish
// reasons tool-calls then stop, usage over both steps), with the SDK's
// default store (its answering step names the tool call step's items by
// item_reference, which the gateway resolves from the items it kept) and
// with store: false (the items sent whole).
func TestVercelAISDK(t *testing.T) {
	n := requireNode(t, "ai")
	f := startJSFleet(t, mockupstream.Behavior{})
	for _, m := range jsModels {
		t.Run(m.name+"/text", func(t *testing.T) {
			got := runScript[aisdkResult](t, n, "check.mjs", f.g.base+"/v1", fmtClientToken, m.name, "text")
			if len(got) != 2 || got[0].Call != "streamText" || got[1].Call != "generateText" {
				t.Fatalf("results %+v", got)
			}
			for _, r := range got {
				if !strings.Contains(r.Text, "Hello from "+m.identity) || r.FinishReason != "stop" || r.InputTokens <= 0 || r.OutputTokens <= 0 {
					t.Errorf("%s: %+v", r.Call, r)
				}
			}
			if got[0].Parts < 2 {
				t.Errorf("streamText got %d text parts: the answer did not stream", got[0].Parts)
			}
			// The last upstream call is generateText's.
			marks := jsMarks[m.identity]
			wantContains(t, "the upstream request", f.lastBody(t, m), append(marks.image, marks.maxTokens)...)
		})
	}
	// The OpenAI mock calls a tool when the prompt asks for it by name; the
	// others when told to.
	f.anthropic.SetBehavior(mockupstream.Behavior{Identity: "anthropic", Chunks: 3, ToolUse: mockupstream.ToolUseFirst})
	f.bedrock.SetBehavior(mockupstream.Behavior{Identity: "bedrock", Chunks: 3, ToolUse: mockupstream.ToolUseFirst})
	for _, m := range jsModels {
		t.Run(m.name+"/tools", func(t *testing.T) {
			got := runScript[aisdkResult](t, n, "check.mjs", f.g.base+"/v1", fmtClientToken, m.name, "tools")
			if len(got) != 3 || got[0].Call != "generateText" || got[1].Call != "streamText" || got[2].Call != "generateText store false" {
				t.Fatalf("results %+v", got)
			}
			for _, r := range got {
				// Translated, the default store's answering step names the
				// items the gateway made (and kept) by reference; store:
				// false sends them whole. (The OpenAI mock's items are
				// not named by reference: there the count is 0.)
				if refs := r.ItemReferences > 0; refs != (r.Call != "generateText store false" && m.identity != "openai") {
					t.Errorf("%s: %d request bodies with an item_reference", r.Call, r.ItemReferences)
				}
				if len(r.Calls) != 1 || r.Calls[0]["identity"] != m.arg || len(r.Calls[0]) != 1 {
					t.Errorf("%s: the tool got %v, want one call with {identity: %s}", r.Call, r.Calls, m.arg)
				}
				if strings.Join(r.StepFinishReasons, ",") != "tool-calls,stop" || r.FinishReason != "stop" {
					t.Errorf("%s: steps %v, finish %q: want the tool call step, then the answer", r.Call, r.StepFinishReasons, r.FinishReason)
				}
				if len(r.ToolResults) != 1 || r.ToolResults[0]["found"] != "result for "+m.arg {
					t.Errorf("%s: tool results %v", r.Call, r.ToolResults)
				}
				if !strings.Contains(r.Text, "Hello from "+m.identity) || r.InputTokens <= 0 || r.OutputTokens <= 0 {
					t.Errorf("%s: %+v", r.Call, r)
				}
			}
			// The last answering step (store: false's) carried the tool's
			// result to the provider.
			wantContains(t, "the upstream request", f.lastBody(t, m), jsMarks[m.identity].toolResult, "result for "+m.arg)
		})
	}
	f.checkServed(t)
}
