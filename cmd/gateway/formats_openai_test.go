package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// A 1x1 transparent PNG.
const tinyPNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="

func anthropicRoutes(mockURL string) string {
	return `
providers:
  - name: claude
    format: anthropic
    base_url: ` + mockURL + `/v1
    api_keys: ["` + fmtProviderKey + `"]
    max_concurrency: 4
    default_max_tokens: 1000
    forward_headers: [X-Mock-Status, X-Mock-Tool-Use] # the tests shape the mock's answers
models:
  - name: claude-route
    candidates:
      - { provider: claude, model: claude-up }
`
}

// TestOpenAIClientToAnthropicProvider: the official OpenAI client, streamed
// and not, gets chat.completion objects from an anthropic provider: text,
// tool calls with JSON arguments, an image part sent as an image block,
// finish_reason and usage; the provider got x-api-key, anthropic-version,
// system and max_tokens and never the client's key; the request row holds
// the usage and the route.
func TestOpenAIClientToAnthropicProvider(t *testing.T) {
	mock, url := mockServer(t, mockupstream.Behavior{Identity: "claude", Chunks: 3})
	g := startFormats(t, anthropicRoutes(url))
	var ids requestIDs
	c := openAIClientFor(g, &ids)
	ctx := context.Background()
	weather := openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Description: openai.String("the weather in a city"),
		Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
	})
	text := openai.ChatCompletionNewParams{Model: "claude-route", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You are terse."),
		openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("What is in this picture?"),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: tinyPNG}),
		}),
	}}
	tools := openai.ChatCompletionNewParams{Model: "claude-route", Tools: []openai.ChatCompletionToolUnionParam{weather},
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")}}
	toolUse := option.WithHeader(mockupstream.HeaderToolUse, mockupstream.ToolUseFirst)

	// The provider's view of a request: credentials, version, system, max_tokens.
	checkSent := func(t *testing.T, wantImage bool) {
		t.Helper()
		last, ok := mock.LastRequestAt("/v1/messages")
		if !ok {
			t.Fatal("the mock got no messages request")
		}
		if got := last.Header.Get("X-Api-Key"); got != fmtProviderKey {
			t.Errorf("x-api-key %q, want the provider key", got)
		}
		if got := last.Header.Get("Anthropic-Version"); got != "2023-06-01" {
			t.Errorf("anthropic-version %q", got)
		}
		if got := last.Header.Get("Authorization"); got != "" {
			t.Errorf("Authorization %q reached an x-api-key provider", got)
		}
		noClientCredentials(t, last.Header)
		var sent struct {
			Model     string          `json:"model"`
			MaxTokens int             `json:"max_tokens"`
			System    json.RawMessage `json:"system"`
			Messages  json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(last.Body, &sent); err != nil {
			t.Fatal(err)
		}
		if sent.Model != "claude-up" || sent.MaxTokens != 1000 {
			t.Errorf("model %q max_tokens %d, want claude-up and the provider's default_max_tokens 1000", sent.Model, sent.MaxTokens)
		}
		if wantImage {
			if !strings.Contains(string(sent.System), "You are terse.") {
				t.Errorf("system %s", sent.System)
			}
			if !strings.Contains(string(sent.Messages), `"type":"image"`) || !strings.Contains(string(sent.Messages), `"media_type":"image/png"`) {
				t.Errorf("the image part is not an image block: %s", sent.Messages)
			}
		}
	}

	t.Run("text", func(t *testing.T) {
		resp, err := c.Chat.Completions.New(ctx, text)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) != 1 || !strings.Contains(resp.Choices[0].Message.Content, "Hello from claude") ||
			resp.Choices[0].FinishReason != "stop" || resp.Object != "chat.completion" || resp.Model != "claude-route" {
			t.Fatalf("answer %+v", resp)
		}
		if resp.Usage.PromptTokens <= 0 || resp.Usage.CompletionTokens <= 0 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
			t.Fatalf("usage %+v", resp.Usage)
		}
		checkSent(t, true)
		tl := g.timeline(t, ids.last())
		tl.checkUsage(t)
		if tl.Request.Route != "chat" || tl.Request.Status != "success" || *tl.Request.PromptTokens != resp.Usage.PromptTokens {
			t.Fatalf("request row %+v, answer usage %+v", tl.Request, resp.Usage)
		}
	})

	t.Run("text stream", func(t *testing.T) {
		params := text
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := c.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(acc.Choices[0].Message.Content, "Hello from claude") || acc.Choices[0].FinishReason != "stop" {
			t.Fatalf("stream %+v", acc.Choices)
		}
		if acc.Usage.PromptTokens <= 0 || acc.Usage.CompletionTokens <= 0 {
			t.Fatalf("stream usage %+v", acc.Usage)
		}
		checkSent(t, true)
		tl := g.timeline(t, ids.last())
		tl.checkUsage(t)
		if *tl.Request.CompletionTokens != acc.Usage.CompletionTokens {
			t.Fatalf("row usage %+v, stream usage %+v", tl.Request, acc.Usage)
		}
	})

	t.Run("tool call", func(t *testing.T) {
		resp, err := c.Chat.Completions.New(ctx, tools, toolUse)
		if err != nil {
			t.Fatal(err)
		}
		ch := resp.Choices[0]
		if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Name != "get_weather" {
			t.Fatalf("answer %+v", ch)
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(ch.Message.ToolCalls[0].Function.Arguments), &args); err != nil {
			t.Fatalf("arguments %q are not JSON: %v", ch.Message.ToolCalls[0].Function.Arguments, err)
		}
		checkSent(t, false)
	})

	t.Run("tool call stream", func(t *testing.T) {
		stream := c.Chat.Completions.NewStreaming(ctx, tools, toolUse)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		ch := acc.Choices[0]
		if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Name != "get_weather" {
			t.Fatalf("stream %+v", ch)
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(ch.Message.ToolCalls[0].Function.Arguments), &args); err != nil {
			t.Fatalf("streamed arguments %q are not JSON: %v", ch.Message.ToolCalls[0].Function.Arguments, err)
		}
	})
	g.gatesIdle(t)
}

// TestAnthropicErrorsReachOpenAIClients: a provider's 400 reaches an
// OpenAI client OpenAI-shaped with the provider's message; fields the
// Messages API cannot express are refused with 400 naming them before any
// attempt (no provider call, no request row).
func TestAnthropicErrorsReachOpenAIClients(t *testing.T) {
	mock, url := mockServer(t, mockupstream.Behavior{Identity: "claude", Chunks: 2})
	g := startFormats(t, anthropicRoutes(url))

	resp, body := rawPost(t, g, "/v1/chat/completions",
		`{"model":"claude-route","messages":[{"role":"user","content":"hi"}]}`, mockupstream.HeaderStatus, "400")
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	msg, _ := jsonField(t, body, "error.message").(string)
	if msg == "" || jsonField(t, body, "error.type") != "invalid_request_error" || jsonField(t, body, "type") != nil {
		t.Fatalf("not an OpenAI-shaped error carrying the provider's message: %s", body)
	}
	tl := g.timeline(t, resp.Header.Get("X-Request-Id"))
	if tl.Request.Status != "failed" || *tl.Request.StatusCode != 400 || tl.candidateStatuses() != "claude:failed" {
		t.Fatalf("records %+v", tl)
	}

	calls := mock.Stats().Requests
	for _, tt := range []struct{ body, param string }{
		{`{"model":"claude-route","n":2,"messages":[{"role":"user","content":"hi"}]}`, "n"},
		{`{"model":"claude-route","logprobs":true,"messages":[{"role":"user","content":"hi"}]}`, "logprobs"},
	} {
		resp, body := rawPost(t, g, "/v1/chat/completions", tt.body)
		if resp.StatusCode != http.StatusBadRequest || jsonField(t, body, "error.param") != tt.param {
			t.Fatalf("%s: %d %s, want 400 naming %s", tt.param, resp.StatusCode, body, tt.param)
		}
		req, _ := http.NewRequest(http.MethodGet, g.base+"/admin/requests/"+resp.Header.Get("X-Request-Id"), nil)
		req.Header.Set("Authorization", "Bearer "+fmtAdminToken)
		if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: a refused request has a row (%v, %v)", tt.param, r, err)
		}
	}
	if got := mock.Stats().Requests; got != calls {
		t.Fatalf("the provider was called %d times for refused requests", got-calls)
	}
	g.gatesIdle(t)
}
