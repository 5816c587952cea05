package cache

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/upstream"
)

// BenchmarkAssembleChat is what assembling costs a cached route's stream:
// a 300-chunk OpenAI answer written event by event, as the relay writes.
func BenchmarkAssembleChat(b *testing.B) {
	var events []string
	events = append(events, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n")
	for i := range 300 {
		events = append(events, fmt.Sprintf(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word%d"},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n", i))
	}
	events = append(events, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`+"\n\n",
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":300,"total_tokens":301}}`+"\n\n",
		"data: [DONE]\n\n")
	bs := make([][]byte, len(events))
	total := 0
	for i, e := range events {
		bs[i] = []byte(e)
		total += len(e)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		a := NewAssembler(upstream.RouteChat, 1<<20)
		for _, e := range bs {
			_, _ = a.Write(e)
		}
		if body, err := a.Body(nil); err != nil || !strings.Contains(string(body), "word299") {
			b.Fatal(err)
		}
	}
}
