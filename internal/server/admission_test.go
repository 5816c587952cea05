package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/mockupstream"
)

// oneSlotRoutes gives each provider a single target slot and a short budget.
const oneSlotRoutes = `
providers:
  - name: primary
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 1
    queue_budget: 100ms
%[3]s
  - name: backup
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 1
    queue_budget: 100ms
models:
  - name: gpt-4o-mini
    candidates:
      - { provider: primary, priority: 0 }
      - { provider: backup, priority: 1 }
  - name: primary-only
    candidates:
      - { provider: primary }
`

// TestTargetFullFailsOver: with the primary's only slot busy, a second
// request waits the budget and is served by the backup.
func TestTargetFullFailsOver(t *testing.T) {
	g := start(t, setup{routes: oneSlotRoutes, primary: mockupstream.Behavior{Latency: 800 * time.Millisecond}})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		resp, body := g.post(t, chatBody(false))
		if resp.StatusCode != 200 || !strings.Contains(string(body), "primary") {
			t.Errorf("first request: %d %s", resp.StatusCode, body)
		}
	}()
	eventually(t, 5*time.Second, "the primary busy with one request", func() (bool, string) {
		return g.Primary.Stats().InFlight == 1, fmt.Sprintf("%+v", g.Primary.Stats())
	})
	begin := time.Now()
	resp, body := g.post(t, chatBody(false))
	took := time.Since(begin)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "backup") {
		t.Fatalf("second request: %d %s", resp.StatusCode, body)
	}
	if took < 100*time.Millisecond || took > 600*time.Millisecond {
		t.Fatalf("second request took %v, want about the 100ms budget", took)
	}
	wg.Wait()
	snap := g.Scheduler.Stats()
	var timedOut uint64
	for _, tg := range snap.Targets {
		timedOut += tg.TimedOut
	}
	if timedOut != 1 {
		t.Fatalf("target timeouts = %d, want 1: %+v", timedOut, snap.Targets)
	}
}

// TestAllTargetsFull429: every candidate failing admission gives 429 with Retry-After.
func TestAllTargetsFull429(t *testing.T) {
	g := start(t, setup{routes: oneSlotRoutes,
		primary: mockupstream.Behavior{Latency: 800 * time.Millisecond},
		backup:  mockupstream.Behavior{Latency: 800 * time.Millisecond}})
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.post(t, chatBody(false))
		}()
	}
	eventually(t, 5*time.Second, "primary and backup each busy with one request", func() (bool, string) {
		return g.Primary.Stats().InFlight == 1 && g.Backup.Stats().InFlight == 1, fmt.Sprintf("primary %+v backup %+v", g.Primary.Stats(), g.Backup.Stats())
	})
	resp, body := g.post(t, chatBody(false))
	e := decodeError(t, body)
	if resp.StatusCode != 429 || e.Error.Type != "rate_limit_error" || e.Error.Code != "candidates_exhausted" {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After = %q", resp.Header.Get("Retry-After"))
	}
	wg.Wait()
	if n := g.Primary.Stats().Requests + g.Backup.Stats().Requests; n != 2 {
		t.Fatalf("providers saw %d requests, want 2 (the rejected one must reach none)", n)
	}
}

// TestQueuedClientLeaves: a client that disconnects while queued never
// reaches the provider and leaves the queue at once.
func TestQueuedClientLeaves(t *testing.T) {
	g := start(t, setup{routes: strings.Replace(oneSlotRoutes, "queue_budget: 100ms\n%[3]s", "queue_budget: 5s\n%[3]s", 1),
		primary: mockupstream.Behavior{Latency: 1 * time.Second}})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		g.post(t, `{"model":"primary-only","messages":[{"role":"user","content":"x"}]}`)
	}()
	eventually(t, 5*time.Second, "the primary busy with one request", func() (bool, string) {
		return g.Primary.Stats().InFlight == 1, fmt.Sprintf("%+v", g.Primary.Stats())
	})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"primary-only","messages":[{"role":"user","content":"x"}]}`))
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := g.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
	}()
	eventually(t, 5*time.Second, "one request queued for admission", func() (bool, string) {
		return g.Scheduler.Stats().Pending == 1, fmt.Sprintf("%+v", g.Scheduler.Stats())
	})
	cancel()
	<-done
	eventually(t, 5*time.Second, "the cancelled request out of the admission queue", func() (bool, string) {
		return g.Scheduler.Stats().Pending == 0, fmt.Sprintf("%+v", g.Scheduler.Stats())
	})
	wg.Wait()
	if n := g.Primary.Stats().Requests; n != 1 {
		t.Fatalf("primary saw %d requests, want 1: the cancelled one must never reach it", n)
	}
	var cancelled uint64
	for _, tg := range g.Scheduler.Stats().Targets {
		cancelled += tg.Cancelled
	}
	if cancelled != 1 {
		t.Fatalf("cancelled = %d, want 1", cancelled)
	}
}

// TestAdminAdmission: the snapshot is served behind the admin token, with
// snake_case keys and no key material.
func TestAdminAdmission(t *testing.T) {
	g := start(t, setup{})
	g.post(t, chatBody(false))
	if code, _ := g.get(t, "/admin/admission", false); code != 401 {
		t.Fatalf("without token: %d, want 401", code)
	}
	code, body := g.get(t, "/admin/admission", true)
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	var snap admission.Snapshot
	if err := json.Unmarshal(body, &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Global.Limit != 256 || snap.Global.Admitted != 1 || snap.Global.Released != 1 || len(snap.Targets) == 0 {
		t.Fatalf("snapshot %s", body)
	}
	for _, k := range []string{`"limit"`, `"active"`, `"pending"`, `"admitted"`, `"released"`, `"timed_out"`} {
		if !strings.Contains(string(body), k) {
			t.Fatalf("snapshot lacks %s: %s", k, body)
		}
	}
	if strings.Contains(string(body), "SENTINEL") || strings.Contains(string(body), "/v1") {
		t.Fatalf("snapshot leaks key or URL: %s", body)
	}
}
