package mockupstream

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// TestEndAfterChunks: EndAfterChunks ends a stream cleanly (no read error)
// after that many content chunks, with nothing of the stream's close, on
// every endpoint: a cut that looks like a clean end, which the gateway must
// not take for a complete answer.
func TestEndAfterChunks(t *testing.T) {
	tests := []struct {
		name, path, body string
		headers          []string
		content          string // a content event's marker
		closing          []string
	}{
		{"chat", "/v1/chat/completions", streamBody, nil, `{"content":"`, []string{`"finish_reason":"stop"`, "[DONE]", `"usage"`}},
		{"messages", pathMessages, messagesStreamBody, anthropicAuth, `"text_delta"`, []string{"message_delta", "message_stop", "content_block_stop"}},
		{"responses", "/v1/responses", `{"model":"m","input":"hi","stream":true}`, nil, `"type":"response.output_text.delta"`, []string{"response.completed", "output_text.done"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := start(t, Behavior{Chunks: 5})
			hdr := append([]string{HeaderEndAfterChunks, "2"}, tt.headers...)
			resp := postTo(t, context.Background(), ts, tt.path, tt.body, hdr...)
			raw := readAll(t, resp) // fails the test on an unexpected EOF
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, raw)
			}
			if n := strings.Count(string(raw), tt.content); n != 2 {
				t.Fatalf("%d content events, want 2: %s", n, raw)
			}
			for _, c := range tt.closing {
				if strings.Contains(string(raw), c) {
					t.Fatalf("the stream ended short but sent %q: %s", c, raw)
				}
			}
			waitIdle(t, s)
			if st := s.Stats(); st.Failed != 1 || st.Completed != 0 || st.Resets != 0 {
				t.Errorf("stats = %+v, want Failed 1 only", st)
			}
		})
	}
	var fe *FieldError
	if err := (Behavior{EndAfterChunks: -1}).Validate(); !errors.As(err, &fe) || fe.Field != "EndAfterChunks" {
		t.Errorf("Validate(EndAfterChunks -1) = %v, want a FieldError for EndAfterChunks", err)
	}
}

// TestEndAfterLastChunk: ending after the last content chunk keeps chat's
// finish_reason but drops the usage chunk and [DONE], the case a gateway
// must judge apart from a cut.
func TestEndAfterLastChunk(t *testing.T) {
	s, ts := start(t, Behavior{Chunks: 2, EndAfterChunks: 2, Usage: true})
	raw := readAll(t, post(t, context.Background(), ts, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`))
	if !strings.Contains(string(raw), `"finish_reason":"stop"`) || strings.Contains(string(raw), "[DONE]") || strings.Contains(string(raw), `"usage":{`) {
		// Every chunk carries "usage":null, as OpenAI's do with
		// include_usage; the usage object itself must not come.
		t.Fatalf("body %s: want the finish_reason, no usage object and no [DONE]", raw)
	}
	waitIdle(t, s)
}
