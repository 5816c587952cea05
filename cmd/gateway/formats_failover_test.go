package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// TestFailoverAcrossFormats: within one request, a failing primary of one
// format gives way to a backup of the other, invisibly to the client's
// stream: an openai primary answering 500 or missing its first byte, an
// anthropic backup answering an OpenAI client; and the reverse for an
// Anthropic client. The candidate rows say failed, then success.
func TestFailoverAcrossFormats(t *testing.T) {
	broken, brokenURL := mockServer(t, mockupstream.Behavior{Identity: "broken", Chunks: 2, Status: http.StatusInternalServerError})
	slow, slowURL := mockServer(t, mockupstream.Behavior{Identity: "slow", Chunks: 2, FirstByteDelay: 5 * time.Second})
	_, claudeURL := mockServer(t, mockupstream.Behavior{Identity: "claude", Chunks: 3})
	overloaded, overloadedURL := mockServer(t, mockupstream.Behavior{Identity: "overloaded", Chunks: 2, Status: 529})
	_, gptURL := mockServer(t, mockupstream.Behavior{Identity: "gpt", Chunks: 3, Usage: true})
	g := startFormats(t, `
providers:
  # retry: { attempts: 0 }: these cases test the failover itself, not the retry before it
  - { name: broken, base_url: "`+brokenURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4, retry: { attempts: 0 } }
  - { name: slow, base_url: "`+slowURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4, timeouts: { first_byte: 300ms } }
  - { name: claude, format: anthropic, base_url: "`+claudeURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4, retry: { attempts: 0 } }
  - { name: overloaded, format: anthropic, base_url: "`+overloadedURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4, retry: { attempts: 0 } }
  - { name: gpt, base_url: "`+gptURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4, retry: { attempts: 0 } }
models:
  - name: after-500
    candidates: [{ provider: broken }, { provider: claude, priority: 1 }]
  - name: after-timeout
    candidates: [{ provider: slow }, { provider: claude, priority: 1 }]
  - name: after-529
    candidates: [{ provider: overloaded }, { provider: gpt, priority: 1 }]
`)
	ctx := context.Background()
	var ids requestIDs
	oc := openAIClientFor(g, &ids)
	for _, tt := range []struct{ model, want string }{
		{"after-500", "broken:failed claude:success"},
		{"after-timeout", "slow:failed claude:success"},
	} {
		t.Run("openai client "+tt.model, func(t *testing.T) {
			stream := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: tt.model,
				Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
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
			tl := g.timeline(t, ids.last())
			if got := tl.candidateStatuses(); got != tt.want {
				t.Fatalf("candidates %s, want %s", got, tt.want)
			}
			tl.checkUsage(t)
		})
	}
	if broken.Stats().Requests == 0 || slow.Stats().Requests == 0 {
		t.Fatal("the primaries were never tried")
	}

	t.Run("anthropic client after-529", func(t *testing.T) {
		ac := anthropicClientFor(g, &ids)
		s := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "after-529", MaxTokens: 50,
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
		if !strings.Contains(msg.Content[0].Text, "Hello from gpt") || msg.StopReason != "end_turn" {
			t.Fatalf("message %+v", msg)
		}
		tl := g.timeline(t, ids.last())
		if got := tl.candidateStatuses(); got != "overloaded:failed gpt:success" || *tl.Candidates[0].StatusCode != 529 {
			t.Fatalf("candidates %s (first status %v)", got, tl.Candidates[0].StatusCode)
		}
		if overloaded.Stats().Requests == 0 {
			t.Fatal("the anthropic primary was never tried")
		}
	})
	g.gatesIdle(t)
}

// TestEmbeddingsAndResponses: both pass through to openai providers with
// failover (a primary answering 500), streamed and not for responses, and
// are recorded with their route and usage; a model whose providers are all
// anthropic cannot serve embeddings and says so with 404, and serves
// responses through the chat form.
func TestEmbeddingsAndResponses(t *testing.T) {
	_, brokenURL := mockServer(t, mockupstream.Behavior{Identity: "broken", Status: http.StatusInternalServerError})
	backup, backupURL := mockServer(t, mockupstream.Behavior{Identity: "backup", Chunks: 3})
	_, claudeURL := mockServer(t, mockupstream.Behavior{Identity: "claude"})
	g := startFormats(t, `
providers:
  # retry: { attempts: 0 }: these cases test the failover itself, not the retry before it
  - { name: broken, base_url: "`+brokenURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4, retry: { attempts: 0 } }
  - { name: backup, base_url: "`+backupURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4, retry: { attempts: 0 } }
  - { name: claude, format: anthropic, base_url: "`+claudeURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4, retry: { attempts: 0 } }
models:
  - name: m
    candidates: [{ provider: claude }, { provider: broken, priority: 1 }, { provider: backup, priority: 2, model: up-m }]
  # responses: the anthropic candidate would serve it (translated), so the
  # pass-through's failover is tested without it
  - name: m-oa
    candidates: [{ provider: broken }, { provider: backup, priority: 1, model: up-m }]
  - name: claude-only
    candidates: [{ provider: claude }]
`)
	tests := []struct {
		name, path, body, route string
		stream                  bool
	}{
		{"embeddings", "/v1/embeddings", `{"model":"m","input":["hello","world"]}`, "embeddings", false},
		{"responses", "/v1/responses", `{"model":"m-oa","input":"hello"}`, "responses", false},
		{"responses stream", "/v1/responses", `{"model":"m-oa","input":"hello","stream":true}`, "responses", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := rawPost(t, g, tt.path, tt.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			if tt.stream != strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
			}
			if tt.stream && !strings.Contains(string(body), "response.completed") {
				t.Fatalf("stream without its end: %s", body)
			}
			last, _ := backup.LastRequestAt(tt.path)
			if !strings.Contains(string(last.Body), `"model":"up-m"`) || last.Header.Get("Authorization") != "Bearer "+fmtProviderKey {
				t.Fatalf("the backup got %s with %q", last.Body, last.Header.Get("Authorization"))
			}
			noClientCredentials(t, last.Header)
			tl := g.timeline(t, resp.Header.Get("X-Request-Id"))
			// The anthropic candidate cannot serve the route: it is not planned.
			if got := tl.candidateStatuses(); got != "broken:failed backup:success" {
				t.Fatalf("candidates %s", got)
			}
			if tl.Request.Route != tt.route {
				t.Fatalf("requests.route %q, want %s", tl.Request.Route, tt.route)
			}
			if route := g.accessRoute(t, resp.Header.Get("X-Request-Id")); route != tt.route {
				t.Fatalf("access log route %q, want %s", route, tt.route)
			}
			if r := tl.Request; r.PromptTokens == nil || *r.PromptTokens <= 0 || r.TotalTokens == nil || *r.TotalTokens < *r.PromptTokens {
				t.Fatalf("usage not recorded: %+v", r)
			}
		})
	}
	resp, body := rawPost(t, g, "/v1/embeddings", `{"model":"claude-only","input":"x"}`)
	if resp.StatusCode != http.StatusNotFound || jsonField(t, body, "error.code") != "model_not_found" ||
		!strings.Contains(jsonField(t, body, "error.message").(string), "/v1/embeddings") {
		t.Fatalf("/v1/embeddings on an anthropic-only model: %d %s", resp.StatusCode, body)
	}
	resp, body = rawPost(t, g, "/v1/responses", `{"model":"claude-only","input":"x"}`)
	if resp.StatusCode != http.StatusOK || jsonField(t, body, "object") != "response" ||
		!strings.Contains(string(body), "Hello from claude") {
		t.Fatalf("/v1/responses on an anthropic-only model: %d %s", resp.StatusCode, body)
	}
	if m := scrapeSums(t, g.addr); m["gateway_requests_total"] < 5 {
		t.Fatalf("requests counted: %v", m["gateway_requests_total"])
	}
	g.gatesIdle(t)
}

// TestAuthStyles: each auth style reaches its provider as configured, and
// neither the client's Authorization nor its x-api-key ever does.
func TestAuthStyles(t *testing.T) {
	type prov struct {
		name, auth string
		mock       *mockupstream.Server
		url        string
	}
	provs := []*prov{{name: "bearer", auth: "bearer"}, {name: "xkey", auth: "x-api-key"},
		{name: "azure", auth: "{ header: api-key }"}, {name: "local", auth: "none"}}
	routes := "providers:\n"
	for _, p := range provs {
		p.mock, p.url = mockServer(t, mockupstream.Behavior{Identity: p.name, Chunks: 1})
		keys := `, api_keys: ["` + fmtProviderKey + `"]`
		if p.auth == "none" {
			keys = ""
		}
		routes += "  - { name: " + p.name + ", base_url: \"" + p.url + "/v1\", auth: " + p.auth + keys + ", max_concurrency: 2 }\n"
	}
	routes += "models:\n"
	for _, p := range provs {
		routes += "  - { name: " + p.name + ", candidates: [{ provider: " + p.name + " }] }\n"
	}
	g := startFormats(t, routes)
	want := map[string]map[string]string{ // header -> value the provider must see ("" absent)
		"bearer": {"Authorization": "Bearer " + fmtProviderKey, "X-Api-Key": "", "Api-Key": ""},
		"xkey":   {"Authorization": "", "X-Api-Key": fmtProviderKey, "Api-Key": ""},
		"azure":  {"Authorization": "", "X-Api-Key": "", "Api-Key": fmtProviderKey},
		"local":  {"Authorization": "", "X-Api-Key": "", "Api-Key": ""},
	}
	for _, p := range provs {
		for _, clientHeader := range []string{"Authorization", "X-Api-Key"} {
			value := "Bearer " + fmtClientToken
			if clientHeader == "X-Api-Key" {
				value = fmtClientToken
			}
			resp, body := rawPost(t, g, "/v1/chat/completions", `{"model":"`+p.name+`","messages":[{"role":"user","content":"hi"}]}`,
				"Authorization", "", clientHeader, value, "Api-Key", "client-SENTINEL-token-too")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s with the client key in %s: %d %s", p.name, clientHeader, resp.StatusCode, body)
			}
			last := p.mock.LastRequest()
			for h, v := range want[p.name] {
				if got := last.Header.Get(h); got != v {
					t.Errorf("%s (client key in %s): provider saw %s %q, want %q", p.name, clientHeader, h, got, v)
				}
			}
			noClientCredentials(t, last.Header)
		}
	}
	// Without a key in either header the client is refused.
	resp, _ := rawPost(t, g, "/v1/chat/completions", `{"model":"bearer","messages":[]}`, "Authorization", "")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no client key: %d", resp.StatusCode)
	}
	g.gatesIdle(t)
}

// TestStreamErrorsAcrossFormats: a provider's error event before the
// commit point fails over (an Anthropic overloaded_error after its first
// content, held by stream_commit); after the commit point it ends the
// client's stream with the error frame of the client's format and the
// request is failed, 502, stream_interrupted.
func TestStreamErrorsAcrossFormats(t *testing.T) {
	_, heldURL := mockServer(t, mockupstream.Behavior{Identity: "held", Chunks: 5, ErrorAfterChunks: 1})
	_, claudeURL := mockServer(t, mockupstream.Behavior{Identity: "claude", Chunks: 3})
	_, cutClaudeURL := mockServer(t, mockupstream.Behavior{Identity: "cutclaude", Chunks: 5, ErrorAfterChunks: 2})
	_, cutGPTURL := mockServer(t, mockupstream.Behavior{Identity: "cutgpt", Chunks: 5, ErrorAfterChunks: 2})
	g := startFormats(t, `
providers:
  # retry: { attempts: 0 }: these cases test the failover itself, not the retry before it
  - { name: held, format: anthropic, base_url: "`+heldURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4, stream_commit: { events: 3 } }
  - { name: claude, format: anthropic, base_url: "`+claudeURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4, retry: { attempts: 0 } }
  - { name: cutclaude, format: anthropic, base_url: "`+cutClaudeURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4, retry: { attempts: 0 } }
  - { name: cutgpt, base_url: "`+cutGPTURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4, retry: { attempts: 0 } }
models:
  - name: before-commit
    candidates: [{ provider: held }, { provider: claude, priority: 1 }]
  - name: cut-claude
    candidates: [{ provider: cutclaude }]
  - name: cut-gpt
    candidates: [{ provider: cutgpt }]
`)
	// Passed through, the provider's own error event reaches the client
	// (already in its format) and the stream is on record as failed.
	for _, tt := range []struct{ path, body, frame string }{
		{"/v1/chat/completions", `{"model":"cut-gpt","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "data: {\"error\":{\"message\":\"mock stream error\""},
		{"/v1/messages", `{"model":"cut-claude","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\""},
		{"/v1/responses", `{"model":"cut-gpt","input":"hi","stream":true}`, "event: error\ndata: {\"type\":\"error\",\"sequence_number\""},
	} {
		req, _ := http.NewRequest(http.MethodPost, g.base+tt.path, strings.NewReader(tt.body))
		req.Header.Set("Authorization", "Bearer "+fmtClientToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body) // the gateway aborts the connection after the event
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), tt.frame) ||
			strings.Count(string(b), "stream_interrupted") != 0 {
			t.Fatalf("%s passed through, cut: %d %q", tt.path, resp.StatusCode, b)
		}
		tl := g.timeline(t, resp.Header.Get("X-Request-Id"))
		if tl.Request.Status != "failed" || *tl.Request.StatusCode != 502 || *tl.Candidates[0].ErrorType != "stream_interrupted" {
			t.Fatalf("%s passed through, cut, records %+v", tt.path, tl)
		}
	}
	chat := func(model string) string {
		return `{"model":"` + model + `","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	}
	resp, body := rawPost(t, g, "/v1/chat/completions", chat("before-commit"))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Hello from claude") ||
		strings.Contains(string(body), "held") || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Fatalf("before the commit point: %d %s", resp.StatusCode, body)
	}
	tl := g.timeline(t, resp.Header.Get("X-Request-Id"))
	if got := tl.candidateStatuses(); got != "held:failed claude:success" || *tl.Candidates[0].ErrorType != "upstream_stream_error" {
		t.Fatalf("candidates %s, first error type %v", got, tl.Candidates[0].ErrorType)
	}

	for _, tt := range []struct{ path, body, frame string }{
		{"/v1/chat/completions", chat("cut-claude"), `data: {"error":{"message":"the upstream stream was interrupted","type":"upstream_error","code":"stream_interrupted"}}`},
		{"/v1/messages", `{"model":"cut-gpt","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\""},
	} {
		req, _ := http.NewRequest(http.MethodPost, g.base+tt.path, strings.NewReader(tt.body))
		req.Header.Set("Authorization", "Bearer "+fmtClientToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body) // the gateway aborts the connection after the frame
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Hello from cut") ||
			!strings.Contains(string(b), tt.frame) || strings.Contains(string(b), "[DONE]") || strings.Contains(string(b), "message_stop") {
			t.Fatalf("%s after the commit point: %d %q", tt.path, resp.StatusCode, b)
		}
		tl := g.timeline(t, resp.Header.Get("X-Request-Id"))
		if tl.Request.Status != "failed" || *tl.Request.StatusCode != 502 || *tl.Candidates[0].ErrorType != "stream_interrupted" {
			t.Fatalf("%s records %+v", tt.path, tl)
		}
	}
	g.gatesIdle(t)
}

// TestTranslationRefusedAfterFailover: when the candidate that cannot
// express the request comes after a failure, it is recorded failed, 400,
// translation_refused, and the client gets the 400 naming the field.
func TestTranslationRefusedAfterFailover(t *testing.T) {
	_, brokenURL := mockServer(t, mockupstream.Behavior{Identity: "broken", Status: http.StatusInternalServerError})
	claude, claudeURL := mockServer(t, mockupstream.Behavior{Identity: "claude"})
	g := startFormats(t, `
providers:
  # retry: { attempts: 0 }: these cases test the failover itself, not the retry before it
  - { name: broken, base_url: "`+brokenURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4, retry: { attempts: 0 } }
  - { name: claude, format: anthropic, base_url: "`+claudeURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4, retry: { attempts: 0 } }
models:
  - name: m
    candidates: [{ provider: broken }, { provider: claude, priority: 1 }]
`)
	resp, body := rawPost(t, g, "/v1/chat/completions", `{"model":"m","n":3,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusBadRequest || jsonField(t, body, "error.param") != "n" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	tl := g.timeline(t, resp.Header.Get("X-Request-Id"))
	if got := tl.candidateStatuses(); got != "broken:failed claude:failed" || *tl.Candidates[1].ErrorType != "translation_refused" ||
		*tl.Candidates[1].StatusCode != 400 || *tl.Request.StatusCode != 400 {
		t.Fatalf("records %+v", tl)
	}
	if claude.Stats().Requests != 0 {
		t.Fatal("the anthropic provider was called with a request it cannot take")
	}
	g.gatesIdle(t)
}
