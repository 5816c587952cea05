package server_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// streamUsageRoutes: "counted" streams from primary, which asks for usage
// (stream_usage by default); "plain" from the same mock with stream_usage
// false, the stream a client gets without the gateway's option. The client
// "limited" has a token rate, "open" none.
const streamUsageRoutes = `
providers:
  - name: primary
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
%[3]s
  - name: plain
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
    stream_usage: false
models:
  - { name: counted, candidates: [{ provider: primary, model: up-m }] }
  - { name: plain, candidates: [{ provider: plain, model: up-m }] }
clients:
  - { name: limited, key_sha256: "%[4]s", tokens_per_minute: 10 }
  - { name: open, key_sha256: "%[5]s" }
`

const (
	limitedToken = "sk-client-limited-SENTINEL"
	openToken    = "sk-client-open-SENTINEL"
)

// mockIDs are the parts of the mock's chunks that differ per request.
var mockIDs = regexp.MustCompile(`"id":"chatcmpl-mock-\d+"|"created":\d+`)

func normalized(b []byte) string { return mockIDs.ReplaceAllString(string(b), `"id":"X"`) }

// TestStreamTokensCountedWithoutIncludeUsage protects tokens_per_minute
// from a client that streams without stream_options.include_usage: the
// gateway asks the provider for usage itself, so the stream's tokens are
// counted (the next request over the limit is refused 429), while the
// client's bytes are exactly those of a stream without the option (no
// usage chunk, no "usage":null); a client that asked for usage still gets
// the provider's chunks unchanged.
func TestStreamTokensCountedWithoutIncludeUsage(t *testing.T) {
	routes := strings.ReplaceAll(strings.ReplaceAll(streamUsageRoutes, "%[4]s", sha(limitedToken)), "%[5]s", sha(openToken))
	g := start(t, setup{routes: routes, primary: mockupstream.Behavior{Usage: true, Chunks: 3}})
	stream := func(token, model, extra string) (*http.Response, []byte) {
		t.Helper()
		body := `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"stream":true` + extra + `}`
		return g.post(t, body, "Authorization", "Bearer "+token)
	}

	resp, got := stream(limitedToken, "counted", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("first stream: %d %s", resp.StatusCode, got)
	}
	if up := g.Primary.LastRequest().Body; !strings.Contains(string(up), `"stream":true,"stream_options":{"include_usage":true}}`) {
		t.Errorf("the provider was not asked for usage: %s", up)
	}
	if strings.Contains(string(got), "usage") {
		t.Errorf("a client that did not ask got usage:\n%s", got)
	}
	_, without := stream(openToken, "plain", "")
	if normalized(got) != normalized(without) {
		t.Errorf("client bytes\n%s\ndiffer from the stream without the gateway's option\n%s", got, without)
	}
	if up := g.Primary.LastRequest().Body; strings.Contains(string(up), "stream_options") {
		t.Errorf("stream_usage false still asked for usage: %s", up)
	}

	resp, body := stream(limitedToken, "counted", "")
	if resp.StatusCode != http.StatusTooManyRequests || decodeError(t, body).Error.Code != "rate_limit_exceeded" {
		t.Fatalf("second stream over tokens_per_minute 10: %d %s, want 429 rate_limit_exceeded", resp.StatusCode, body)
	}

	// A client that asked gets the provider's bytes as they came.
	asked := `,"stream_options":{"include_usage":true}`
	_, viaGateway := stream(openToken, "counted", asked)
	direct, err := http.Post(g.PrimaryURL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"up-m","messages":[{"role":"user","content":"hi"}],"stream":true`+asked+`}`))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Body.Close()
	fromMock, _ := io.ReadAll(direct.Body)
	if normalized(viaGateway) != normalized(fromMock) || !strings.Contains(string(viaGateway), `"choices":[],"usage":{`) {
		t.Errorf("a client that asked got\n%s\nthe provider sent\n%s", viaGateway, fromMock)
	}
}

// TestSmuggledModelRefusedOnEveryRoute protects the route check: a body
// whose "Model" twin a Go provider would read in place of the routed
// "model" (or a repeated "stream") is refused 400 on every client route,
// in that route's error shape, and no provider is called.
func TestSmuggledModelRefusedOnEveryRoute(t *testing.T) {
	g := start(t, setup{})
	for _, tc := range []struct{ path, body, param string }{
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","Model":"SMUGGLED","messages":[]}`, "Model"},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[],"stream":false,"\u017ftream":true}`, "ſtream"},
		{"/v1/messages", `{"model":"gpt-4o-mini","max_tokens":8,"messages":[],"stream":false,"stream":true}`, "stream"},
		{"/v1/embeddings", `{"\u004dodel":"SMUGGLED","model":"gpt-4o-mini","input":"x"}`, "Model"},
		{"/v1/responses", `{"model":"gpt-4o-mini","input":"x","MODEL":"SMUGGLED"}`, "MODEL"},
	} {
		resp, err := g.client.Post(g.URL+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), tc.param) {
			t.Errorf("%s %s: %d %s, want 400 naming %q", tc.path, tc.body, resp.StatusCode, b, tc.param)
		}
		if tc.path == "/v1/messages" && !strings.Contains(string(b), `"type":"error"`) {
			t.Errorf("%s: %s is not Anthropic-shaped", tc.path, b)
		}
	}
	if n := g.Primary.Stats().Requests + g.Backup.Stats().Requests; n != 0 {
		t.Errorf("the providers got %d requests, want none", n)
	}
}
