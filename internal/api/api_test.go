package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/routes"
)

func TestValidClientRequestID(t *testing.T) {
	for in, want := range map[string]bool{
		"abc-123_X.y:z": true, "": false, strings.Repeat("a", 128): true, strings.Repeat("a", 129): false,
		"has space": false, "new\nline": false, "tab\t": false, "ünï": false, "semi;colon": false,
	} {
		if got := validClientRequestID(in); got != want {
			t.Errorf("validClientRequestID(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestRequestPriority: the header can lower a client's priority, never raise
// it, and urgent is not for clients.
func TestRequestPriority(t *testing.T) {
	tests := []struct {
		header  string
		ceiling admission.Priority
		want    admission.Priority
		err     bool
	}{
		{"", admission.Interactive, admission.Interactive, false},
		{"", admission.Background, admission.Background, false},
		{"background", admission.Interactive, admission.Background, false},
		{" MAINTENANCE ", admission.Foreground, admission.Maintenance, false},
		{"interactive", admission.Background, admission.Background, false},
		{"urgent", admission.Interactive, 0, true},
		{"asap", admission.Interactive, 0, true},
	}
	for _, tt := range tests {
		got, err := requestPriority(tt.header, tt.ceiling)
		if (err != nil) != tt.err || (!tt.err && got != tt.want) {
			t.Errorf("requestPriority(%q, %s) = %s, %v; want %s, err=%v", tt.header, tt.ceiling, got, err, tt.want, tt.err)
		}
		if err != nil && !strings.Contains(err.Error(), "interactive, foreground, background, maintenance") {
			t.Errorf("error does not name the allowed values: %v", err)
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "1", 250 * time.Millisecond: "1", time.Second: "1", 1500 * time.Millisecond: "2", 30 * time.Second: "30"} {
		if got := retryAfterSeconds(d); got != want {
			t.Errorf("retryAfterSeconds(%s) = %s, want %s", d, got, want)
		}
	}
}

// TestClientKeys: only the token whose SHA-256 is configured authenticates.
func TestClientKeys(t *testing.T) {
	if NewClientKeys(nil) != nil {
		t.Fatal("no clients must mean an open API (nil)")
	}
	ck := NewClientKeys([]routes.ClientConfig{
		{Name: "a", KeySHA256: "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b", Priority: "background"}, // sha256("secret")
	})
	s, rt := &Server{}, &Routing{Clients: ck}
	for auth, ok := range map[string]bool{"Bearer secret": true, "Bearer secret2": false, "secret": false, "Bearer ": false, "": false} {
		c, got, _ := s.authenticate(rt, http.Header{"Authorization": {auth}})
		if got != ok || (ok && (c.name != "a" || c.ceiling != admission.Background)) {
			t.Errorf("authenticate(%q) = %q %s %v, want ok=%v", auth, c.name, c.ceiling, got, ok)
		}
	}
}

func TestStreamErrorEvent(t *testing.T) {
	got := string(streamErrorEvent(`say "hi"`))
	want := `data: {"error":{"message":"say \"hi\"","type":"upstream_error","code":"stream_interrupted"}}` + "\n\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestRequestDeadline: X-Gateway-Deadline is a positive Go duration; it may
// only shorten the route's deadline.
func TestRequestDeadline(t *testing.T) {
	for h, want := range map[string]time.Duration{"": 0, " 500ms ": 500 * time.Millisecond, "2s": 2 * time.Second} {
		if got, err := requestDeadline(h); err != nil || got != want {
			t.Errorf("requestDeadline(%q) = %s, %v; want %s", h, got, err, want)
		}
	}
	for _, h := range []string{"0s", "-1s", "soon", "5"} {
		if _, err := requestDeadline(h); err == nil || !strings.Contains(err.Error(), "X-Gateway-Deadline") {
			t.Errorf("requestDeadline(%q): error %v, want one naming the header", h, err)
		}
	}
	for _, tt := range []struct{ route, asked, want time.Duration }{
		{0, 0, 0}, {0, time.Second, time.Second}, {2 * time.Second, 0, 2 * time.Second},
		{2 * time.Second, time.Second, time.Second}, {time.Second, 2 * time.Second, time.Second},
	} {
		if got := shorter(tt.route, tt.asked); got != tt.want {
			t.Errorf("shorter(route %s, asked %s) = %s, want %s", tt.route, tt.asked, got, tt.want)
		}
	}
}
