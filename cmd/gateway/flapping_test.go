package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// TestFlappingPrimaryRecoversWithDefaults: with the default health settings
// (cooldown 5s, max_cooldown 30s) a primary model that is down for 10s,
// then up, gets traffic back within 30s of recovering, and while it cools it
// gets at most one request (the probe) per cooldown. The fallback model on
// the same provider and key serves every request meanwhile: none fails.
func TestFlappingPrimaryRecoversWithDefaults(t *testing.T) {
	t.Parallel()
	mock := mockupstream.New(mockupstream.Behavior{Identity: "p"})
	ts := httptest.NewServer(mock)
	t.Cleanup(ts.Close)
	routes := filepath.Join(t.TempDir(), "routes.yaml")
	src := `providers:
  - name: p
    base_url: ` + ts.URL + `/v1
    api_keys: ["${FLAP_KEY}"]
    max_concurrency: 8
models:
  - name: m
    candidates:
      - { provider: p, model: gpt-4o }
      - { provider: p, model: gpt-4o-mini, priority: 1 }
`
	if err := os.WriteFile(routes, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	const outage = 10 * time.Second
	mock.SetModelBehavior("gpt-4o", mockupstream.Behavior{Identity: "p", Status: 503, DownFor: outage})
	upAt := time.Now().Add(outage)
	p := startGateway(t, "GATEWAY_CONFIG="+routes, "FLAP_KEY=sk-flap")

	c := &http.Client{Timeout: 10 * time.Second}
	send := func() {
		resp, err := c.Post("http://"+p.addr+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
		if err != nil {
			t.Fatalf("chat: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a request failed during the flap: %d", resp.StatusCode)
		}
	}
	primary := func() mockupstream.Stats { return mock.StatsForModel("gpt-4o") }
	// Until the primary model cools, every request tries it first.
	for primary().Requests < 3 {
		send()
	}
	cooledAt, atCooling := time.Now(), primary().Requests
	var recoveredAt time.Time
	for deadline := upAt.Add(35 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		send()
		if primary().Completed > 0 {
			recoveredAt = time.Now()
			break
		}
	}
	if recoveredAt.IsZero() {
		t.Fatalf("the primary model got no traffic back within 35s of recovering; stats %+v", primary())
	}
	if late := recoveredAt.Sub(upAt); late > 30*time.Second {
		t.Fatalf("traffic came back %v after the primary recovered, want within 30s", late)
	}
	// Cooldowns 5s, 10s, 20s, 30s...: the probes that could fit between
	// the first cooling and recovery, each taking one request.
	probes := int(primary().Requests - atCooling)
	allowed, window, at := 0, 5*time.Second, cooledAt
	for ; !at.After(recoveredAt); window = min(2*window, 30*time.Second) {
		allowed++
		at = at.Add(window)
	}
	if probes > allowed {
		t.Fatalf("the cooling primary got %d requests in %v, want at most one per cooldown (%d)", probes, recoveredAt.Sub(cooledAt), allowed)
	}
	t.Logf("recovered %v after coming back up; %d probes while cooling", recoveredAt.Sub(upAt).Round(time.Millisecond), probes)
}
