package routes

import (
	"testing"
	"time"
)

const validRoutes = `
providers:
  - name: primary
    base_url: http://127.0.0.1:9001/v1
    api_keys: ["${K1}", "${K2}"]
    max_concurrency: 8
    queue_budget: 100ms
    timeouts: { connect: 1s, first_byte: 2s, idle: 3s, total: 4s }
    headers: { OpenAI-Organization: "${ORG}" }
    query: { api-version: "2024-10-21" }
  - name: backup
    format: openai
    base_url: http://127.0.0.1:9002/v1/
    api_keys: ["sk-backup"]
    max_concurrency: 4
models:
  - name: gpt-4o-mini
    candidates:
      - { provider: primary, model: up-mini }
      - { provider: backup, priority: 1 }
clients:
  - { name: app-1, key_sha256: "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855" }
`

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseRoutesValid(t *testing.T) {
	r, err := Parse([]byte(validRoutes), env(map[string]string{"K1": "sk-one", "K2": "sk-two", "ORG": "org-1"}))
	if err != nil {
		t.Fatal(err)
	}
	p := r.Providers[0]
	if p.APIKeys[0].Reveal() != "sk-one" || p.APIKeys[1].Reveal() != "sk-two" || p.Headers["OpenAI-Organization"] != "org-1" {
		t.Fatalf("expansion wrong: %+v", p)
	}
	if r.Providers[1].Format != "openai" || r.Models[0].Candidates[1].Model != "gpt-4o-mini" || r.Models[0].Candidates[1].Weight != 1 {
		t.Fatalf("defaults not applied: %+v", r)
	}
	if r.Clients[0].Priority != "interactive" || r.Clients[0].KeySHA256[0] != 'e' {
		t.Fatalf("client defaults: %+v", r.Clients[0])
	}
}

// TestCacheDefaults protects what an operator gets from a bare cache block:
// scope client, a 10m TTL and a 1MiB entry bound; a route without one has
// no cache (nil), which keeps its hot path free of cache work.
func TestCacheDefaults(t *testing.T) {
	r, err := Parse([]byte(`providers:
  - { name: p, base_url: "http://127.0.0.1:1/v1", auth: none, max_concurrency: 1 }
models:
  - { name: a, cache: {}, candidates: [{ provider: p }] }
  - { name: b, cache: { ttl: 30s, max_entry_bytes: 64KiB, scope: shared }, candidates: [{ provider: p }] }
  - { name: c, candidates: [{ provider: p }] }
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	want := []*CacheConfig{
		{TTL: Duration(DefaultCacheTTL), MaxEntryBytes: DefaultCacheMaxEntryBytes, Scope: CacheScopeClient},
		{TTL: Duration(30 * time.Second), MaxEntryBytes: 64 << 10, Scope: CacheScopeShared},
		nil,
	}
	for i, w := range want {
		got := r.Models[i].Cache
		if (got == nil) != (w == nil) || (got != nil && *got != *w) {
			t.Errorf("models[%d].cache = %+v, want %+v", i, got, w)
		}
	}
}
