package mockupstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// usageObject returns the raw usage object an answer of endpoint path carries, stream
// or not: the chat usage chunk's, response.completed's, and for Anthropic
// message_start's then message_delta's, joined by " | ".
func usageObject(t *testing.T, path string, stream bool, raw []byte) string {
	t.Helper()
	var top struct {
		Usage    json.RawMessage `json:"usage"`
		Response struct {
			Usage json.RawMessage `json:"usage"`
		} `json:"response"`
		Message struct {
			Usage json.RawMessage `json:"usage"`
		} `json:"message"`
	}
	if !stream {
		decodeInto(t, string(raw), &top)
		return string(top.Usage)
	}
	switch path {
	case "/v1/chat/completions":
		events := splitEvents(t, raw)
		if len(events) < 2 {
			t.Fatalf("stream %q", raw)
		}
		decodeInto(t, strings.TrimPrefix(events[len(events)-2], "data: "), &top)
		return string(top.Usage)
	case "/v1/responses":
		for _, e := range splitNamedEvents(t, raw) {
			if e.Name == "response.completed" {
				decodeInto(t, e.Data, &top)
				return string(top.Response.Usage)
			}
		}
	case "/v1/messages":
		var parts []string
		for _, e := range splitNamedEvents(t, raw) {
			switch e.Name {
			case "message_start":
				decodeInto(t, e.Data, &top)
				parts = append(parts, string(top.Message.Usage))
			case "message_delta":
				top.Usage = nil
				decodeInto(t, e.Data, &top)
				parts = append(parts, string(top.Usage))
			}
		}
		return strings.Join(parts, " | ")
	}
	t.Fatalf("no usage in %s stream %q", path, raw)
	return ""
}

// TestUsageTokens: cache reads, cache writes and reasoning, set by request header, by
// Behavior or by the admin route, reach each format's usage where its vendor puts
// them, stream and not: OpenAI counts the cache inside prompt_tokens (input_tokens)
// and reasoning inside completion_tokens (output_tokens); Anthropic counts the cache
// beside input_tokens, in message_start when streaming, and thinking as output.
func TestUsageTokens(t *testing.T) {
	const cached, write, reasoning = 40, 8, 5
	const out = DefaultChunks + reasoning
	bodies := map[string][2]string{ // path: non-stream, stream
		"/v1/chat/completions": {chatBody, streamUsageBody},
		"/v1/responses":        {`{"model":"gpt-test","input":"hi"}`, `{"model":"gpt-test","input":"hi","stream":true}`},
		"/v1/messages":         {messagesBody, messagesStreamBody},
	}
	want := func(path, body string, stream bool) string {
		p := promptTokens([]byte(body))
		switch path {
		case "/v1/chat/completions":
			return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,`+
				`"prompt_tokens_details":{"cached_tokens":%d},"completion_tokens_details":{"reasoning_tokens":%d}}`,
				p+cached+write, out, p+cached+write+out, cached, reasoning)
		case "/v1/responses":
			return fmt.Sprintf(`{"input_tokens":%d,"input_tokens_details":{"cached_tokens":%d},"output_tokens":%d,`+
				`"output_tokens_details":{"reasoning_tokens":%d},"total_tokens":%d}`, p+cached+write, cached, out, reasoning, p+cached+write+out)
		}
		cache := fmt.Sprintf(`"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d`, write, cached)
		if stream {
			return fmt.Sprintf(`{"input_tokens":%d,%s,"output_tokens":1} | {"output_tokens":%d}`, p, cache, out)
		}
		return fmt.Sprintf(`{"input_tokens":%d,%s,"output_tokens":%d}`, p, cache, out)
	}
	headers := []string{HeaderCachedTokens, strconv.Itoa(cached), HeaderCacheWriteTokens, strconv.Itoa(write),
		HeaderReasoningTokens, strconv.Itoa(reasoning)}
	admin := fmt.Sprintf(`{"Usage":true,"CachedTokens":%d,"CacheWriteTokens":%d,"ReasoningTokens":%d}`, cached, write, reasoning)
	for _, source := range []string{"header", "behavior", "admin"} {
		t.Run(source, func(t *testing.T) {
			b := Behavior{Usage: true}
			var hdr []string
			switch source {
			case "header":
				hdr = headers
			case "behavior":
				b.CachedTokens, b.CacheWriteTokens, b.ReasoningTokens = cached, write, reasoning
			}
			_, ts := start(t, b)
			if source == "admin" {
				resp := postTo(t, context.Background(), ts, "/mock/behavior", admin)
				if readAll(t, resp); resp.StatusCode != http.StatusNoContent {
					t.Fatalf("POST /mock/behavior: %d", resp.StatusCode)
				}
			}
			for path, bs := range bodies {
				for i, body := range bs {
					stream := i == 1
					resp := postTo(t, context.Background(), ts, path, body, withAuth(hdr...)...)
					raw := readAll(t, resp)
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("%s stream=%v: %d %s", path, stream, resp.StatusCode, raw)
					}
					if got, w := usageObject(t, path, stream, raw), want(path, body, stream); got != w {
						t.Errorf("%s stream=%v usage\n got %s\nwant %s", path, stream, got, w)
					}
				}
			}
		})
	}
}

// TestUsageTokensDefault: without the counts, usage is the mock's usual one: no
// details objects on chat, no cache fields on Anthropic, zeros in Responses' details.
func TestUsageTokensDefault(t *testing.T) {
	_, ts := start(t, Behavior{})
	raw := readAll(t, post(t, context.Background(), ts, chatBody))
	p := promptTokens([]byte(chatBody))
	if got, w := usageObject(t, "/v1/chat/completions", false, raw),
		fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":3,"total_tokens":%d}`, p, p+3); got != w {
		t.Errorf("chat usage %s, want %s", got, w)
	}
	raw = readAll(t, postTo(t, context.Background(), ts, "/v1/messages", messagesBody, anthropicAuth...))
	p = promptTokens([]byte(messagesBody))
	if got, w := usageObject(t, "/v1/messages", false, raw), fmt.Sprintf(`{"input_tokens":%d,"output_tokens":3}`, p); got != w {
		t.Errorf("messages usage %s, want %s", got, w)
	}
}

// TestUsageTokensInvalid: a count that is not a whole number in [0, 2^20] is refused
// with 400 naming its header, from a request, and with a FieldError naming the field
// from Validate and the admin route.
func TestUsageTokensInvalid(t *testing.T) {
	_, ts := start(t, Behavior{})
	for _, h := range []string{HeaderCachedTokens, HeaderCacheWriteTokens, HeaderReasoningTokens} {
		for _, v := range []string{"-1", "1.5", "x", strconv.Itoa(maxCount + 1)} {
			resp := post(t, context.Background(), ts, chatBody, h, v)
			e := decodeError(t, readAll(t, resp))
			if resp.StatusCode != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != h {
				t.Errorf("%s: %s: %d %+v, want 400 naming the header", h, v, resp.StatusCode, e.Error)
			}
		}
	}
	for name, b := range map[string]Behavior{"CachedTokens": {CachedTokens: -1}, "CacheWriteTokens": {CacheWriteTokens: -1},
		"ReasoningTokens": {ReasoningTokens: maxCount + 1}} {
		var fe *FieldError
		if err := b.Validate(); !errors.As(err, &fe) || fe.Field != name {
			t.Errorf("Validate(%+v) = %v, want a FieldError for %s", b, err, name)
		}
	}
	resp := postTo(t, context.Background(), ts, "/mock/behavior", `{"ReasoningTokens":-3}`)
	if raw := readAll(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), "ReasoningTokens") {
		t.Errorf("admin ReasoningTokens -3: %d %s", resp.StatusCode, raw)
	}
}
