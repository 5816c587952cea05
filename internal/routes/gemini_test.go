package routes

import (
	"strings"
	"testing"
)

// TestParseGeminiProvider: format gemini is known; its key goes in
// x-goog-api-key unless auth says otherwise; default_max_tokens applies to
// it; forward_headers cannot let a client's x-goog-api-key through.
func TestParseGeminiProvider(t *testing.T) {
	const src = `
providers:
  - name: gem
    format: gemini
    base_url: https://generativelanguage.googleapis.com/v1beta
    api_keys: ["AIza-one"]
    max_concurrency: 4
    default_max_tokens: 2048
  - name: proxied
    format: gemini
    base_url: https://proxy.example/gemini
    auth: bearer
    api_keys: ["tok"]
    max_concurrency: 4
models:
  - name: flash
    candidates:
      - { provider: gem, model: gemini-2.5-flash }
      - { provider: proxied, model: gemini-2.5-flash, priority: 1 }
`
	r, err := Parse([]byte(src), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if a := r.Providers[0].Auth; a.Style != AuthHeader || a.Header != "x-goog-api-key" || r.Providers[0].DefaultMaxTokens != 2048 {
		t.Fatalf("gemini defaults: %+v", r.Providers[0])
	}
	if a := r.Providers[1].Auth; a.Style != AuthBearer {
		t.Fatalf("an explicit auth was replaced: %+v", a)
	}
	bad := strings.Replace(src, "    default_max_tokens: 2048\n", "    forward_headers: [X-Goog-Api-Key]\n", 1)
	if _, err := Parse([]byte(bad), env(nil)); err == nil || !strings.Contains(err.Error(), "providers[0].forward_headers[0]") {
		t.Fatalf("forwarding x-goog-api-key: %v", err)
	}
}
