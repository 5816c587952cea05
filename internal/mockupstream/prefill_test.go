package mockupstream

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// chatText joins a chat stream's content deltas.
func chatText(t *testing.T, raw []byte) string {
	t.Helper()
	var b strings.Builder
	for _, ev := range splitEvents(t, raw) {
		if ev == "data: [DONE]" || !strings.HasPrefix(ev, "data: ") {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		decodeInto(t, strings.TrimPrefix(ev, "data: "), &c)
		for _, ch := range c.Choices {
			b.WriteString(ch.Delta.Content)
		}
	}
	return b.String()
}

func prefillBody(prefill string) string {
	p, _ := json.Marshal(prefill)
	return `{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":` + string(p) + `}]}`
}

// TestPrefillContinues protects the continuation a resume test checks: a
// prefill of the answer's first k chunks gets exactly the rest of it.
func TestPrefillContinues(t *testing.T) {
	s, ts := start(t, Behavior{Chunks: 8})
	whole := "Hello from mock chunk 1 2 3 4 5 6 7 8"
	for _, prefill := range []string{"Hello from mock chunk 1", "Hello from mock chunk 1 2 3 4 5", "Hello from mock chunk 1 2 3 4 5 "} {
		got := chatText(t, readAll(t, post(t, context.Background(), ts, prefillBody(prefill))))
		if strings.TrimRight(prefill, " ")+got != whole {
			t.Errorf("prefill %q continued with %q, want the rest of %q", prefill, got, whole)
		}
	}
	if got := chatText(t, readAll(t, post(t, context.Background(), ts, prefillBody("Hello from mock chunk 1 2"), HeaderRepeatOnPrefill, "1"))); got != whole {
		t.Errorf("repeat on prefill answered %q, want the whole answer again", got)
	}
	resp := post(t, context.Background(), ts, prefillBody("Hello from mock chunk 1 2"), HeaderRejectPrefill, "1")
	if body := readAll(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "prefill_unsupported") {
		t.Errorf("reject prefill: %d %s, want 400 prefill_unsupported", resp.StatusCode, body)
	}
	if n := s.Prefills(); n != 5 {
		t.Errorf("Prefills() = %d, want 5", n)
	}
	// Without a prefill nothing changes.
	if got := chatText(t, readAll(t, post(t, context.Background(), ts, streamBody))); got != whole {
		t.Errorf("plain stream answered %q", got)
	}
}

// TestPrefillContinuesMessages: the same on the Anthropic route.
func TestPrefillContinuesMessages(t *testing.T) {
	_, ts := start(t, Behavior{Chunks: 6, Keyless: true})
	body := `{"model":"claude-test","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"Hello from mock chunk 1 2 3"}]}]}`
	resp := postTo(t, context.Background(), ts, "/v1/messages", body, "anthropic-version", "2023-06-01")
	var text strings.Builder
	for _, e := range splitNamedEvents(t, readAll(t, resp)) {
		if e.Name != "content_block_delta" {
			continue
		}
		var d struct {
			Delta struct {
				Text string `json:"text"`
			} `json:"delta"`
		}
		decodeInto(t, e.Data, &d)
		text.WriteString(d.Delta.Text)
	}
	if got := text.String(); got != " 4 5 6" {
		t.Errorf("continuation %q, want \" 4 5 6\"", got)
	}
}
