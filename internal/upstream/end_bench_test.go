package upstream

import "testing"

// BenchmarkPassChatEvent is the pass-through chat reader's cost per chunk
// after the commit point, the hot path of every OpenAI stream: an error
// prefix test, the last-event checks and the usage test.
func BenchmarkPassChatEvent(b *testing.B) {
	ev := []byte(`data: {"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1732900000,"model":"gpt-4o-mini","system_fingerprint":"fp_0","choices":[{"index":0,"delta":{"content":" hello"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	p := PassReader{kind: passChat}
	b.ReportAllocs()
	for b.Loop() {
		if out, err := p.Event(nil, ev, true); err != nil || len(out) != len(ev) {
			b.Fatal(err)
		}
	}
}
