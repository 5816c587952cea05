package responsesclient

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzStreamTranslator: whatever chunks a provider sends, the translator
// never panics, and what it writes is whole events whose data is JSON.
func FuzzStreamTranslator(f *testing.F) {
	f.Add(roleChunk + "\n" + textChunk("hi") + "\n" + finishChunk("stop") + "\n" + usageChunk + "\n[DONE]")
	f.Add(`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{"}}]}}]}` + "\n" +
		`{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":{"a":1}}}]}}]}` + "\n" +
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"x"}}]}}]}`)
	f.Add(`{"error":{"message":"x"}}`)
	f.Fuzz(func(t *testing.T, s string) {
		tr := NewStreamTranslator("m")
		var out []byte
		for _, line := range strings.Split(s, "\n") {
			out, _ = tr.Data(out, []byte(line))
		}
		out = tr.Finish(out)
		if len(out) == 0 {
			return // an error before the first event: nothing written
		}
		for _, frame := range bytes.Split(bytes.TrimSuffix(out, []byte("\n\n")), []byte("\n\n")) {
			_, d, ok := bytes.Cut(frame, []byte("\ndata: "))
			if !ok || !json.Valid(d) {
				t.Fatalf("frame %q", frame)
			}
		}
	})
}
