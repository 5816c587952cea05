package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// cutToolProvider is an OpenAI-compatible provider whose stream starts a
// tool call, sends half of its arguments and then ends cleanly: no
// finish_reason, no [DONE].
func cutToolProvider(t *testing.T) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`{"id":"chatcmpl-c1","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}`,
			`{"id":"chatcmpl-c1","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`,
			`{"id":"chatcmpl-c1","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Pa"}}]},"finish_reason":null}]}`,
		} {
			_, _ = io.WriteString(w, "data: "+ev+"\n\n")
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestSDKsSeeCutStreams protects issue 12 with the official SDKs as the
// judge: a provider stream that ends cleanly in mid-answer, after the
// commit point, reaches the Anthropic SDK as a stream error (never
// end_turn, never a tool_use over truncated arguments) and the OpenAI SDK
// likewise, and is recorded failed, stream_interrupted.
func TestSDKsSeeCutStreams(t *testing.T) {
	_, textURL := mockServer(t, mockupstream.Behavior{Identity: "cut", Chunks: 5, EndAfterChunks: 2})
	toolURL := cutToolProvider(t)
	g := startFormats(t, `
providers:
  - { name: text, base_url: "`+textURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4 }
  - { name: tool, base_url: "`+toolURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4 }
  - { name: claude, format: anthropic, base_url: "`+textURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4 }
models:
  - { name: cut-text, candidates: [{ provider: text }] }
  - { name: cut-tool, candidates: [{ provider: tool }] }
  - { name: cut-claude, candidates: [{ provider: claude }] }
`)
	ctx := context.Background()
	var ids requestIDs
	ac := anthropicClientFor(g, &ids)
	for _, model := range []string{"cut-text", "cut-tool"} {
		t.Run("anthropic sdk "+model, func(t *testing.T) {
			s := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 50,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather in Paris?"))},
				Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
					InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}}})
			var msg anthropic.Message
			var stopped bool
			for s.Next() {
				ev := s.Current()
				if ev.Type == "message_stop" {
					stopped = true
				}
				if err := msg.Accumulate(ev); err != nil {
					t.Fatalf("accumulate: %v", err)
				}
			}
			if s.Err() == nil || stopped || msg.StopReason != "" {
				t.Fatalf("the SDK saw a clean end: err %v, message_stop %v, stop_reason %q, content %+v", s.Err(), stopped, msg.StopReason, msg.Content)
			}
			tl := g.timeline(t, ids.last())
			if tl.Request.Status != "failed" || len(tl.Candidates) != 1 || tl.Candidates[0].ErrorType == nil || *tl.Candidates[0].ErrorType != "stream_interrupted" {
				t.Fatalf("records %+v %s", tl.Request, tl.candidateStatuses())
			}
		})
	}
	t.Run("openai sdk cut-claude", func(t *testing.T) {
		oc := openAIClientFor(g, &ids)
		s := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "cut-claude",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if s.Err() == nil || (len(acc.Choices) > 0 && acc.Choices[0].FinishReason != "") {
			t.Fatalf("the SDK saw a clean end: err %v, choices %+v", s.Err(), acc.Choices)
		}
		tl := g.timeline(t, ids.last())
		if tl.Request.Status != "failed" || tl.Candidates[0].ErrorType == nil || *tl.Candidates[0].ErrorType != "stream_interrupted" {
			t.Fatalf("records %+v %s", tl.Request, tl.candidateStatuses())
		}
	})
	g.gatesIdle(t)
}

// TestAnthropicSDKCountTokens protects issue 21 with the official
// Anthropic SDK: Messages.CountTokens on a routed model gets the gateway's
// estimate, on an unknown model a 404 the SDK reads as not_found_error, and
// without the client key a 401 authentication_error, never an OpenAI shape.
func TestAnthropicSDKCountTokens(t *testing.T) {
	_, url := mockServer(t, mockupstream.Behavior{})
	g := startFormats(t, `
providers:
  - { name: p, base_url: "`+url+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4 }
models:
  - { name: m, candidates: [{ provider: p }] }
`)
	ctx := context.Background()
	var ids requestIDs
	ac := anthropicClientFor(g, &ids)
	params := anthropic.MessageCountTokensParams{Model: "m",
		System:   anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("be brief")},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("How many tokens is this message, roughly?"))}}
	n, err := ac.Messages.CountTokens(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	// The messages array alone is over 60 bytes as the SDK encodes it.
	if n.InputTokens < 15 || n.InputTokens > 60 {
		t.Fatalf("input_tokens %d, want the estimate of bytes/4", n.InputTokens)
	}
	for _, tt := range []struct {
		name   string
		model  string
		client anthropic.Client
		status int
		typ    string
	}{
		{"unknown model", "nope", ac, http.StatusNotFound, "not_found_error"},
		{"no client key", "m", anthropic.NewClient(aoption.WithBaseURL(g.base), aoption.WithAPIKey("wrong"), aoption.WithMaxRetries(0)),
			http.StatusUnauthorized, "authentication_error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := params
			p.Model = anthropic.Model(tt.model)
			_, err := tt.client.Messages.CountTokens(ctx, p)
			var ae *anthropic.Error
			if !errors.As(err, &ae) || ae.StatusCode != tt.status || string(ae.Type()) != tt.typ {
				t.Fatalf("err %v, want %d %s", err, tt.status, tt.typ)
			}
		})
	}
}
