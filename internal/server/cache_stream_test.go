package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// cacheSeen records the cache headers of each answer an SDK client got.
type cacheSeen struct {
	mu   sync.Mutex
	hdrs []http.Header
}

func (s *cacheSeen) add(resp *http.Response) {
	if resp != nil {
		s.mu.Lock()
		s.hdrs = append(s.hdrs, resp.Header.Clone())
		s.mu.Unlock()
	}
}

// last is the last answer's headers.
func (s *cacheSeen) last() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hdrs[len(s.hdrs)-1]
}

// expect checks the last answer was cache (hit, miss) and, for a hit, its
// headers: Age, and a stream's as the live stream path sends them.
func (s *cacheSeen) expect(t *testing.T, what, cache string, stream bool) {
	t.Helper()
	h := s.last()
	if got := h.Get("X-Gateway-Cache"); got != cache {
		t.Fatalf("%s: x-gateway-cache %q, want %q", what, got, cache)
	}
	if cache != "hit" {
		return
	}
	if h.Get("Age") == "" {
		t.Errorf("%s: a hit without Age", what)
	}
	ct := h.Get("Content-Type")
	if stream != strings.HasPrefix(ct, "text/event-stream") || (stream && h.Get("Cache-Control") != "no-cache") {
		t.Errorf("%s: Content-Type %q, Cache-Control %q; stream %v", what, ct, h.Get("Cache-Control"), stream)
	}
}

func openAICacheClient(g *gateway, seen *cacheSeen) openai.Client {
	return openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey("client-SENTINEL-token"),
		option.WithMaxRetries(0), option.WithHTTPClient(g.client),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			resp, err := next(r)
			seen.add(resp)
			return resp, err
		}))
}

// streamChat streams p, with the usage chunk when includeUsage, and
// returns what the OpenAI SDK's accumulator made of it and how many usage
// chunks came.
func streamChat(t *testing.T, c openai.Client, p openai.ChatCompletionNewParams, includeUsage bool) (openai.ChatCompletion, int) {
	t.Helper()
	if includeUsage {
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	}
	stream := c.Chat.Completions.NewStreaming(context.Background(), p)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	usageChunks := 0
	for stream.Next() {
		ch := stream.Current()
		if ch.JSON.Usage.Valid() && ch.Usage.TotalTokens > 0 {
			usageChunks++
		}
		acc.AddChunk(ch)
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return acc.ChatCompletion, usageChunks
}

// sameChat checks that a served answer has the stored one's message: its
// text, its tool calls (id, name, arguments as JSON) and finish reason.
func sameChat(t *testing.T, what string, got, want openai.ChatCompletion) {
	t.Helper()
	if len(got.Choices) != 1 || len(want.Choices) != 1 {
		t.Fatalf("%s: %d choices, stored %d", what, len(got.Choices), len(want.Choices))
	}
	g, w := got.Choices[0], want.Choices[0]
	if g.Message.Content != w.Message.Content || g.FinishReason != w.FinishReason || got.ID != want.ID || got.Model != want.Model {
		t.Errorf("%s: %q finish %q id %q model %q; stored %q finish %q id %q model %q", what, g.Message.Content, g.FinishReason,
			got.ID, got.Model, w.Message.Content, w.FinishReason, want.ID, want.Model)
	}
	if len(g.Message.ToolCalls) != len(w.Message.ToolCalls) {
		t.Fatalf("%s: %d tool calls, stored %d", what, len(g.Message.ToolCalls), len(w.Message.ToolCalls))
	}
	for i, tc := range g.Message.ToolCalls {
		wc := w.Message.ToolCalls[i]
		var args map[string]any
		if tc.ID != wc.ID || tc.Function.Name != wc.Function.Name || tc.Function.Arguments != wc.Function.Arguments ||
			json.Unmarshal([]byte(tc.Function.Arguments), &args) != nil || len(args) == 0 {
			t.Errorf("%s: tool call %+v, stored %+v", what, tc, wc)
		}
	}
}

// TestCacheStreamOpenAI: on a cached chat route, a stream answer is stored
// once it completed and serves a non-stream request as JSON, a
// non-stream answer serves stream requests as chat.completion.chunk SSE
// (the usage chunk only when asked for), both read by the official OpenAI
// SDK, tool calls with JSON arguments and usage included; the provider saw
// one request for each; a cut stream is not stored.
func TestCacheStreamOpenAI(t *testing.T) {
	g := start(t, setup{db: true, routes: cachedRoutes, primary: mockupstream.Behavior{Usage: true, Chunks: 3}})
	seen := &cacheSeen{}
	c := openAICacheClient(g, seen)
	ctx := context.Background()
	weather := openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather",
		Parameters: openai.FunctionParameters{"type": "object", "required": []string{"city"},
			"properties": map[string]any{"city": map[string]any{"type": "string"}}}})
	params := func(msg string, tools bool) openai.ChatCompletionNewParams {
		p := openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(msg)}}
		if tools {
			p.Tools = []openai.ChatCompletionToolUnionParam{weather}
			p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
		}
		return p
	}
	calls := uint64(0)
	provider := func(what string, want uint64) {
		t.Helper()
		calls += want
		if got := g.Primary.Stats().Requests + g.Backup.Stats().Requests; got != calls {
			t.Fatalf("%s: providers saw %d requests, want %d", what, got, calls)
		}
	}

	for _, tools := range []bool{true, false} {
		// A stream without the usage chunk is stored with the usage the
		// gateway read (it asked the provider for it), the ledger's.
		p := params("stream first, tools "+map[bool]string{true: "on", false: "off"}[tools], tools)
		var id string
		live, n := streamChat(t, c, p, false)
		seen.expect(t, "stream", "miss", true)
		id = seen.last().Get("X-Request-Id")
		if n != 0 || (tools && len(live.Choices[0].Message.ToolCalls) != 1) || (!tools && live.Choices[0].Message.Content == "") {
			t.Fatalf("live stream: %d usage chunks, %+v", n, live.Choices)
		}
		hit, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		seen.expect(t, "non-stream after stream", "hit", false)
		sameChat(t, "non-stream after stream", *hit, live)
		req, _ := g.ledger(t, id)
		if req.TotalTokens == nil || hit.Usage.TotalTokens != *req.TotalTokens || hit.Usage.PromptTokens == 0 {
			t.Errorf("hit usage %+v, the ledger's total %v", hit.Usage, req.TotalTokens)
		}
		// And the same stored answer to a stream request, with usage.
		again, n := streamChat(t, c, p, true)
		seen.expect(t, "stream after stream", "hit", true)
		sameChat(t, "stream after stream", again, live)
		// The stream hit's row: a stream, served from the cache, no candidates.
		if tl := g.cacheRowOf(t, seen.last().Get("X-Request-Id")); sp(tl.Request.Cache) != "hit" || !tl.Request.Stream || tl.Request.Status != "success" || len(tl.Candidates) != 0 {
			t.Errorf("stream hit row: cache %s, stream %v, status %s, %d candidates", sp(tl.Request.Cache), tl.Request.Stream, tl.Request.Status, len(tl.Candidates))
		}
		if n != 1 || again.Usage.TotalTokens != hit.Usage.TotalTokens {
			t.Errorf("stream hit: %d usage chunks, usage %+v; want 1, %+v", n, again.Usage, hit.Usage)
		}
		provider("stream stored", 1)
	}

	// A non-stream answer to stream requests, with and without usage.
	p := params("non-stream first", true)
	stored, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	seen.expect(t, "non-stream", "miss", false)
	for _, includeUsage := range []bool{true, false} {
		got, n := streamChat(t, c, p, includeUsage)
		seen.expect(t, "stream after non-stream", "hit", true)
		sameChat(t, "stream after non-stream", got, *stored)
		if includeUsage && (n != 1 || got.Usage.TotalTokens != stored.Usage.TotalTokens || got.Usage.PromptTokens != stored.Usage.PromptTokens) || !includeUsage && (n != 0 || got.Usage.TotalTokens != 0) {
			t.Errorf("include_usage %v: %d usage chunks, usage %+v; stored %+v", includeUsage, n, got.Usage, stored.Usage)
		}
	}
	provider("non-stream stored", 1)

	// A stream cut after two chunks is not stored: the repeat misses.
	cut := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"cut"}]}`
	g.Primary.SetBehavior(mockupstream.Behavior{Usage: true, Chunks: 5, ResetAfterChunks: 2})
	resp, body, _ := g.postRaw(t, cut)
	if resp.Header.Get("X-Gateway-Cache") != "miss" || strings.Contains(string(body), "[DONE]") {
		t.Fatalf("cut stream: x-gateway-cache %q, body %s", resp.Header.Get("X-Gateway-Cache"), body)
	}
	g.Primary.SetBehavior(mockupstream.Behavior{Usage: true, Chunks: 5})
	for i, want := range []string{"miss", "hit"} {
		resp, body := g.post(t, cut)
		if got := resp.Header.Get("X-Gateway-Cache"); got != want || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
			t.Errorf("repeat %d of the cut stream: x-gateway-cache %q, want %q: %s", i, got, want, body)
		}
	}
	provider("cut stream", 2)
}

// TestCacheStreamAnthropic: the same on /v1/messages for the official
// Anthropic SDK: a streamed message (text, then a tool_use whose input
// came in pieces) serves a non-stream request, a non-stream message
// serves a stream request (message_start, the blocks, message_delta with
// stop_reason and usage, message_stop), one provider request each; a cut
// stream is not stored.
func TestCacheStreamAnthropic(t *testing.T) {
	g := start(t, setup{routes: cachedRoutes, primaryExtra: "    format: anthropic",
		primary: mockupstream.Behavior{ToolUse: mockupstream.ToolUseFirst, Chunks: 3}})
	seen := &cacheSeen{}
	c := anthropicCacheClient(g, seen)
	ctx := context.Background()
	params := weatherMessage
	stream := func(p anthropic.MessageNewParams) anthropic.Message { t.Helper(); return streamMessage(t, c, p) }
	same := func(what string, got, want anthropic.Message) {
		t.Helper()
		sameMessage(t, what, got, want)
		var in map[string]any
		if len(got.Content) != 2 || !strings.Contains(got.Content[0].Text, "Hello from primary") || got.Content[1].Type != "tool_use" ||
			json.Unmarshal(got.Content[1].Input, &in) != nil || in["identity"] != "primary" || got.StopReason != "tool_use" || got.Usage.OutputTokens == 0 {
			t.Errorf("%s: %+v, want a text block, then a tool_use of input {identity: primary}", what, got)
		}
	}

	live := stream(params("stream first"))
	seen.expect(t, "stream", "miss", true)
	hit, err := c.Messages.New(ctx, params("stream first"))
	if err != nil {
		t.Fatal(err)
	}
	seen.expect(t, "non-stream after stream", "hit", false)
	same("non-stream after stream", *hit, live)

	stored, err := c.Messages.New(ctx, params("non-stream first"))
	if err != nil {
		t.Fatal(err)
	}
	seen.expect(t, "non-stream", "miss", false)
	got := stream(params("non-stream first"))
	seen.expect(t, "stream after non-stream", "hit", true)
	same("stream after non-stream", got, *stored)
	if n := g.Primary.Stats().Requests; n != 2 {
		t.Errorf("the provider saw %d requests, want 2", n)
	}

	// Cut after two text deltas: not stored.
	g.Primary.SetBehavior(mockupstream.Behavior{ToolUse: mockupstream.ToolUseFirst, Chunks: 3, ResetAfterChunks: 2})
	s := c.Messages.NewStreaming(ctx, params("cut"))
	for s.Next() {
	}
	_ = s.Close()
	if s.Err() == nil {
		t.Fatal("the cut stream ended without an error")
	}
	g.Primary.SetBehavior(mockupstream.Behavior{ToolUse: mockupstream.ToolUseFirst, Chunks: 3})
	for _, want := range []string{"miss", "hit"} {
		_ = stream(params("cut"))
		seen.expect(t, "repeat of the cut stream", want, true)
	}
	if n := g.Primary.Stats().Requests; n != 4 {
		t.Errorf("the provider saw %d requests, want 4 (the cut answer was not stored)", n)
	}
}

func anthropicCacheClient(g *gateway, seen *cacheSeen) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(g.URL), aoption.WithAPIKey("client-SENTINEL-token"),
		aoption.WithMaxRetries(0), aoption.WithHTTPClient(g.client),
		aoption.WithMiddleware(func(r *http.Request, next aoption.MiddlewareNext) (*http.Response, error) {
			resp, err := next(r)
			seen.add(resp)
			return resp, err
		}))
}

// weatherMessage asks msg with a get_weather tool (city required).
func weatherMessage(msg string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: "gpt-4o-mini", MaxTokens: 100,
		Tools: []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}}, "get_weather")},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(msg))}}
}

// streamMessage streams p and returns what the Anthropic SDK's
// accumulator made of it.
func streamMessage(t *testing.T, c anthropic.Client, p anthropic.MessageNewParams) anthropic.Message {
	t.Helper()
	s := c.Messages.NewStreaming(context.Background(), p)
	defer s.Close()
	var msg anthropic.Message
	for s.Next() {
		if err := msg.Accumulate(s.Current()); err != nil {
			t.Fatalf("accumulate: %v", err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return msg
}

// sameMessage checks that a served message is the stored one: its id,
// blocks (text, tool_use id, name and JSON input), stop reason and usage.
func sameMessage(t *testing.T, what string, got, want anthropic.Message) {
	t.Helper()
	if got.ID != want.ID || got.StopReason != want.StopReason || len(got.Content) != len(want.Content) || len(got.Content) == 0 ||
		got.Usage.InputTokens != want.Usage.InputTokens || got.Usage.OutputTokens != want.Usage.OutputTokens {
		t.Fatalf("%s: %+v\nstored %+v", what, got, want)
	}
	for i, b := range got.Content {
		w := want.Content[i]
		var in any
		if b.Type != w.Type || b.Text != w.Text || b.ID != w.ID || b.Name != w.Name || string(b.Input) != string(w.Input) ||
			(b.Type == "tool_use" && json.Unmarshal(b.Input, &in) != nil) {
			t.Errorf("%s: block %d %+v, stored %+v", what, i, b, w)
		}
	}
}

// TestCacheStreamTranslated: a stream the gateway translated (an OpenAI
// client served by an anthropic provider, an Anthropic client by an openai
// one) is stored in the client's format and serves the other kind of
// request; the provider saw one request for each.
func TestCacheStreamTranslated(t *testing.T) {
	t.Run("openai client, anthropic provider", func(t *testing.T) {
		g := start(t, setup{routes: cachedRoutes, primaryExtra: "    format: anthropic",
			primary: mockupstream.Behavior{ToolUse: mockupstream.ToolUseFirst, Chunks: 3}})
		seen := &cacheSeen{}
		c := openAICacheClient(g, seen)
		p := openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather",
				Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})}}
		live, _ := streamChat(t, c, p, true)
		seen.expect(t, "stream", "miss", true)
		if tcs := live.Choices[0].Message.ToolCalls; len(tcs) != 1 || live.Choices[0].Message.Content == "" || live.Usage.TotalTokens == 0 {
			t.Fatalf("live stream: %+v", live)
		}
		hit, err := c.Chat.Completions.New(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		seen.expect(t, "non-stream", "hit", false)
		sameChat(t, "non-stream after stream", *hit, live)
		if hit.Usage.TotalTokens != live.Usage.TotalTokens {
			t.Errorf("hit usage %+v, live %+v", hit.Usage, live.Usage)
		}
		if n := g.Primary.Stats().Requests; n != 1 {
			t.Errorf("the provider saw %d requests, want 1", n)
		}
	})
	t.Run("anthropic client, openai provider", func(t *testing.T) {
		g := start(t, setup{routes: cachedRoutes, primary: mockupstream.Behavior{Usage: true, Chunks: 3}})
		seen := &cacheSeen{}
		c := anthropicCacheClient(g, seen)
		p := weatherMessage("use the get_weather tool")
		live := streamMessage(t, c, p)
		seen.expect(t, "stream", "miss", true)
		if len(live.Content) == 0 || live.Content[len(live.Content)-1].Type != "tool_use" || live.StopReason != "tool_use" {
			t.Fatalf("live stream: %+v", live)
		}
		hit, err := c.Messages.New(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		seen.expect(t, "non-stream", "hit", false)
		sameMessage(t, "non-stream after stream", *hit, live)
		if n := g.Primary.Stats().Requests; n != 1 {
			t.Errorf("the provider saw %d requests, want 1", n)
		}
	})
}

// TestCacheEmbeddings: /v1/embeddings on a cached route is answered from
// the stored answer on a repeat; the provider sees one request.
func TestCacheEmbeddings(t *testing.T) {
	g := start(t, setup{routes: cachedRoutes})
	var want []byte
	for i, cache := range []string{"miss", "hit"} {
		req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/embeddings", strings.NewReader(`{"model":"gpt-4o-mini","input":"hello"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := g.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body json.RawMessage
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("X-Gateway-Cache") != cache {
			t.Fatalf("request %d: status %d, x-gateway-cache %q, %v; want 200, %s", i, resp.StatusCode, resp.Header.Get("X-Gateway-Cache"), err, cache)
		}
		if i == 0 {
			want = body
		} else if string(body) != string(want) || !strings.Contains(string(body), `"embedding"`) {
			t.Errorf("hit %s, want the stored %s", body, want)
		}
	}
	if n := g.Primary.Stats().Requests; n != 1 {
		t.Errorf("the provider saw %d requests, want 1", n)
	}
}

// TestCacheResponsesBypass: /v1/responses on a cached route is never
// served from the cache, stream or not: each request reaches the provider.
func TestCacheResponsesBypass(t *testing.T) {
	g := start(t, setup{routes: cachedRoutes})
	for i, body := range []string{`{"model":"gpt-4o-mini","input":"hi"}`, `{"model":"gpt-4o-mini","input":"hi"}`, `{"model":"gpt-4o-mini","input":"hi","stream":true}`} {
		req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/responses", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := g.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Gateway-Cache") != "bypass" {
			t.Errorf("request %d: status %d, x-gateway-cache %q; want 200, bypass", i, resp.StatusCode, resp.Header.Get("X-Gateway-Cache"))
		}
	}
	if n := g.Primary.Stats().Requests; n != 3 {
		t.Errorf("the provider saw %d requests, want 3", n)
	}
}

// TestCacheStreamCollapse: concurrent identical stream requests reach the
// provider once; the others are served the leader's stream, assembled and
// replayed, ending with [DONE].
func TestCacheStreamCollapse(t *testing.T) {
	g := start(t, setup{routes: cachedRoutes, primary: mockupstream.Behavior{Usage: true, Latency: 300 * time.Millisecond}})
	n := g.concurrentCache(t, 10, chatBody(true), func(b []byte) bool {
		return strings.HasSuffix(string(b), "data: [DONE]\n\n") && strings.Contains(string(b), "Hello from primary")
	})
	if n["miss"] != 1 || n["hit"] != 9 {
		t.Errorf("results %v, want 1 miss and 9 hits", n)
	}
	if got := g.Primary.Stats().Requests + g.Backup.Stats().Requests; got != 1 {
		t.Errorf("providers saw %d requests, want 1", got)
	}
}
