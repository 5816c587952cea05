package gemini

import "testing"

// BenchmarkStreamTranslatorText is the hot path: one Gemini chunk of text
// in, one OpenAI chunk out, appended into a reused buffer. This first
// version decodes each chunk with encoding/json (most of its cost) and
// appends text chunks by hand; the anthropic package's hand-walked
// translator is the model should this show in a profile.
func BenchmarkStreamTranslatorText(b *testing.B) {
	tr := NewStreamTranslator("gpt-4o", 1700000000, true)
	data := []byte(`{"candidates": [{"content": {"parts": [{"text": "Hello, how are you doing today? \"quoted\" \u00e9"}],"role": "model"},"index": 0}],` +
		`"usageMetadata": {"promptTokenCount": 7,"candidatesTokenCount": 3,"totalTokenCount": 10},"modelVersion": "gemini-2.5-flash","responseId": "r"}`)
	buf, err := tr.Event(nil, nil, data) // the role chunk is out of the way
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		buf, err = tr.Event(buf[:0], nil, data)
		if err != nil || len(buf) == 0 {
			b.Fatal(err)
		}
	}
}

// BenchmarkChatToGemini translates a typical short chat: a system prompt
// and three turns, streamed with usage.
func BenchmarkChatToGemini(b *testing.B) {
	body := []byte(`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"max_tokens":1024,"temperature":0.7,` +
		`"messages":[{"role":"system","content":"You are a helpful assistant. Answer briefly."},` +
		`{"role":"user","content":"What is the capital of France, and what is it known for?"},` +
		`{"role":"assistant","content":"Paris. It is known for the Eiffel Tower, the Louvre and its cafes."},` +
		`{"role":"user","content":"And its population?"}]}`)
	opts := Options{Model: "gemini-2.5-flash"}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := ChatToGemini(body, opts); err != nil {
			b.Fatal(err)
		}
	}
}
