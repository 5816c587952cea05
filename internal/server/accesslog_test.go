package server_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// syncBuffer is a log destination the gateway writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// accessLines returns the access log lines ("msg=request") naming id.
func accessLines(log, id string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "msg=request ") && strings.Contains(line, "request_id="+id) {
			out = append(out, line)
		}
	}
	return out
}

// TestAccessLog: every API request, served, failed over or refused, leaves
// exactly one info line with what an operator greps for, and no secret;
// GATEWAY_ACCESS_LOG=false turns the lines off.
func TestAccessLog(t *testing.T) {
	log := &syncBuffer{}
	g := start(t, setup{log: log, primary: mockupstream.Behavior{Status: 503}})

	resp, _ := g.post(t, chatBody(true), "Authorization", "Bearer "+primaryKey)
	okID := resp.Header.Get("X-Request-Id")
	resp, _ = g.post(t, `{"model":"nope","messages":[]}`)
	rejectedID := resp.Header.Get("X-Request-Id")
	g.shutdown(t) // flushes the access log

	out := log.String()
	lines := accessLines(out, okID)
	if len(lines) != 1 {
		t.Fatalf("%d access lines for the served request, want 1:\n%s", len(lines), out)
	}
	for _, want := range []string{"level=INFO", "model=gpt-4o-mini", "route=chat", "stream=true", "status=success",
		"code=200", "candidates_tried=2", "duration_ms=", "first_byte_ms="} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("access line lacks %q: %s", want, lines[0])
		}
	}
	lines = accessLines(out, rejectedID)
	if len(lines) != 1 || !strings.Contains(lines[0], "status=rejected") || !strings.Contains(lines[0], "code=404") ||
		!strings.Contains(lines[0], "error_type=model_not_found") {
		t.Fatalf("access lines for the refused request: %q", lines)
	}
	if strings.Contains(out, "SENTINEL") {
		t.Fatal("a key or token reached the log")
	}

	log = &syncBuffer{}
	g = start(t, setup{log: log, env: map[string]string{"GATEWAY_ACCESS_LOG": "false"}})
	resp, _ = g.post(t, chatBody(false))
	g.shutdown(t)
	if lines := accessLines(log.String(), resp.Header.Get("X-Request-Id")); len(lines) != 0 {
		t.Fatalf("access log off, yet: %q", lines)
	}
}
