package upstream

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/upstream/anthropic"
	"github.com/llmgw/gateway/internal/upstream/anthropicclient"
)

const benchChunk = `data: {"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1732900000,"model":"gpt-4o-mini","system_fingerprint":"fp_0","choices":[{"index":0,"delta":{"content":" hello"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"

// BenchmarkEventReader splits a 100-chunk chat stream, each read filling
// what the buffer has room for: the reader's cost per stream. Its one
// allocation is the body's wrapper; the buffer comes from the pool.
func BenchmarkEventReader(b *testing.B) {
	stream := []byte(strings.Repeat(benchChunk, 100) + "data: [DONE]\n\n")
	var body bytes.Reader
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		body.Reset(stream)
		r := NewEventReader(io.LimitReader(&body, 1<<62))
		n := 0
		for {
			_, _, err := r.Next()
			if err != nil {
				if err != io.EOF || n != 101 {
					b.Fatal(n, err)
				}
				break
			}
			n++
		}
		r.Close()
	}
}

// BenchmarkFromAnthropicEvent is a translated text delta (Anthropic
// provider, OpenAI client) through the reader: parse and translation.
func BenchmarkFromAnthropicEvent(b *testing.B) {
	ev := []byte("event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello, how are you doing today? \\\"quoted\\\" \\u00e9\"}}\r\n\r\n")
	rd := &fromAnthropic{t: anthropic.NewStreamTranslator("gpt-4o", 1700000000, true)}
	buf, err := rd.Event(nil, []byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_x\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"), false)
	if err != nil {
		b.Fatal(err)
	}
	if buf, err = rd.Event(buf[:0], ev, false); err != nil { // the role chunk is out of the way
		b.Fatal(err)
	}
	b.SetBytes(int64(len(ev)))
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = rd.Event(buf[:0], ev, true); err != nil || len(buf) == 0 {
			b.Fatal(err)
		}
	}
}

// BenchmarkToAnthropicEvent is a translated text chunk (OpenAI provider,
// Anthropic client) through the reader.
func BenchmarkToAnthropicEvent(b *testing.B) {
	ev := []byte(benchChunk)
	rd := &toAnthropic{t: anthropicclient.NewStreamTranslator("claude-sonnet-4-5")}
	buf, err := rd.Event(nil, ev, false) // message_start and the block start
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(ev)))
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = rd.Event(buf[:0], ev, true); err != nil || len(buf) == 0 {
			b.Fatal(err)
		}
	}
}
