package candidates

import (
	"errors"
	"strings"
	"testing"
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
	r, err := ParseRoutes([]byte(validRoutes), env(map[string]string{"K1": "sk-one", "K2": "sk-two", "ORG": "org-1"}))
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

// TestParseRoutesErrors: each mistake gets an error naming the field, and no key leaks.
func TestParseRoutesErrors(t *testing.T) {
	base := map[string]string{"K1": "sk-secret-one", "K2": "sk-secret-two", "ORG": "o"}
	tests := []struct {
		name, from, to, want string
	}{
		{"unknown provider", "provider: backup, priority: 1", "provider: nope, priority: 1", `provider "nope" is not a configured provider`},
		{"duplicate provider", "name: backup", "name: primary", "duplicate provider name"},
		{"bad url", "http://127.0.0.1:9002/v1/", "ftp://x", "base_url must be an absolute http(s) URL"},
		{"url with credentials", "http://127.0.0.1:9002/v1/", "http://user:sk-pass@h/v1", "base_url must be"},
		{"empty keys", `api_keys: ["sk-backup"]`, "api_keys: []", "api_keys must list at least one key"},
		{"unset key var", `"${K2}"`, `"${NOPE}"`, "api_keys[1] is empty (is NOPE set?)"},
		{"zero concurrency", "max_concurrency: 4", "max_concurrency: 0", "max_concurrency must be positive"},
		{"unknown format", "format: openai", "format: cohere", `format "cohere" is unknown`},
		{"unknown field", "max_concurrency: 4", "max_concurrency: 4\n    colour: red", "field colour not found"},
		{"bad duration", "queue_budget: 100ms", "queue_budget: soon", "invalid duration"},
		{"header crlf", `OpenAI-Organization: "${ORG}"`, `OpenAI-Organization: "a\r\nX-Evil: 1"`, "contains CR, LF or NUL"},
		{"bad weight", "provider: backup, priority: 1", "provider: backup, priority: 1, weight: -2", "weight must be at least 1"},
		{"bad client hash", `key_sha256: "E3B0`, `key_sha256: "zz`, "key_sha256 must be 64 hex"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(validRoutes, tt.from, tt.to, 1)
			if src == validRoutes {
				t.Fatalf("test edit %q did not apply", tt.from)
			}
			_, err := ParseRoutes([]byte(src), env(base))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
			for _, k := range []string{"sk-secret-one", "sk-secret-two", "sk-pass"} {
				if strings.Contains(err.Error(), k) {
					t.Fatalf("error leaks a key: %v", err)
				}
			}
		})
	}
	_, err := ParseRoutes([]byte("providers: []\nmodels: []\n"), env(base))
	if !errors.Is(err, ErrInvalidRoutes) {
		t.Fatalf("err = %v, want ErrInvalidRoutes", err)
	}
}

func FuzzParseRoutes(f *testing.F) {
	f.Add([]byte(validRoutes))
	f.Add([]byte("providers: [{name: a}]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRoutes(b, env(map[string]string{"K1": "a", "K2": "b"}))
		if err != nil {
			return
		}
		if _, err := NewPlanner(r, PlannerOptions{}); err != nil {
			t.Fatalf("valid routes did not plan: %v", err)
		}
	})
}
