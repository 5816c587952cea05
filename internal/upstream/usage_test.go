package upstream

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/jsontext"
)

// exact returns s as bytes whose capacity is their length, as a body read
// into an allocation of exactly its size class: a read one byte past the end
// then panics instead of quietly reading stale memory.
func exact(s string) []byte {
	b := []byte(s)
	return b[:len(b):len(b)]
}

// sized pads suffix into a body of exactly n bytes behind a filler "id"
// field; when suffix alone is longer than n it keeps suffix's last n bytes.
func sized(n int, suffix string) string {
	const head = `{"id":"`
	pad := n - len(head) - len(`",`) - len(suffix)
	if pad < 0 {
		return suffix[max(0, len(suffix)-n):]
	}
	return head + strings.Repeat("x", pad) + `",` + suffix
}

// sizeClasses are allocator size classes, and one past the last: a body
// that fills its allocation exactly is where an index one past the end
// stops reading slack and starts faulting.
var sizeClasses = []int{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 256, 512, 1024, 2048, 4096, 4097}

// malformedBodies are 2xx bodies no provider should send but some will:
// cut anywhere, inside escapes and strings, unbalanced, oversized numbers.
// Each must reach the client unchanged and yield no usage.
func malformedBodies() []string {
	out := []string{
		// The reported crash: 48 bytes, cut right after a backslash inside
		// a string of the usage object.
		`{"id":"` + strings.Repeat("x", 24) + `","usage":{"a":"\`,
		`{"id":"` + strings.Repeat("x", 25) + `","usage":{"a":"\`, // 49
		`"usage":{"a":"\`,
		`"usage":{"\`,
		`"usage":{"a":"b\"`,
		`"usage":{"a":"b\\`,
		`"usage":{"a":"\u00`,
		`"usage":{"a":"`,
		`"usage":{"a`,
		`"usage":{`,
		`"usage":{"total_tokens":3`,
		`"usage":{"total_tokens":3,"x":{"y":[1,{"z":"}`,
		`"usage":{"x":[[[[{{{{`,
		`"usage":{"x":]]]]}`,
		`"usage":{"total_tokens":1e999}}`,
		`"usage":{"total_tokens":99999999999999999999}}`,
		`"usage":{"total_tokens":` + strings.Repeat("9", 5000) + `}}`,
		`"usage":{"total_tokens":1.5}}`,
		`"usage":{"total_tokens":"3"}}`,
		`"usage":{"total_tokens":-}}`,
		`"usage":[{"total_tokens":3}]}`,
		`"usage":"{\"total_tokens\":3}"}`,
		`"usage":null}`,
		`"usage":}`,
		`"usage":`,
		`"usage"`,
		`"usage`,
		`{"\"usage":{"total_tokens":2}}`,
		`{"a":"\\\"usage":{"total_tokens":2}}`,
		"\xef\xbb\xbf{\"usage\":{\"total_tokens\":\"\xff\"}}",
		"{\"usage\":{\"total_tokens\":2\x00}}",
		`\`, `"`, `{`, `}`, `[`, `]`, `{"`, `{"\`, ``,
		strings.Repeat("[", 4096),
		strings.Repeat(`{"usage":`, 600),
		strings.Repeat(`"usage":{"a":"\`, 300),
	}
	for _, n := range sizeClasses {
		out = append(out,
			sized(n, `"usage":{"a":"\`),
			sized(n, `"usage":{"total_tokens":12`),
			sized(n, `"usage":{"a":"\"}`),
			sized(n, `"usage":{"a":"\\\`),
		)
	}
	return out
}

// TestTailUsageMalformed: no byte sequence from a provider may crash the
// request; a malformed or cut usage object is no usage.
func TestTailUsageMalformed(t *testing.T) {
	for _, body := range malformedBodies() {
		if u, ok := TailUsage(exact(body)); ok {
			t.Errorf("TailUsage(%.80q) = %+v, want no usage", body, u)
		}
	}
}

// TestTailUsageKeys: only a "usage" key counts, and the last one decides, as
// encoding/json would read the whole body; a string that merely ends in
// usage does not hide the real key before it.
func TestTailUsageKeys(t *testing.T) {
	tests := []struct {
		tail string
		want int64 // total tokens; -1 for none
	}{
		{`{"usage":{"total_tokens":1},"x":"say \"usage"}`, 1},
		{`{"usage":{"total_tokens":1},"x":["usage"]}`, 1},
		{`{"usage":{"total_tokens":1},"x":"usage"}`, 1},
		{`{"usage":{"total_tokens":1},"x":{"k":"usage"}}`, 1},
		{`{"usage":{"total_tokens":1},"usage" :null}`, -1},
		{`{"usage":null,"usage":{"total_tokens":2}}`, 2},
		{`{"usage":{"total_tokens":1},"\"usage":{"total_tokens":2}}`, 1},
		{`{"usage":{"total_tokens":1},"x":"\\","usage":{"total_tokens":2}}`, 2},
		{"{\"usage\"\r\n:\t{\"total_tokens\":4}}", 4},
		{"\xef\xbb\xbf{\"usage\":{\"total_tokens\":5}}", 5},
		{`"usage":{"total_tokens":3}]]]}}`, 3}, // the cut tail's own object is whole
	}
	for _, tt := range tests {
		u, ok := TailUsage(exact(tt.tail))
		if got := map[bool]int64{true: u.TotalTokens, false: -1}[ok]; got != tt.want {
			t.Errorf("TailUsage(%s) = %d, want %d", tt.tail, got, tt.want)
		}
	}
}

// TestSkipValueInBounds: the skipper is shared by the request parser and the
// usage readers; on any input it must stop within the slice, or its callers
// slice past the end.
func TestSkipValueInBounds(t *testing.T) {
	for _, body := range malformedBodies() {
		b := exact(body)
		for i := 0; i <= len(b); i++ {
			if j := jsontext.SkipValue(b, i); j < i || j > len(b) {
				t.Fatalf("jsontext.SkipValue(%.80q, %d) = %d, want in [%d, %d]", body, i, j, i, len(b))
			}
			if j := jsontext.SkipString(b, i); j < i || j > len(b) {
				t.Fatalf("jsontext.SkipString(%.80q, %d) = %d, want in [%d, %d]", body, i, j, i, len(b))
			}
		}
	}
}

// TestEventUsageMalformed: chunks cut or mangled anywhere yield no usage and
// no panic; JSON whitespace around the colon is still whitespace.
func TestEventUsageMalformed(t *testing.T) {
	for _, body := range malformedBodies() {
		for _, ev := range []string{"data: " + body + "\n\n", "data:" + body, body} {
			if u, ok := EventUsage(exact(ev)); ok {
				t.Errorf("EventUsage(%.80q) = %+v, want no usage", ev, u)
			}
		}
	}
	// A bare CR ends an SSE line, so the whitespace is the "\n" that joins
	// two data lines, and a tab.
	u, ok := EventUsage(exact("data: {\"choices\":[],\"usage\":\rdata:\t{\"total_tokens\":7}}\r\n\r\n"))
	if !ok || u.TotalTokens != 7 {
		t.Fatalf("EventUsage with a line break before the object = %+v %v, want 7 tokens", u, ok)
	}
}

// A body as OpenAI ends it: the last choice, then usage.
var benchTail = func() []byte {
	var b bytes.Buffer
	b.WriteString(`{"id":"chatcmpl-9x","object":"chat.completion","created":1732900000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"`)
	for b.Len() < 3800 {
		b.WriteString(`word \"quoted\" `)
	}
	b.WriteString(`"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":900,"total_tokens":912,"prompt_tokens_details":{"cached_tokens":0}},"system_fingerprint":"fp_0"}`)
	return b.Bytes()
}()

func BenchmarkTailUsage(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if u, ok := TailUsage(benchTail); !ok || u.TotalTokens != 912 {
			b.Fatal(fmt.Sprint(u, ok))
		}
	}
}

// BenchmarkEventUsageNull is the per-chunk cost with include_usage: every
// chunk says "usage":null and must be dismissed without decoding.
func BenchmarkEventUsageNull(b *testing.B) {
	ev := []byte(`data: {"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1732900000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":" hello"},"finish_reason":null}],"usage":null}` + "\n\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := EventUsage(ev); ok {
			b.Fatal("usage in a null chunk")
		}
	}
}

func BenchmarkEventUsage(b *testing.B) {
	ev := []byte(`data: {"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1732900000,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":900,"total_tokens":912}}` + "\n\n")
	b.ReportAllocs()
	for b.Loop() {
		if u, ok := EventUsage(ev); !ok || u.TotalTokens != 912 {
			b.Fatal(fmt.Sprint(u, ok))
		}
	}
}

// The usage objects providers send are decoded without encoding/json: the
// scanner is sure of them. (FuzzDecodeUsage checks that its answers are
// encoding/json's.)
func TestScanUsageDecodesProviderShapes(t *testing.T) {
	tests := []struct {
		name string
		obj  string
		want Usage
	}{
		{"openai", `{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`,
			Usage{PromptTokens: 12, CompletionTokens: 5, TotalTokens: 17}},
		{"openrouter", `{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13,"cost":0.000123,"is_byok":false,"cost_details":{"upstream_inference_cost":null}}`,
			Usage{PromptTokens: 10, CompletionTokens: 3, TotalTokens: 13}},
		{"spaced", "{ \"prompt_tokens\" : 1 ,\n \"total_tokens\" : 2 }", Usage{PromptTokens: 1, TotalTokens: 2}},
		{"null count", `{"prompt_tokens":4,"completion_tokens":null,"total_tokens":4}`, Usage{PromptTokens: 4, TotalTokens: 4}},
		{"empty", `{}`, Usage{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, ok, sure := scanUsage([]byte(tt.obj))
			if !sure || !ok || u != tt.want {
				t.Fatalf("scanUsage(%s) = %+v ok=%v sure=%v, want %+v decoded here", tt.obj, u, ok, sure, tt.want)
			}
		})
	}
}
