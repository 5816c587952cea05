package upstream

import (
	"bytes"
	"strconv"
	"testing"
)

// BenchmarkBedrockStream: a 200-delta ConverseStream answer read as the
// attempt loop reads it (frames decoded and CRC-checked, events, chat
// chunks): the cost per answer, for comparing with the SSE formats'.
func BenchmarkBedrockStream(b *testing.B) {
	var body []byte
	body = append(body, eventFrame(b, "messageStart", []byte(`{"role":"assistant"}`))...)
	for i := range 200 {
		body = append(body, eventFrame(b, "contentBlockDelta", []byte(`{"contentBlockIndex":0,"delta":{"text":"token `+strconv.Itoa(i)+` "},"p":"abcdefgh"}`))...)
	}
	body = append(body, eventFrame(b, "contentBlockStop", []byte(`{"contentBlockIndex":0}`))...)
	body = append(body, eventFrame(b, "messageStop", []byte(`{"stopReason":"end_turn"}`))...)
	body = append(body, eventFrame(b, "metadata", []byte(`{"usage":{"inputTokens":10,"outputTokens":200,"totalTokens":210},"metrics":{"latencyMs":1}}`))...)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readBedrock(bytes.NewReader(body), RouteChat, true); err != nil {
			b.Fatal(err)
		}
	}
}
