package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain checks that run leaves no server, connection or handler goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// syncBuffer is written by the server's goroutines and read by the test.
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

// startRun runs the command on a free port and returns its base URL, its log, and a
// stop function that cancels it and returns run's error.
func startRun(t *testing.T, args ...string) (string, *syncBuffer, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), logs, func(a net.Addr) { addrc <- a })
	}()
	var stopped bool
	var runErr error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = <-done
		}
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	select {
	case a := <-addrc:
		return "http://" + a.String(), logs, stop
	case err := <-done:
		stopped = true
		cancel()
		t.Fatalf("run ended before listening: %v; log: %s", err, logs)
	case <-time.After(5 * time.Second):
		t.Fatalf("run did not listen; log: %s", logs)
	}
	return "", nil, nil
}

// TestRunServes checks the flags reach the mock, the listening address is logged, and
// SIGTERM-style cancellation ends run cleanly.
func TestRunServes(t *testing.T) {
	url, logs, stop := startRun(t, "-identity", "primary", "-chunks", "2")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	resp, err := client.Post(url+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("X-Mock-Identity") != "primary" || !strings.Contains(string(body), "Hello from primary chunk 1") ||
		!strings.Contains(string(body), `"content":" 2"},"finish_reason":"stop"`) || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Errorf("unexpected stream: %s", body)
	}

	if err := stop(); err != nil {
		t.Fatalf("run = %v, want nil after cancellation", err)
	}
	if !strings.Contains(logs.String(), "listening on "+strings.TrimPrefix(url, "http://")) {
		t.Errorf("log lacks the listening address %s: %s", url, logs)
	}
}

// TestRunAnthropicFlags checks that -keyless and -tool-use reach the Anthropic
// endpoint, which the command serves with and without /v1, and that the recording
// route answers.
func TestRunAnthropicFlags(t *testing.T) {
	url, _, stop := startRun(t, "-keyless", "-tool-use", "lookup")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	for _, path := range []string{"/v1/messages", "/messages"} {
		req, err := http.NewRequest(http.MethodPost, url+path,
			strings.NewReader(`{"model":"claude","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Anthropic-Version", "2023-06-01") // and no x-api-key: -keyless
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"name":"lookup"`) ||
			!strings.Contains(string(body), `"stop_reason":"tool_use"`) {
			t.Errorf("%s: got %d %s, want a tool_use answer", path, resp.StatusCode, body)
		}
	}
	resp, err := client.Get(url + "/mock/last-request?path=/v1/messages")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"path":"/messages"`) {
		t.Errorf("last-request: %d %s", resp.StatusCode, body)
	}
	if err := stop(); err != nil {
		t.Fatalf("run = %v", err)
	}
}

// TestRunShutdownEndsStall checks that a stalled stream cannot hold shutdown beyond the
// grace period: connections are closed and run returns.
func TestRunShutdownEndsStall(t *testing.T) {
	url, _, stop := startRun(t, "-stall-after-headers", "-shutdown-grace", "50ms")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	resp, err := client.Post(url+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{}],"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	begin := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("run = %v, want nil", err)
	}
	if d := time.Since(begin); d > 3*time.Second {
		t.Errorf("shutdown took %v with a 50ms grace", d)
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Errorf("stalled stream ended cleanly, want a broken connection")
	}
}

// TestRunRejectsBadFlags checks that a misconfigured mock refuses to start instead of
// running a different scenario than the one asked for.
func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-fail-rate", "2"},
		{"-hang-rate", "1.5"},
		{"-slow-rate", "-0.1"},
		{"-slow-delay", "-1s"},
		{"-chunks", "-1"},
		{"-status", "42"},
		{"-latency", "-1s"},
		{"-error-kind", "nope"},
		{"-fail-first", "-1"},
		{"-down-for", "-1s"},
		{"-no-such-flag"},
		{"extra"},
		{"-addr", "256.0.0.1:1"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			called := false
			err := run(context.Background(), args, io.Discard, func(net.Addr) { called = true })
			if err == nil || called {
				t.Errorf("run(%q) = %v, listening=%v; want an error before listening", args, err, called)
			}
		})
	}
}

// TestRunModelBehavior checks the route a failover test in another process uses: one
// model of the running mock fails while another answers, the flags' FailFirst counts per
// model, and the per-model counts are readable over HTTP.
func TestRunModelBehavior(t *testing.T) {
	url, _, stop := startRun(t, "-fail-first", "1", "-status", "502")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	do := func(method, target, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, url+target, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(raw)
	}
	chat := func(model string) int {
		code, _ := do(http.MethodPost, "/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`)
		return code
	}

	if got := []int{chat("gpt-4o"), chat("gpt-4o"), chat("gpt-4o-mini"), chat("gpt-4o-mini")}; got[0] != 502 || got[1] != 200 || got[2] != 502 || got[3] != 200 {
		t.Errorf("-fail-first 1 per model: %v, want [502 200 502 200]", got)
	}
	if code, body := do(http.MethodPost, "/mock/behavior?model=gpt-4o", `{"FailFirst":0,"Status":503}`); code != http.StatusNoContent {
		t.Fatalf("POST /mock/behavior: %d %s", code, body)
	}
	if a, b := chat("gpt-4o"), chat("gpt-4o-mini"); a != 503 || b != 200 {
		t.Errorf("gpt-4o %d, gpt-4o-mini %d; want 503, 200", a, b)
	}
	if code, body := do(http.MethodGet, "/mock/stats?model=gpt-4o", ""); code != 200 || !strings.Contains(body, `"requests":3`) || !strings.Contains(body, `"failed":2`) {
		t.Errorf("stats?model=gpt-4o: %d %s", code, body)
	}
	if code, _ := do(http.MethodDelete, "/mock/behavior?model=gpt-4o", ""); code != http.StatusNoContent {
		t.Errorf("DELETE: %d", code)
	}
	if code, _ := do(http.MethodPost, "/mock/reset", ""); code != http.StatusNoContent {
		t.Errorf("reset: %d", code)
	}
	if code, body := do(http.MethodGet, "/mock/stats?model=gpt-4o", ""); code != 200 || !strings.Contains(body, `"requests":0`) {
		t.Errorf("stats after reset: %d %s", code, body)
	}
	if err := stop(); err != nil {
		t.Fatalf("run = %v", err)
	}
}
