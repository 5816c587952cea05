package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// cloudFormat is one of the translated cloud formats as the SDK tests see
// it: a gateway whose primary mock speaks it, the client model routed
// there, where the mock is called, and how the provider's body spells
// what the client asked for.
type cloudFormat struct {
	name               string
	setup              func(t *testing.T) setup
	model              string
	path, streamPath   string // the primary mock's paths for the model
	image, stop, limit string // in the provider's body: the image part, stop ["END"], max tokens 50
	toolResult         string // in the provider's body: the tool's answer sent back
}

var cloudFormats = []cloudFormat{
	{name: "gemini", setup: func(*testing.T) setup { return setup{routes: geminiRoutes, db: true} }, model: "gemini-2.5-flash",
		path: geminiPath, streamPath: "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
		image: `"inlineData":{"mimeType":"image/png"`, stop: `"stopSequences":["END"]`, limit: `"maxOutputTokens":50`,
		toolResult: `"functionResponse":{"name":"lookup"`},
	{name: "vertex", setup: func(t *testing.T) setup { return vertexSetup(t, setup{}, nil) }, model: "gemini-2.5-flash",
		path: vertexPath + "generateContent", streamPath: vertexPath + "streamGenerateContent",
		image: `"inlineData":{"mimeType":"image/png"`, stop: `"stopSequences":["END"]`, limit: `"maxOutputTokens":50`,
		toolResult: `"functionResponse":{"name":"lookup"`},
	{name: "bedrock", setup: func(*testing.T) setup { return bedrockSetup(setup{}) }, model: "claude-br",
		path: brModelPath, streamPath: brModelPath + "-stream",
		image: `"image":{"format":"png"`, stop: `"stopSequences":["END"]`, limit: `"maxTokens":50`,
		toolResult: `"toolResult":{"toolUseId":"tooluse_mock_`},
}

// The 1x1 PNG both SDKs send, base64.
const pngBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="

// sdkGateway is a gateway of one cloud format, with the official OpenAI and
// Anthropic Go clients pointed at it; ids keeps each answer's X-Request-Id.
type sdkGateway struct {
	*gateway
	f  cloudFormat
	oc openai.Client
	ac anthropic.Client
	ids
}

// ids records the X-Request-Id of each answer next (the harness's
// transport, whose idle connections it closes) carried.
type ids struct {
	next http.RoundTripper
	mu   sync.Mutex
	last string
}

func (r *ids) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if resp != nil {
		r.mu.Lock()
		r.last = resp.Header.Get("X-Request-Id")
		r.mu.Unlock()
	}
	return resp, err
}

func (r *ids) lastID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// sent is the body the primary mock last got at path.
func (g *sdkGateway) sent(t *testing.T, stream bool) string {
	t.Helper()
	path := g.f.path
	if stream {
		path = g.f.streamPath
	}
	last, ok := g.Primary.LastRequestAt(path)
	if !ok {
		t.Fatalf("no request at %s", path)
	}
	return string(last.Body)
}

// wantSent fails unless the provider's last body holds each text.
func (g *sdkGateway) wantSent(t *testing.T, stream bool, texts ...string) {
	t.Helper()
	body := g.sent(t, stream)
	for _, s := range texts {
		if !strings.Contains(body, s) {
			t.Errorf("%s not in what %s got: %s", s, g.f.name, body)
		}
	}
}

// wantRowUsage fails unless the last request's row holds the usage the
// client was told.
func (g *sdkGateway) wantRowUsage(t *testing.T, prompt, completion int64) {
	t.Helper()
	req, rows := g.ledger(t, g.lastID())
	if req.PromptTokens == nil || req.TotalTokens == nil || *req.PromptTokens != prompt || *req.TotalTokens != prompt+completion {
		t.Fatalf("row usage prompt %s total %s, the client was told %d + %d", ip(req.PromptTokens), ip(req.TotalTokens), prompt, completion)
	}
	if rows[0].Status != "success" {
		t.Fatalf("rows %v", rows)
	}
}

// useTool makes the mock call the request's first tool (or stop calling it).
func (g *sdkGateway) useTool(on bool) {
	b := mockupstream.Behavior{Identity: "primary"}
	if on {
		b.ToolUse = mockupstream.ToolUseFirst
	}
	g.Primary.SetBehavior(b)
}

// TestCloudFormatsSDKs: the official OpenAI and Anthropic Go clients, stream
// and not, through each cloud format: text with a system prompt and an
// image part, stop sequences and max tokens (which reach the provider in
// its own spelling; a max below the answer cuts it, finished length /
// max_tokens), finish reasons, usage (the same in the rows), and a
// tool call round trip: the call's JSON arguments decoded by the SDK, the
// tool's result sent back and reaching the provider.
func TestCloudFormatsSDKs(t *testing.T) {
	for _, f := range cloudFormats {
		t.Run(f.name, func(t *testing.T) {
			rt := &sdkGateway{f: f}
			rt.gateway = start(t, f.setup(t))
			rt.next = rt.client.Transport
			hc := &http.Client{Transport: &rt.ids}
			rt.oc = openai.NewClient(option.WithBaseURL(rt.URL+"/v1/"), option.WithAPIKey("client-SENTINEL-token"),
				option.WithMaxRetries(0), option.WithHTTPClient(hc))
			rt.ac = anthropic.NewClient(aoption.WithBaseURL(rt.URL), aoption.WithAPIKey("client-SENTINEL-token"),
				aoption.WithMaxRetries(0), aoption.WithHTTPClient(hc))
			for _, stream := range []bool{false, true} {
				name := map[bool]string{false: "", true: " stream"}[stream]
				t.Run("openai text"+name, func(t *testing.T) { openaiText(t, rt, stream) })
				t.Run("openai tools"+name, func(t *testing.T) { openaiTools(t, rt, stream) })
				t.Run("anthropic text"+name, func(t *testing.T) { anthropicText(t, rt, stream) })
				t.Run("anthropic tools"+name, func(t *testing.T) { anthropicTools(t, rt, stream) })
			}
			if n := rt.Backup.Stats().Requests; n != 0 {
				t.Fatalf("the backup got %d requests", n)
			}
		})
	}
}

const wantText = "Hello from primary chunk 1 2 3"

// openaiChat asks through the OpenAI client, accumulating a stream into
// the answer a non-stream request gets.
func openaiChat(t *testing.T, g *sdkGateway, stream bool, p openai.ChatCompletionNewParams) openai.ChatCompletion {
	t.Helper()
	ctx := context.Background()
	if !stream {
		resp, err := g.oc.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return *resp
	}
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	st := g.oc.Chat.Completions.NewStreaming(ctx, p)
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	return acc.ChatCompletion
}

func openaiText(t *testing.T, g *sdkGateway, stream bool) {
	resp := openaiChat(t, g, stream, openai.ChatCompletionNewParams{Model: g.f.model,
		Stop: openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"END"}}, MaxCompletionTokens: openai.Int(50),
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are terse."),
			openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("What is in this picture?"),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64," + pngBase64}),
			}),
		}})
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content != wantText || resp.Choices[0].FinishReason != "stop" || resp.Model != g.f.model {
		t.Fatalf("answer %+v", resp)
	}
	u := resp.Usage
	if u.PromptTokens <= 0 || u.CompletionTokens != 3 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Fatalf("usage %+v", u)
	}
	g.wantSent(t, stream, g.f.image, g.f.stop, g.f.limit, "You are terse.")
	g.wantRowUsage(t, u.PromptTokens, u.CompletionTokens)

	// max tokens below the answer: the provider cuts it, the client reads length.
	resp = openaiChat(t, g, stream, openai.ChatCompletionNewParams{Model: g.f.model, MaxTokens: openai.Int(2),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	if resp.Choices[0].Message.Content != "Hello from primary chunk 1 2" || resp.Choices[0].FinishReason != "length" || resp.Usage.CompletionTokens != 2 {
		t.Fatalf("max_tokens 2: %+v usage %+v", resp.Choices[0], resp.Usage)
	}
}

func openaiTools(t *testing.T, g *sdkGateway, stream bool) {
	lookup := openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "lookup",
		Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"identity": map[string]any{"type": "string"}}}})
	p := openai.ChatCompletionNewParams{Model: g.f.model, Tools: []openai.ChatCompletionToolUnionParam{lookup},
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Who are you? Look it up.")}}
	g.useTool(true)
	resp := openaiChat(t, g, stream, p)
	ch := resp.Choices[0]
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Name != "lookup" || ch.Message.ToolCalls[0].ID == "" {
		t.Fatalf("answer %+v", ch)
	}
	var args struct{ Identity string }
	if err := json.Unmarshal([]byte(ch.Message.ToolCalls[0].Function.Arguments), &args); err != nil || args.Identity != "primary" {
		t.Fatalf("arguments %q: %v", ch.Message.ToolCalls[0].Function.Arguments, err)
	}
	if resp.Usage.CompletionTokens != 4 {
		t.Fatalf("usage %+v", resp.Usage)
	}

	// The round trip: the call and the tool's result go back; the provider
	// gets them in its own shape and answers in text.
	g.useTool(false)
	p.Messages = append(p.Messages, ch.Message.ToParam(), openai.ToolMessage(`{"identity":"sunny-7"}`, ch.Message.ToolCalls[0].ID))
	resp = openaiChat(t, g, stream, p)
	if resp.Choices[0].Message.Content != wantText || resp.Choices[0].FinishReason != "stop" {
		t.Fatalf("after the tool: %+v", resp.Choices[0])
	}
	g.wantSent(t, stream, g.f.toolResult, "sunny-7")
}

// anthropicMessage asks through the Anthropic client, accumulating a
// stream into the message a non-stream request gets.
func anthropicMessage(t *testing.T, g *sdkGateway, stream bool, p anthropic.MessageNewParams) anthropic.Message {
	t.Helper()
	ctx := context.Background()
	if !stream {
		msg, err := g.ac.Messages.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return *msg
	}
	st := g.ac.Messages.NewStreaming(ctx, p)
	var msg anthropic.Message
	for st.Next() {
		if err := msg.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	return msg
}

func anthropicText(t *testing.T, g *sdkGateway, stream bool) {
	msg := anthropicMessage(t, g, stream, anthropic.MessageNewParams{Model: anthropic.Model(g.f.model), MaxTokens: 50,
		StopSequences: []string{"END"}, System: []anthropic.TextBlockParam{{Text: "You are terse."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(
			anthropic.NewTextBlock("What is in this picture?"), anthropic.NewImageBlockBase64("image/png", pngBase64))}})
	if len(msg.Content) != 1 || msg.Content[0].Text != wantText || msg.StopReason != anthropic.StopReasonEndTurn {
		t.Fatalf("message %+v", msg)
	}
	if msg.Usage.InputTokens <= 0 || msg.Usage.OutputTokens != 3 {
		t.Fatalf("usage %+v", msg.Usage)
	}
	g.wantSent(t, stream, g.f.image, g.f.stop, g.f.limit, "You are terse.")
	g.wantRowUsage(t, msg.Usage.InputTokens, msg.Usage.OutputTokens)

	msg = anthropicMessage(t, g, stream, anthropic.MessageNewParams{Model: anthropic.Model(g.f.model), MaxTokens: 2,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	if len(msg.Content) != 1 || msg.Content[0].Text != "Hello from primary chunk 1 2" || msg.StopReason != anthropic.StopReasonMaxTokens || msg.Usage.OutputTokens != 2 {
		t.Fatalf("max_tokens 2: %+v", msg)
	}
}

func anthropicTools(t *testing.T, g *sdkGateway, stream bool) {
	p := anthropic.MessageNewParams{Model: anthropic.Model(g.f.model), MaxTokens: 50,
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "lookup",
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"identity": map[string]any{"type": "string"}}}}}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Who are you? Look it up."))}}
	g.useTool(true)
	msg := anthropicMessage(t, g, stream, p)
	if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 2 {
		t.Fatalf("message %+v", msg)
	}
	use := msg.Content[1].AsToolUse()
	var input struct{ Identity string }
	if use.Name != "lookup" || use.ID == "" || json.Unmarshal(use.Input, &input) != nil || input.Identity != "primary" {
		t.Fatalf("tool use %+v (input %s)", use, use.Input)
	}

	g.useTool(false)
	p.Messages = append(p.Messages, msg.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, `{"identity":"sunny-7"}`, false)))
	msg = anthropicMessage(t, g, stream, p)
	if len(msg.Content) != 1 || msg.Content[0].Text != wantText || msg.StopReason != anthropic.StopReasonEndTurn {
		t.Fatalf("after the tool: %+v", msg)
	}
	g.wantSent(t, stream, g.f.toolResult, "sunny-7")
}
