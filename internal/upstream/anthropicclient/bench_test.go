package anthropicclient

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// BenchmarkStreamTranslatorTextDelta: one OpenAI text chunk in, one
// content_block_delta out, into a reused buffer: the per-token cost of a
// translated stream.
func BenchmarkStreamTranslatorTextDelta(b *testing.B) {
	ev := []byte(`data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	data := bytes.TrimSuffix(bytes.TrimPrefix(ev, []byte("data: ")), []byte("\n\n"))
	tr := NewStreamTranslator("claude-sonnet-4-5")
	dst, err := tr.Data(nil, data) // message_start and the block start
	if err != nil {
		b.Fatal(err)
	}
	dst, _ = tr.Data(dst[:0], data)
	want := string(dst)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		dst, err = tr.Data(dst[:0], data)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if string(dst) != want || want != `event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" world"}}`+"\n\n" {
		b.Fatalf("output %q", dst)
	}
}

// BenchmarkMessagesToChat: an agent turn with tools, a tool round trip and
// a system prompt.
func BenchmarkMessagesToChat(b *testing.B) {
	raw, err := os.ReadFile("testdata/requests/tool_round_trip.json")
	if err != nil {
		b.Fatal(err)
	}
	var fx struct {
		Request json.RawMessage `json:"request"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(fx.Request)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := MessagesToChat(fx.Request, "upstream-model"); err != nil {
			b.Fatal(err)
		}
	}
}
