package upstream

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// FuzzBedrockFrames: any bytes as a ConverseStream body are safe to read
// (frames → events → chat or Anthropic chunks): no panic, no clean end
// made up from a body that does not decode (a *ProtocolError or a cut
// instead), and the same client bytes whether the body arrives whole or
// one byte at a time.
func FuzzBedrockFrames(f *testing.F) {
	for _, name := range []string{"stream_text.jsonl", "stream_tool.jsonl", "stream_guardrail.jsonl"} {
		b := fixtureFrames(f, name)
		f.Add(b, false)
		f.Add(b[:len(b)/2], true)
		bad := bytes.Clone(b)
		bad[len(bad)/3] ^= 0x40
		f.Add(bad, false)
	}
	f.Add(exceptionFrame(f, "throttlingException", "slow"), false)
	f.Add(eventFrame(f, "contentBlockDelta", []byte(`{"contentBlockIndex":9,"delta":{"toolUse":{"input":"{"}}}`)), true)
	f.Add([]byte{0, 0, 0, 16, 0, 0, 0, 0}, false)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, body []byte, messages bool) {
		route := RouteChat
		if messages {
			route = RouteMessages
		}
		whole, err := readBedrock(bytes.NewReader(body), route, true)
		split, serr := readBedrock(iotest.OneByteReader(bytes.NewReader(body)), route, true)
		if (err == nil) != (serr == nil) {
			t.Fatalf("whole: %v, one byte at a time: %v", err, serr)
		}
		if volatile.ReplaceAllString(string(whole), "") != volatile.ReplaceAllString(string(split), "") {
			t.Fatalf("whole and split differ:\n%s\n%s", whole, split)
		}
		if err == nil {
			return
		}
		var pe *ProtocolError
		var ee *EventError
		if !errors.As(err, &pe) && !errors.As(err, &ee) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("error of an unknown kind: %T %v", err, err)
		}
	})
}
