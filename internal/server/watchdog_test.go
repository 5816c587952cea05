package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// watchRoutes: a 200ms first-byte watchdog and a 300ms idle timeout on the primary.
const watchRoutes = `
providers:
  - name: primary
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
    timeouts: { first_byte: 200ms, idle: 300ms }
%[3]s
  - name: backup
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
models:
  - name: gpt-4o-mini
    candidates:
      - { provider: primary, priority: 0 }
      - { provider: backup, priority: 1 }
  - name: primary-only
    candidates:
      - { provider: primary }
`

// TestFirstByteWatchdog: a primary that is silent past the watchdog is
// cancelled and the backup answers, invisibly to the client.
func TestFirstByteWatchdog(t *testing.T) {
	for _, tt := range []struct {
		name string
		b    mockupstream.Behavior
	}{
		{"first byte delay", mockupstream.Behavior{FirstByteDelay: 2 * time.Second}},
		{"no answer at all", mockupstream.Behavior{Latency: 2 * time.Second}},
		{"headers then stall", mockupstream.Behavior{StallAfterHeaders: true}},
		{"comments only", mockupstream.Behavior{Comments: 40, CommentInterval: 50 * time.Millisecond}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := start(t, setup{routes: watchRoutes, primary: tt.b})
			begin := time.Now()
			resp, body := g.post(t, chatBody(true))
			took := time.Since(begin)
			if resp.StatusCode != 200 || !strings.Contains(string(body), "backup") {
				t.Fatalf("status %d body %s", resp.StatusCode, body)
			}
			if strings.Contains(string(body), "primary") || strings.Contains(string(body), "keep-alive") {
				t.Fatalf("the client saw something of the silent primary: %s", body)
			}
			if took > 200*time.Millisecond+400*time.Millisecond {
				t.Fatalf("took %v, want about the 200ms watchdog plus the backup's latency", took)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if err := g.Primary.WaitIdle(ctx); err != nil {
				t.Fatal(err)
			}
			if st := g.Primary.Stats(); st.Cancelled != 1 {
				t.Fatalf("primary stats %+v: want its request cancelled", st)
			}
		})
	}
}

// TestNonStreamHasNoFirstByteDeadline: a slow non-streaming generation is
// not cut by the first-byte watchdog.
func TestNonStreamHasNoFirstByteDeadline(t *testing.T) {
	g := start(t, setup{routes: watchRoutes, primary: mockupstream.Behavior{Latency: 500 * time.Millisecond}})
	resp, body := g.post(t, chatBody(false))
	if resp.StatusCode != 200 || !strings.Contains(string(body), "primary") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
}

// TestTotalTimeoutFailsOver: timeouts.total bounds a non-streaming attempt.
func TestTotalTimeoutFailsOver(t *testing.T) {
	routes := strings.Replace(watchRoutes, "timeouts: { first_byte: 200ms, idle: 300ms }", "timeouts: { total: 200ms }", 1)
	g := start(t, setup{routes: routes, primary: mockupstream.Behavior{Latency: 2 * time.Second}})
	resp, body := g.post(t, chatBody(false))
	if resp.StatusCode != 200 || !strings.Contains(string(body), "backup") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	g.Backup.SetBehavior(mockupstream.Behavior{Identity: "backup", Latency: 2 * time.Second})
	routesBoth := strings.Replace(routes, "max_concurrency: 8\nmodels", "max_concurrency: 8\n    timeouts: { total: 200ms }\nmodels", 1)
	g2 := start(t, setup{routes: routesBoth, primary: mockupstream.Behavior{Latency: 2 * time.Second}, backup: mockupstream.Behavior{Latency: 2 * time.Second}})
	resp, body = g2.post(t, chatBody(false))
	e := decodeError(t, body)
	if resp.StatusCode != 504 || e.Error.Code != "candidates_exhausted" {
		t.Fatalf("all timing out: %d %s", resp.StatusCode, body)
	}
}

// TestStallAfterFirstChunk: once bytes reached the client, a stall ends the
// stream with the error event, no [DONE], and the client library errors.
func TestStallAfterFirstChunk(t *testing.T) {
	g := start(t, setup{routes: watchRoutes, primary: mockupstream.Behavior{StallAfterChunks: 1}})
	resp, body, rerr := g.postRaw(t, chatBody(true))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if rerr == nil {
		t.Fatal("the interrupted stream ended cleanly; want an aborted connection")
	}
	data := sseData(body)
	if len(data) < 2 || !strings.Contains(data[len(data)-1], `"code":"stream_interrupted"`) {
		t.Fatalf("stream did not end with the error event: %q", data)
	}
	for _, d := range data {
		if d == "[DONE]" {
			t.Fatal("[DONE] after an interrupted stream")
		}
	}
	if g.Backup.Stats().Requests != 0 {
		t.Fatal("failover after bytes were sent")
	}

	// The official client reports an error, not a truncated success.
	c := openaiClient(g)
	stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	n := 0
	for stream.Next() {
		n++
	}
	if stream.Err() == nil || n == 0 {
		t.Fatalf("client saw %d chunks and err %v: want chunks then an error", n, stream.Err())
	}
}

// TestResetMidStream: an upstream that drops the connection mid-stream ends
// the client's stream with the error event too.
func TestResetMidStream(t *testing.T) {
	g := start(t, setup{routes: watchRoutes, primary: mockupstream.Behavior{ResetAfterChunks: 2}})
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(chatBody(true)))
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	var rerr error
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			rerr = err
			break
		}
	}
	if !strings.Contains(sb.String(), `"code":"stream_interrupted"`) || strings.Contains(sb.String(), "[DONE]") {
		t.Fatalf("body: %s", sb.String())
	}
	if errors.Is(rerr, nil) {
		t.Fatal("no read error")
	}
	if rerr.Error() == "EOF" {
		t.Fatal("the broken stream ended cleanly; want an aborted connection")
	}
}

// TestHoldModes: with one execution slot and a 2-second stream in flight,
// headers and first_body let a second request in; response makes it wait
// and fail admission after the budget. Each alias family is exercised.
func TestHoldModes(t *testing.T) {
	const (
		mode   = "GATEWAY_UPSTREAM_EXECUTION_GATE_STREAM_HOLD_MODE"
		amode  = "AETHER_GATEWAY_UPSTREAM_EXECUTION_GATE_STREAM_HOLD_MODE"
		force  = "GATEWAY_UPSTREAM_EXECUTION_GATE_HOLD_STREAM_RESPONSE"
		aforce = "AETHER_GATEWAY_UPSTREAM_EXECUTION_GATE_HOLD_STREAM_RESPONSE"
	)
	tests := []struct {
		name     string
		env      map[string]string
		admitted bool
	}{
		{"headers", map[string]string{mode: "headers"}, true},
		{"headers alias off", map[string]string{mode: "off"}, true},
		{"headers aether", map[string]string{amode: "none"}, true},
		{"first_body default", nil, true},
		{"first_body explicit", map[string]string{mode: "first_body"}, true},
		{"first_body fallback", map[string]string{mode: "bogus"}, true},
		{"response", map[string]string{mode: "response"}, false},
		{"response alias stream", map[string]string{mode: "STREAM"}, false},
		{"response aether", map[string]string{amode: "1"}, false},
		{"response forced", map[string]string{mode: "headers", force: "yes"}, false},
		{"response forced aether", map[string]string{aforce: "on"}, false},
		{"gateway wins over aether", map[string]string{mode: "headers", amode: "response"}, true},
	}
	// No watchdog here: with a dozen gateways streaming in parallel under
	// -race, a 300ms idle timeout against chunks 200ms apart cut the first
	// stream now and then, which is not what this test is about.
	holdRoutes := strings.Replace(watchRoutes, "timeouts: { first_byte: 200ms, idle: 300ms }", "timeouts: { first_byte: 10s }", 1)
	if holdRoutes == watchRoutes {
		t.Fatal("watchRoutes changed: the hold test's routes still carry the watchdog")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{
				"GATEWAY_UPSTREAM_EXECUTION_GATE_LIMIT":        "1",
				"GATEWAY_UPSTREAM_EXECUTION_GATE_QUEUE_BUDGET": "150ms",
			}
			for k, v := range tt.env {
				env[k] = v
			}
			g := start(t, setup{routes: holdRoutes, env: env,
				primary: mockupstream.Behavior{Chunks: 10, ChunkInterval: 200 * time.Millisecond}})
			// "streaming" runs once the first stream's first event reached
			// the client, after the hold mode has had its say on the global
			// slot: from then on the slot stays as the mode leaves it for
			// the rest of the 2-second stream.
			streaming := make(chan struct{})
			var once sync.Once
			g.API.SetTestHook(func(p string) {
				if p == "streaming" {
					once.Do(func() { close(streaming) })
				}
			})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, _ := g.post(t, `{"model":"primary-only","messages":[{"role":"user","content":"x"}],"stream":true}`)
				if resp.StatusCode != 200 {
					t.Errorf("first stream: %d", resp.StatusCode)
				}
			}()
			await(t, streaming, 5*time.Second, "the first stream's first event at the client")
			resp, body := g.post(t, `{"model":"primary-only","messages":[{"role":"user","content":"x"}]}`)
			if tt.admitted {
				if resp.StatusCode != 200 {
					t.Fatalf("second request %d %s: want it admitted while the first streams", resp.StatusCode, body)
				}
			} else {
				e := decodeError(t, body)
				if resp.StatusCode != 429 || e.Error.Code != "candidates_exhausted" {
					t.Fatalf("second request %d %s: want 429 after the budget", resp.StatusCode, body)
				}
				if g.Primary.Stats().Requests != 1 {
					t.Fatal("the rejected request reached the provider")
				}
			}
			wg.Wait()
		})
	}
}
