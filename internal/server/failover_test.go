package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmgw/gateway/internal/mockupstream"
)

func openaiClient(g *gateway) openai.Client {
	return openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey("client-SENTINEL-token"),
		option.WithMaxRetries(0), option.WithHTTPClient(g.client))
}

// TestOpenAIClient: the official client works through the gateway, streamed
// and not, and the gateway forwards the body with only the model rewritten.
func TestOpenAIClient(t *testing.T) {
	g := start(t, setup{})
	c := openaiClient(g)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}

	resp, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.Choices[0].Message.Content, "primary") {
		t.Fatalf("content = %q, want the primary's answer", resp.Choices[0].Message.Content)
	}
	last := g.Primary.LastRequest()
	if auth := last.Header.Get("Authorization"); auth != "Bearer "+primaryKey {
		t.Fatalf("provider saw Authorization %q, want the provider key", auth)
	}
	var sent map[string]any
	_ = json.Unmarshal(last.Body, &sent)
	if sent["model"] != "up-primary-mini" {
		t.Fatalf("upstream model = %v, want up-primary-mini", sent["model"])
	}

	stream := c.Chat.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "Hello from primary") {
		t.Fatalf("streamed text = %q", text.String())
	}
	if g.Backup.Stats().Requests != 0 {
		t.Fatal("backup called although primary answered")
	}
}

// TestBodyAndEventsByteForByte: unknown fields travel untouched and events
// reach the client exactly as the provider sent them.
func TestBodyAndEventsByteForByte(t *testing.T) {
	g := start(t, setup{primary: mockupstream.Behavior{Usage: true}})
	body := `{"model":"gpt-4o-mini", "messages":[{"role":"user","content":"h\u00e9"}],"stream":true,"stream_options":{"include_usage":true},"x_unknown":{"keep":[1,2.50]}}`
	resp, got := g.post(t, body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	want := strings.Replace(body, `"gpt-4o-mini"`, `"up-primary-mini"`, 1)
	if string(g.Primary.LastRequest().Body) != want {
		t.Fatalf("provider got\n%s\nwant\n%s", g.Primary.LastRequest().Body, want)
	}
	// Ask the mock directly for the same stream and compare bytes, ignoring
	// the per-response id and timestamps the mock varies.
	data := sseData(got)
	if len(data) < 4 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("stream did not end with [DONE]: %q", data)
	}
	usage := data[len(data)-2]
	if !strings.Contains(usage, `"choices":[]`) || !strings.Contains(usage, `"usage"`) {
		t.Fatalf("usage chunk with empty choices not relayed: %s", usage)
	}
	if resp.Header.Get("X-Request-Id") == "" || resp.Header.Get("X-Mock-Identity") != "primary" {
		t.Fatalf("headers: %v", resp.Header)
	}
}

// TestStreamIsIncremental: the client sees the first chunk while the
// provider is still generating.
func TestStreamIsIncremental(t *testing.T) {
	g := start(t, setup{primary: mockupstream.Behavior{Chunks: 5, ChunkInterval: 150 * time.Millisecond}})
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(chatBody(true)))
	begin := time.Now()
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var first, last time.Duration
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			if first == 0 {
				first = time.Since(begin)
			}
			last = time.Since(begin)
		}
	}
	if first == 0 || last-first < 500*time.Millisecond {
		t.Fatalf("first chunk at %v, last at %v: want the first well before the last", first, last)
	}
}

// TestFailover: a primary that errors or is unreachable is invisible to the client.
func TestFailover(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead.Addr().String()
	dead.Close() // connections to it are refused now
	for _, tt := range []struct {
		name   string
		status int
		dead   bool
	}{{"500", 500, false}, {"503", 503, false}, {"429", 429, false}, {"404", 404, false}, {"refused", 0, true}} {
		t.Run(tt.name, func(t *testing.T) {
			s := setup{primary: mockupstream.Behavior{Status: tt.status}}
			if tt.dead {
				s.routes = strings.Replace(defaultRoutes, "base_url: %[1]s/v1", "base_url: "+deadURL+"/v1%.0[1]s", 1)
			}
			g := start(t, s)
			for _, stream := range []bool{false, true} {
				resp, body := g.post(t, chatBody(stream))
				if resp.StatusCode != 200 {
					t.Fatalf("stream=%v status %d body %s", stream, resp.StatusCode, body)
				}
				if !strings.Contains(string(body), "backup") {
					t.Fatalf("stream=%v body does not come from backup: %s", stream, body)
				}
			}
			if g.Backup.Stats().Requests != 2 {
				t.Fatalf("backup requests = %d, want 2", g.Backup.Stats().Requests)
			}
		})
	}
}

// TestClientFaultRelayed: a 400 or 422 from the provider is the client's
// problem, relayed as is, and no other candidate is tried. (A 413 refuses
// the request's size, which another provider may accept: it fails over,
// TestContextLengthFailsOver.)
func TestClientFaultRelayed(t *testing.T) {
	for _, code := range []int{400, 422} {
		g := start(t, setup{primary: mockupstream.Behavior{Status: code}})
		resp, body := g.post(t, chatBody(false))
		if resp.StatusCode != code {
			t.Fatalf("status = %d, want %d", resp.StatusCode, code)
		}
		if !strings.Contains(string(body), "mock error") {
			t.Fatalf("upstream body not relayed: %s", body)
		}
		if g.Backup.Stats().Requests != 0 {
			t.Fatal("backup was called after a client-fault answer")
		}
		if resp.Header.Get("X-Request-Id") == "" {
			t.Fatal("no X-Request-Id")
		}
	}
}

// TestErrorContract covers the OpenAI-shaped errors of DESIGN section 4.
func TestErrorContract(t *testing.T) {
	g := start(t, setup{
		primary: mockupstream.Behavior{Status: 500},
		backup:  mockupstream.Behavior{Status: 503},
		env:     map[string]string{"GATEWAY_MAX_REQUEST_BYTES": "1KiB"},
	})
	big := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("x", 2048) + `"}]}`
	tests := []struct {
		name, body string
		hdr        []string
		status     int
		typ, code  string
	}{
		{"exhausted", chatBody(false), nil, 502, "upstream_error", "candidates_exhausted"},
		{"exhausted stream", chatBody(true), nil, 502, "upstream_error", "candidates_exhausted"},
		{"unknown model", `{"model":"nope","messages":[]}`, nil, 404, "invalid_request_error", "model_not_found"},
		{"malformed", `{"model":`, nil, 400, "invalid_request_error", "invalid_request"},
		{"trailing garbage", `{"model":"gpt-4o-mini","messages":[]}]`, nil, 400, "invalid_request_error", "invalid_request"},
		{"missing messages", `{"model":"gpt-4o-mini"}`, nil, 400, "invalid_request_error", "invalid_request"},
		{"too large", big, nil, 413, "invalid_request_error", "request_too_large"},
		{"bad priority", chatBody(false), []string{"X-Gateway-Priority", "urgent"}, 400, "invalid_request_error", "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := g.post(t, tt.body, tt.hdr...)
			e := decodeError(t, body)
			if resp.StatusCode != tt.status || e.Error.Type != tt.typ || e.Error.Code != tt.code {
				t.Fatalf("got %d %s/%s, want %d %s/%s: %s", resp.StatusCode, e.Error.Type, e.Error.Code, tt.status, tt.typ, tt.code, body)
			}
			id := resp.Header.Get("X-Request-Id")
			if u, err := uuid.Parse(id); err != nil || u.Version() != 7 || e.Error.RequestID != id {
				t.Fatalf("X-Request-Id %q (body %q) is not the same UUIDv7", id, e.Error.RequestID)
			}
			if strings.Contains(string(body), "SENTINEL") {
				t.Fatalf("a secret leaked into the error body: %s", body)
			}
		})
	}
	if n := g.Primary.Stats().Requests; n != 2 {
		t.Fatalf("primary requests = %d, want 2 (bad input must not reach providers)", n)
	}
}

// TestRequestIDNeverEchoed: the client's id is kept aside, never echoed.
func TestRequestIDNeverEchoed(t *testing.T) {
	g := start(t, setup{})
	resp, _ := g.post(t, chatBody(false), "X-Request-Id", "client-id-123")
	if got := resp.Header.Get("X-Request-Id"); got == "client-id-123" || got == "" {
		t.Fatalf("X-Request-Id = %q", got)
	}
	if g.Primary.LastRequest().Header.Get("X-Request-Id") != "" {
		t.Fatal("client X-Request-Id forwarded upstream")
	}
	req, _ := http.NewRequest(http.MethodGet, g.URL+"/v1/nope", nil)
	nf, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	nf.Body.Close()
	if nf.StatusCode != 404 || nf.Header.Get("X-Request-Id") == "" || nf.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("unknown route: %d, headers %v", nf.StatusCode, nf.Header)
	}
	code, body := g.get(t, "/v1/models", false)
	if code != 200 || !strings.Contains(string(body), `"id":"gpt-4o-mini"`) || !strings.Contains(string(body), `"object":"list"`) {
		t.Fatalf("/v1/models = %d %s", code, body)
	}
}

// TestClientDisconnectCancelsUpstream: a client that leaves mid-stream ends
// the upstream request, and no other candidate is tried.
func TestClientDisconnectCancelsUpstream(t *testing.T) {
	g := start(t, setup{primary: mockupstream.Behavior{Chunks: 50, ChunkInterval: 50 * time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(chatBody(true)))
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	wctx, wcancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer wcancel()
	if err := g.Primary.WaitIdle(wctx); err != nil {
		t.Fatal(err)
	}
	if st := g.Primary.Stats(); st.Cancelled != 1 {
		t.Fatalf("primary stats %+v, want one cancelled request", st)
	}
	if g.Backup.Stats().Requests != 0 {
		t.Fatal("backup tried after a client disconnect")
	}
}
