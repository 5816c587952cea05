package candidates

import (
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
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

// fuzzEnv's values are keys only the environment holds: the fuzzer can
// place ${K1} anywhere, but is unlikely to write the value itself.
var fuzzEnv = map[string]string{"K1": "sk-fuzz-one-1234", "K2": "fuzz-two-key-5678", "U": "http://127.0.0.1:1/v1"}

// FuzzParseRoutes: any input either loads into routes the planner accepts,
// or fails with a FieldError that names no Go type and shows no key the
// file configures from the environment.
func FuzzParseRoutes(f *testing.F) {
	f.Add([]byte(validRoutes))
	f.Add([]byte("providers: [{name: a}]"))
	f.Add([]byte(errorsBase))
	f.Add([]byte("providers:\n  - name: a\n    base_url: http://h/${K1}?q=${K2}\n    api_keys: [\"${K1}\", \"x${K2}\"]\n    max_concurrency: 1\nmodels: [{name: m, candidates: [{provider: a}]}]\n"))
	f.Add([]byte("providers:\n  - name: a\n    base_url: ${U:-http://127.0.0.1:2/v1}\n    api_keys: [\"${NOPE:-k}\"]\n    max_concurrency: 1\nmodels: [{name: m, candidates: [{provider: a}]}]\n"))
	f.Add([]byte("base: &b {format: openai, max_concurrency: 2, api_keys: [\"${K1}\"]}\nproviders:\n  - {<<: *b, name: a, base_url: \"http://${K1}/\"}\n"))
	f.Add([]byte("providers:\n  - &p {name: a, <<: *p}\n"))
	f.Add([]byte("providers:\n  - name: a\n    api_key: x\n    max_concurrency: \"8\"\n    timeouts: {connect: 1.5}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRoutes(b, env(fuzzEnv))
		if err != nil {
			var fe *FieldError
			if !errors.Is(err, ErrInvalidRoutes) || !errors.As(err, &fe) {
				t.Fatalf("error %T %v: want a *FieldError matching ErrInvalidRoutes", err, err)
			}
			msg := err.Error()
			if strings.Contains(msg, "candidates.") || strings.Contains(msg, "does not fit the routes format") {
				t.Fatalf("error not mapped to a YAML path: %v", err)
			}
			for _, k := range envKeys(b) {
				if strings.Contains(msg, k) {
					t.Fatalf("error shows the configured key %q: %v", k, err)
				}
			}
			return
		}
		if _, err := NewPlanner(r, PlannerOptions{}); err != nil {
			t.Fatalf("valid routes did not plan: %v", err)
		}
	})
}

// envKeys is an oracle independent of ParseRoutes: the keys a file lists
// under api_keys that take text from fuzzEnv, as a loose decode sees them.
func envKeys(b []byte) []string {
	var loose struct {
		Providers []struct {
			APIKeys []string `yaml:"api_keys"`
		} `yaml:"providers"`
	}
	if yaml.Unmarshal(b, &loose) != nil {
		return nil
	}
	var keys []string
	for _, p := range loose.Providers {
		for _, k := range p.APIKeys {
			v, _ := expandString(strings.TrimSpace(k), env(fuzzEnv))
			v = strings.TrimSpace(v)
			if len(v) >= minRedactedKey && (strings.Contains(v, fuzzEnv["K1"]) || strings.Contains(v, fuzzEnv["K2"])) {
				keys = append(keys, v)
			}
		}
	}
	return keys
}
