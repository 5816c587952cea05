package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// logBuffer collects a child process's JSON log lines; the test reads them
// while the process still writes.
type logBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{} // signalled after each write
}

func newLogBuffer() *logBuffer { return &logBuffer{written: make(chan struct{}, 1)} }

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	n, err := b.buf.Write(p)
	b.mu.Unlock()
	select {
	case b.written <- struct{}{}:
	default:
	}
	return n, err
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// records parses the complete JSON lines written so far.
func (b *logBuffer) records() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil {
			out = append(out, rec)
		}
	}
	return out
}

// find returns the first record whose msg is msg.
func (b *logBuffer) find(msg string) (map[string]any, bool) {
	for _, rec := range b.records() {
		if rec["msg"] == msg {
			return rec, true
		}
	}
	return nil, false
}

// gatewayProc is the gateway binary running as a child process.
type gatewayProc struct {
	cmd     *exec.Cmd
	logs    *logBuffer
	addr    string // the API listener, read from the "gateway listening" line
	done    chan struct{}
	waitErr error // set before done is closed
}

// startGateway runs `gateway serve` with env on loopback ports the kernel
// picks, so parallel test binaries never collide, and waits until it serves.
func startGateway(t *testing.T, env ...string) *gatewayProc {
	t.Helper()
	p := &gatewayProc{logs: newLogBuffer(), done: make(chan struct{})}
	p.cmd = exec.Command(gatewayBinary(t), "serve")
	p.cmd.Env = append(os.Environ(), "GATEWAY_DATABASE_URL=", "DATABASE_URL=",
		"GATEWAY_LISTEN_ADDR=127.0.0.1:0", "GATEWAY_LOG_FORMAT=json")
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	rec := p.waitLog(t, "gateway listening", 10*time.Second)
	p.addr, _ = rec["addr"].(string)
	return p
}

// waitLog waits for a log record with the given msg, failing the test if the
// process exits or the deadline passes first.
func (p *gatewayProc) waitLog(t *testing.T, msg string, within time.Duration) map[string]any {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		if rec, ok := p.logs.find(msg); ok {
			return rec
		}
		select {
		case <-p.logs.written:
		case <-p.done:
			if rec, ok := p.logs.find(msg); ok {
				return rec
			}
			t.Fatalf("gateway exited (%v) before logging %q:\n%s", p.waitErr, msg, p.logs.String())
		case <-deadline.C:
			t.Fatalf("no %q log line within %s:\n%s", msg, within, p.logs.String())
		}
	}
}

func (p *gatewayProc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s: %v", sig, err)
	}
}

// exitCode waits for the process to end and returns its exit code (-1 when a
// signal killed it).
func (p *gatewayProc) exitCode(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("gateway still running %s later:\n%s", within, p.logs.String())
		return 0
	}
}

// errorRecords returns the ERROR level lines, which a clean run has none of.
func (p *gatewayProc) errorRecords() []map[string]any {
	var out []map[string]any
	for _, rec := range p.logs.records() {
		if rec["level"] == "ERROR" {
			out = append(out, rec)
		}
	}
	return out
}

// get fetches url with a client that keeps no connection open afterwards.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

func chat(t *testing.T, addr string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatalf("chat request: %v", err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

func newMock(t *testing.T) string {
	t.Helper()
	ts := httptest.NewServer(mockupstream.New(mockupstream.Behavior{Identity: "primary"}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestMetricsListener: with GATEWAY_METRICS_ADDR the binary serves /metrics
// (and only /metrics) on that second listener, and SIGTERM still ends the
// process cleanly: exit 0 and no error logged, with both listeners owned.
func TestMetricsListener(t *testing.T) {
	p := startGateway(t, "GATEWAY_CONFIG="+writeRoutes(t, newMock(t)), "TEST_PRIMARY_KEY=sk-x",
		"GATEWAY_METRICS_ADDR=127.0.0.1:0")
	rec := p.waitLog(t, "metrics listening", time.Second)
	maddr, _ := rec["addr"].(string)
	if code, body := chat(t, p.addr); code != 200 {
		t.Fatalf("chat: %d %s", code, body)
	}
	// The client has the answer a moment before the gateway has counted
	// the request: the count comes once the handler returns.
	var code int
	var body string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		code, body = get(t, "http://"+maddr+"/metrics")
		if code == 200 && strings.Contains(body, `gateway_requests_total{`) || time.Now().After(deadline) {
			break
		}
	}
	if code != 200 || !strings.Contains(body, `gateway_requests_total{`) {
		t.Fatalf("GET /metrics on the metrics listener: %d\n%.2000s", code, body)
	}
	if code, _ := get(t, "http://"+maddr+"/healthz"); code != http.StatusNotFound {
		t.Errorf("GET /healthz on the metrics listener: %d, want 404 (metrics only)", code)
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.exitCode(t, 10*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0:\n%s", code, p.logs.String())
	}
	if errs := p.errorRecords(); len(errs) > 0 {
		t.Fatalf("errors logged on a clean stop: %v", errs)
	}
}

// TestSecondSignalSkipsShutdownDelay: during GATEWAY_SHUTDOWN_DELAY the
// gateway keeps serving with /readyz failing; a second SIGTERM or SIGINT (an
// operator who will not wait an hour) ends the delay at once and the process
// drains and exits 0.
func TestSecondSignalSkipsShutdownDelay(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, second os.Signal
	}{
		{"SIGTERM twice", syscall.SIGTERM, syscall.SIGTERM},
		{"SIGINT then SIGTERM", os.Interrupt, syscall.SIGTERM},
		{"Ctrl-C twice", os.Interrupt, os.Interrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startGateway(t, "GATEWAY_CONFIG="+writeRoutes(t, newMock(t)), "TEST_PRIMARY_KEY=sk-x",
				"GATEWAY_SHUTDOWN_DELAY=1h")
			p.signal(t, tc.first)
			p.waitLog(t, "shutting down", 5*time.Second)
			if code, _ := get(t, "http://"+p.addr+"/readyz"); code != http.StatusServiceUnavailable {
				t.Fatalf("/readyz during the shutdown delay: %d, want 503", code)
			}
			if code, body := chat(t, p.addr); code != 200 {
				t.Fatalf("a request during the shutdown delay: %d %s, want it served", code, body)
			}
			p.signal(t, tc.second)
			if code := p.exitCode(t, 10*time.Second); code != 0 {
				t.Fatalf("exit code %d, want 0:\n%s", code, p.logs.String())
			}
			if _, ok := p.logs.find("shutdown delay skipped; draining now"); !ok {
				t.Errorf("the skipped delay is not logged:\n%s", p.logs.String())
			}
		})
	}
}
