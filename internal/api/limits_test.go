package api

import (
	"testing"
	"time"
)

// TestEndsStream: only an event line that starts with an end marker ends a
// stream; a model's text quoting the marker does not (it could otherwise
// stop the token count and let a client past its tokens_per_minute).
func TestEndsStream(t *testing.T) {
	tests := []struct {
		name string
		b    string
		want bool
	}{
		{"chat done", "data: [DONE]\n\n", true},
		{"held events ending with done", "data: {\"choices\":[]}\n\ndata: [DONE]\n\n", true},
		{"messages stop", "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", true},
		{"responses completed", "event: response.completed\ndata: {}\n\n", true},
		{"content quoting done", `data: {"choices":[{"delta":{"content":"SSE ends with data: [DONE]"}}]}` + "\n\n", false},
		{"content quoting message_stop", `data: {"delta":{"text":"then event: message_stop"}}` + "\n\n", false},
		{"ordinary chunk", `data: {"choices":[{"delta":{"content":"hi"}}]}` + "\n\n", false},
	}
	for _, tc := range tests {
		if got := endsStream([]byte(tc.b)); got != tc.want {
			t.Errorf("%s: endsStream = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestResetString(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Minute: "1m0s", 59500 * time.Millisecond: "59.5s", 1234567 * time.Microsecond: "1.235s",
	} {
		if got := resetString(d); got != want {
			t.Errorf("resetString(%v) = %q, want %q", d, got, want)
		}
	}
}
