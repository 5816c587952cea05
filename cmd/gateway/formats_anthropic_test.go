package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// anthropicClientFor is the official Anthropic client pointed at the
// gateway, with the client key in x-api-key as the SDK sends it.
func anthropicClientFor(g *fmtGateway, ids *requestIDs) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(g.base), aoption.WithAPIKey(fmtClientToken),
		aoption.WithMaxRetries(0), aoption.WithMiddleware(func(r *http.Request, next aoption.MiddlewareNext) (*http.Response, error) {
			resp, err := next(r)
			if resp != nil {
				ids.mu.Lock()
				ids.ids = append(ids.ids, resp.Header.Get("X-Request-Id"))
				ids.mu.Unlock()
			}
			return resp, err
		}))
}

// toolCallProvider is an OpenAI-compatible provider that always calls
// get_weather, streamed and not: the mock's chat endpoint has no tool
// calls.
func toolCallProvider(t *testing.T) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"chatcmpl-t1","object":"chat.completion","created":1,"model":"gpt-up","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`{"id":"chatcmpl-t1","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}`,
			`{"id":"chatcmpl-t1","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`,
			`{"id":"chatcmpl-t1","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}`,
			`{"id":"chatcmpl-t1","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]}`,
			`{"id":"chatcmpl-t1","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			`{"id":"chatcmpl-t1","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`,
			`[DONE]`,
		} {
			_, _ = io.WriteString(w, "data: "+ev+"\n\n")
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestAnthropicClientToOpenAIProvider: the official Anthropic SDK, on
// /v1/messages, streamed and not, is served by an openai provider: text,
// tool use and stop_reason, usage; the request row has route messages.
func TestAnthropicClientToOpenAIProvider(t *testing.T) {
	mock, url := mockServer(t, mockupstream.Behavior{Identity: "gpt", Chunks: 3, Usage: true})
	tools := toolCallProvider(t)
	g := startFormats(t, `
providers:
  - { name: gpt, base_url: "`+url+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4, forward_headers: [X-Mock-Status] }
  - { name: tools, base_url: "`+tools+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4 }
models:
  - name: claude-sonnet
    candidates: [{ provider: gpt, model: gpt-up }]
  - name: tool-model
    candidates: [{ provider: tools, model: gpt-up }]
`)
	var ids requestIDs
	c := anthropicClientFor(g, &ids)
	ctx := context.Background()
	hello := anthropic.MessageNewParams{Model: "claude-sonnet", MaxTokens: 200,
		System:   []anthropic.TextBlockParam{{Text: "You are terse."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
	weather := anthropic.MessageNewParams{Model: "tool-model", MaxTokens: 200,
		Tools: []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"city": map[string]any{"type": "string"}}}, "get_weather")},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))}}

	t.Run("text", func(t *testing.T) {
		msg, err := c.Messages.New(ctx, hello)
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 1 || !strings.Contains(msg.Content[0].Text, "Hello from gpt") || msg.StopReason != "end_turn" ||
			msg.Usage.InputTokens <= 0 || msg.Usage.OutputTokens <= 0 || string(msg.Model) != "claude-sonnet" {
			t.Fatalf("message %+v", msg)
		}
		last := mock.LastRequest()
		if got := last.Header.Get("Authorization"); got != "Bearer "+fmtProviderKey {
			t.Errorf("provider Authorization %q", got)
		}
		noClientCredentials(t, last.Header)
		if last.Header.Get("X-Api-Key") != "" {
			t.Error("the client's x-api-key reached the provider")
		}
		var sent map[string]any
		_ = json.Unmarshal(last.Body, &sent)
		if sent["model"] != "gpt-up" || sent["max_tokens"] != float64(200) {
			t.Errorf("sent %v", sent)
		}
		tl := g.timeline(t, ids.last())
		tl.checkUsage(t)
		if tl.Request.Route != "messages" {
			t.Fatalf("requests.route %q, want messages", tl.Request.Route)
		}
		if route := g.accessRoute(t, ids.last()); route != "messages" {
			t.Fatalf("access log route %q, want messages", route)
		}
	})

	t.Run("text stream", func(t *testing.T) {
		stream := c.Messages.NewStreaming(ctx, hello)
		var msg anthropic.Message
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 1 || !strings.Contains(msg.Content[0].Text, "Hello from gpt") || msg.StopReason != "end_turn" || msg.Usage.OutputTokens <= 0 {
			t.Fatalf("message %+v", msg)
		}
		g.timeline(t, ids.last()).checkUsage(t)
	})

	for _, stream := range []bool{false, true} {
		t.Run("tool use stream="+map[bool]string{false: "false", true: "true"}[stream], func(t *testing.T) {
			var msg anthropic.Message
			if stream {
				s := c.Messages.NewStreaming(ctx, weather)
				for s.Next() {
					if err := msg.Accumulate(s.Current()); err != nil {
						t.Fatal(err)
					}
				}
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
			} else {
				m, err := c.Messages.New(ctx, weather)
				if err != nil {
					t.Fatal(err)
				}
				msg = *m
			}
			if msg.StopReason != "tool_use" || len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" || msg.Content[0].Name != "get_weather" {
				t.Fatalf("message %+v", msg)
			}
			var input map[string]any
			if err := json.Unmarshal(msg.Content[0].Input, &input); err != nil || input["city"] != "Paris" {
				t.Fatalf("tool input %s: %v", msg.Content[0].Input, err)
			}
		})
	}

	// An OpenAI provider's 400 reaches the Anthropic client Anthropic-shaped.
	resp, body := rawPost(t, g, "/v1/messages", `{"model":"claude-sonnet","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
		mockupstream.HeaderStatus, "400")
	if resp.StatusCode != http.StatusBadRequest || jsonField(t, body, "type") != "error" ||
		jsonField(t, body, "error.type") != "invalid_request_error" || jsonField(t, body, "error.message") == "" {
		t.Fatalf("provider 400 to an Anthropic client: %d %s", resp.StatusCode, body)
	}
	// The gateway's own errors on this route are Anthropic-shaped too.
	resp, body = rawPost(t, g, "/v1/messages", `{"model":"nope","max_tokens":10,"messages":[]}`)
	if resp.StatusCode != http.StatusNotFound || jsonField(t, body, "error.type") != "not_found_error" {
		t.Fatalf("unknown model on /v1/messages: %d %s", resp.StatusCode, body)
	}
	g.gatesIdle(t)
}

// TestAnthropicPassThrough: an Anthropic client of an anthropic provider
// gets the provider's bytes unchanged, streamed and not, and the SDK reads
// them.
func TestAnthropicPassThrough(t *testing.T) {
	_, url := mockServer(t, mockupstream.Behavior{Identity: "claude", Chunks: 3})
	tee := &teeProxy{target: url}
	proxy := httptest.NewServer(tee)
	t.Cleanup(proxy.Close)
	g := startFormats(t, anthropicRoutes(proxy.URL))

	for _, stream := range []string{"false", "true"} {
		resp, body := rawPost(t, g, "/v1/messages",
			`{"model":"claude-route","max_tokens":50,"stream":`+stream+`,"messages":[{"role":"user","content":"hi"}]}`,
			"X-Api-Key", fmtClientToken, "Authorization", "", "Anthropic-Version", "2023-06-01")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream=%s: %d %s", stream, resp.StatusCode, body)
		}
		if sent := tee.last(); !bytes.Equal(body, sent) || len(sent) == 0 {
			t.Fatalf("stream=%s: the client got other bytes than the provider sent\nprovider: %q\nclient:   %q", stream, sent, body)
		}
	}

	var ids requestIDs
	c := anthropicClientFor(g, &ids)
	s := c.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "claude-route", MaxTokens: 50,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var msg anthropic.Message
	for s.Next() {
		if err := msg.Accumulate(s.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg.Content[0].Text, "Hello from claude") || msg.StopReason != "end_turn" {
		t.Fatalf("message %+v", msg)
	}
	tl := g.timeline(t, ids.last())
	tl.checkUsage(t)
	g.gatesIdle(t)
}
