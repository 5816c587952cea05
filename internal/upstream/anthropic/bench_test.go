package anthropic

import (
	"testing"
)

// BenchmarkStreamTranslatorTextDelta is the hot path: one text delta in, one
// chunk out, appended into a reused buffer. It must not allocate.
func BenchmarkStreamTranslatorTextDelta(b *testing.B) {
	tr := NewStreamTranslator("gpt-4o", 1700000000, true)
	name, data := []byte("content_block_delta"), []byte("{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello, how are you doing today? \\\"quoted\\\" \\u00e9\"}}")
	buf, err := feed(tr, nil, []byte(evStart+evText)) // the role chunk is out of the way
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		buf, err = tr.Event(buf[:0], name, data)
		if err != nil || len(buf) == 0 {
			b.Fatal(err)
		}
	}
}

// BenchmarkChatToMessages translates a typical short chat: a system prompt
// and three turns, streamed with usage.
func BenchmarkChatToMessages(b *testing.B) {
	body := []byte(`{"model":"claude","stream":true,"stream_options":{"include_usage":true},"max_tokens":1024,"temperature":0.7,` +
		`"messages":[{"role":"system","content":"You are a helpful assistant. Answer briefly."},` +
		`{"role":"user","content":"What is the capital of France, and what is it known for?"},` +
		`{"role":"assistant","content":"Paris. It is known for the Eiffel Tower, the Louvre and its cafes."},` +
		`{"role":"user","content":"And its population?"}]}`)
	opts := Options{Model: "claude-sonnet-4-5"}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := ChatToMessages(body, opts); err != nil {
			b.Fatal(err)
		}
	}
}
