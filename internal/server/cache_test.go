package server_test

import (
	"bytes"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// cachedRoutes is defaultRoutes with a cache block on gpt-4o-mini.
const cachedRoutes = `
providers:
  - name: primary
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 32
    timeouts: { first_byte: 2s }
%[3]s
  - name: backup
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 32
models:
  - name: gpt-4o-mini
    cache: { ttl: 1m }
    candidates:
      - { provider: primary, model: up-primary-mini, priority: 0 }
      - { provider: backup, model: up-backup-mini, priority: 1 }
`

// TestCacheRepeat protects the point of the cache: a repeat of a request,
// with its keys reordered and its whitespace changed, is answered from the
// stored answer (x-gateway-cache: hit, Age, the same bytes) and the
// provider sees one request; a different temperature or message misses,
// and no-cache and no-store requests bypass. Stream requests share the
// entry (cache_stream_test.go).
func TestCacheRepeat(t *testing.T) {
	g := start(t, setup{routes: cachedRoutes})
	first := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"temperature":0.5}`
	resp, want := g.post(t, first)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Gateway-Cache") != "miss" {
		t.Fatalf("first: status %d, x-gateway-cache %q; want 200, miss", resp.StatusCode, resp.Header.Get("X-Gateway-Cache"))
	}
	tests := []struct {
		name  string
		body  string
		hdr   []string
		cache string
	}{
		{"same", first, nil, "hit"},
		{"reordered", "{ \"temperature\": 0.5,\n \"messages\": [ {\"content\":\"hi\", \"role\":\"user\"} ], \"model\":\"gpt-4o-mini\" }", nil, "hit"},
		{"other temperature", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"temperature":0.7}`, nil, "miss"},
		{"other message", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"ho"}],"temperature":0.5}`, nil, "miss"},
		{"no-store", first, []string{"Cache-Control", "no-store"}, "bypass"},
		{"no-cache", first, []string{"Cache-Control", "no-cache"}, "bypass"},
	}
	calls := 1
	for _, tt := range tests {
		resp, body := g.post(t, tt.body, tt.hdr...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", tt.name, resp.StatusCode, body)
		}
		if got := resp.Header.Get("X-Gateway-Cache"); got != tt.cache {
			t.Errorf("%s: x-gateway-cache %q, want %q", tt.name, got, tt.cache)
		}
		if tt.cache == "hit" {
			if !bytes.Equal(body, want) || resp.Header.Get("Age") == "" {
				t.Errorf("%s: hit body %s (Age %q), want the stored %s with an Age", tt.name, body, resp.Header.Get("Age"), want)
			}
		} else {
			calls++
		}
		if got := g.Primary.Stats().Requests; got != uint64(calls) {
			t.Errorf("%s: provider saw %d requests, want %d", tt.name, got, calls)
		}
	}
}

// TestCacheFailureNotStored: an answer that failed on every candidate is
// not stored, so the repeat goes to the providers again.
func TestCacheFailureNotStored(t *testing.T) {
	g := start(t, setup{routes: cachedRoutes,
		primary: mockupstream.Behavior{Status: http.StatusInternalServerError},
		backup:  mockupstream.Behavior{Status: http.StatusInternalServerError}})
	for i := range 2 {
		resp, body := g.post(t, chatBody(false))
		if resp.StatusCode/100 == 2 || resp.Header.Get("X-Gateway-Cache") != "miss" {
			t.Fatalf("request %d: status %d, x-gateway-cache %q: %s; want a failure, miss", i, resp.StatusCode, resp.Header.Get("X-Gateway-Cache"), body)
		}
	}
	if got := g.Primary.Stats().Requests; got != 2 {
		t.Errorf("primary saw %d requests, want 2 (the failure was not stored)", got)
	}
}

// TestCacheCollapse: 20 concurrent identical misses reach the provider
// once, and all 20 get the answer.
func TestCacheCollapse(t *testing.T) {
	g := start(t, setup{routes: cachedRoutes, primary: mockupstream.Behavior{Latency: 300 * time.Millisecond}})
	n := g.concurrentCache(t, 20, chatBody(false), func([]byte) bool { return true })
	if n["miss"] != 1 || n["hit"] != 19 {
		t.Errorf("results %v, want 1 miss and 19 hits", n)
	}
	if got := g.Primary.Stats().Requests + g.Backup.Stats().Requests; got != 1 {
		t.Errorf("providers saw %d requests, want 1", got)
	}
}

// concurrentCache sends body n times at once and counts the answers by
// x-gateway-cache; an answer that is not 200 or that ok refuses counts
// under its status and body.
func (g *gateway) concurrentCache(t *testing.T, n int, body string, ok func([]byte) bool) map[string]int {
	t.Helper()
	var wg sync.WaitGroup
	results := make(chan string, n)
	for range n {
		wg.Go(func() {
			resp, b := g.post(t, body)
			if resp.StatusCode != http.StatusOK || !ok(b) {
				results <- "status " + resp.Status + ": " + string(b)
				return
			}
			results <- resp.Header.Get("X-Gateway-Cache")
		})
	}
	wg.Wait()
	close(results)
	counts := map[string]int{}
	for r := range results {
		counts[r]++
	}
	return counts
}

// TestCacheCollapseLeaderFails: when the one request the misses collapsed
// into fails, the others take their own attempt and fail over normally.
func TestCacheCollapseLeaderFails(t *testing.T) {
	g := start(t, setup{routes: cachedRoutes,
		primary: mockupstream.Behavior{Latency: 300 * time.Millisecond, Status: http.StatusInternalServerError}})
	var wg sync.WaitGroup
	codes := make(chan int, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := g.post(t, chatBody(false))
			codes <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("status %d, want 200 (failed over to backup)", c)
		}
	}
}

// TestCacheScope protects privacy: with scope client an answer is never
// served to another client, not even a teammate; with team it is served
// within the team only; with shared to every client of the route.
func TestCacheScope(t *testing.T) {
	const tokA, tokB, tokC = "sk-client-a-7f1", "sk-client-b-2c9", "sk-client-c-5d3" // a and b: team t; c: none
	tests := []struct {
		scope string
		hits  map[string]bool // token -> served from a's stored answer
	}{
		{"client", map[string]bool{tokB: false, tokC: false}},
		{"team", map[string]bool{tokB: true, tokC: false}},
		{"shared", map[string]bool{tokB: true, tokC: true}},
	}
	for _, tt := range tests {
		t.Run(tt.scope, func(t *testing.T) {
			g := start(t, setup{routes: `
providers:
  - { name: primary, base_url: "%[1]s/v1", api_keys: ["${PRIMARY_KEY}"], max_concurrency: 8 }
  - { name: backup, base_url: "%[2]s/v1", api_keys: ["${BACKUP_KEY}"], max_concurrency: 8 }
%[3]s
models:
  - { name: gpt-4o-mini, cache: { scope: ` + tt.scope + ` }, candidates: [{ provider: primary }] }
teams:
  - { name: t }
clients:
  - { name: a, key_sha256: "` + sha(tokA) + `", team: t }
  - { name: b, key_sha256: "` + sha(tokB) + `", team: t }
  - { name: c, key_sha256: "` + sha(tokC) + `" }
`})
			if resp, body := g.post(t, chatBody(false), "Authorization", "Bearer "+tokA); resp.Header.Get("X-Gateway-Cache") != "miss" {
				t.Fatalf("a: status %d, x-gateway-cache %q: %s", resp.StatusCode, resp.Header.Get("X-Gateway-Cache"), body)
			}
			if resp, _ := g.post(t, chatBody(false), "Authorization", "Bearer "+tokA); resp.Header.Get("X-Gateway-Cache") != "hit" {
				t.Errorf("a's repeat: x-gateway-cache %q, want hit", resp.Header.Get("X-Gateway-Cache"))
			}
			for _, tok := range []string{tokB, tokC} {
				resp, body := g.post(t, chatBody(false), "Authorization", "Bearer "+tok)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: status %d: %s", tok, resp.StatusCode, body)
				}
				if got := resp.Header.Get("X-Gateway-Cache") == "hit"; got != tt.hits[tok] {
					t.Errorf("scope %s, client %s: hit %v, want %v", tt.scope, tok[:12], got, tt.hits[tok])
				}
			}
		})
	}
}
