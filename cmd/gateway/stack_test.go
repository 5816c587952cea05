package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// TestStreamStackBudget: an open stream costs the gateway 19-25 KiB of
// goroutine stacks (the handler's 8 KiB, net/http's connection reader and the
// upstream transport's two loops; the runtime's adaptive initial stack size
// moves the sum by a few KiB from run to run), not 27-31 KiB. The difference
// is the handler's stack growing to 16 KiB at the stream's first flush, which
// costs 16 MiB per 2,000 open streams; the streaming path has about 450
// bytes to spare (docs/architecture.md, "Stack budget of a stream"). It runs
// the real binary, so that only the gateway's goroutines are counted.
func TestStreamStackBudget(t *testing.T) {
	mock := mockupstream.New(mockupstream.Behavior{Identity: "primary", Chunks: 200, ChunkInterval: 50 * time.Millisecond})
	ts := httptest.NewServer(mock)
	defer ts.Close()
	routes := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(routes, []byte(`
providers:
  - name: primary
    base_url: `+ts.URL+`/v1
    api_keys: ["${TEST_PRIMARY_KEY}"]
    max_concurrency: 4096
models:
  - name: gpt-4o-mini
    candidates:
      - { provider: primary }
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	_, addr := startBinary(t, []string{"GATEWAY_CONFIG=" + routes, "TEST_PRIMARY_KEY=sk-x",
		"GATEWAY_DATABASE_URL=", "DATABASE_URL=", "GATEWAY_SHUTDOWN_GRACE=1s"}, &logs)
	before := runtimeGauges(t, addr)

	const n = 300
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	var opened, done sync.WaitGroup
	failures := make(chan string, n)
	for range n {
		opened.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			first := sync.OnceFunc(opened.Done)
			defer first()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/chat/completions",
				strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}],"stream":true}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				failures <- err.Error()
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				failures <- resp.Status
				return
			}
			if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
				failures <- fmt.Sprintf("first line %q, %v", line, err)
				return
			}
			first()
			_, _ = io.Copy(io.Discard, resp.Body) // until the test cancels
		}()
	}
	opened.Wait()
	after := runtimeGauges(t, addr)
	cancel()
	done.Wait()
	close(failures)
	for f := range failures {
		t.Fatalf("a stream failed: %s\n%s", f, logs.String())
	}

	goroutines := (after["go_goroutines"] - before["go_goroutines"]) / n
	stack := (after["go_memstats_stack_inuse_bytes"] - before["go_memstats_stack_inuse_bytes"]) / n
	t.Logf("per open stream: %.1f goroutines, %.1f KiB of goroutine stacks", goroutines, stack/1024)
	if goroutines < 3.5 || goroutines > 4.5 {
		t.Fatalf("%.1f goroutines per stream, want 4 (handler, connection reader, transport read and write loops)", goroutines)
	}
	if stack > 26<<10 {
		t.Fatalf("%.1f KiB of goroutine stacks per open stream, want about 22: the streaming handler's stack "+
			"no longer fits 8 KiB; see docs/architecture.md, \"Stack budget of a stream\"", stack/1024)
	}
}

// runtimeGauges reads the Go runtime gauges of the gateway's /metrics.
func runtimeGauges(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(name, "go_") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	if _, ok := out["go_memstats_stack_inuse_bytes"]; !ok {
		t.Fatal("/metrics has no go_memstats_stack_inuse_bytes")
	}
	return out
}
