package routes_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/routes"
)

// goTypeName matches a Go type name in an error (routes.ProviderConfig, as
// yaml's own errors word them; candidates. from before the move).
var goTypeName = regexp.MustCompile(`\b(routes|candidates)\.[A-Z]`)

// fuzzEnv's values are keys only the environment holds: the fuzzer can
// place ${K1} anywhere, but is unlikely to write the value itself.
var fuzzEnv = map[string]string{"K1": "sk-fuzz-one-1234", "K2": "fuzz-two-key-5678", "U": "http://127.0.0.1:1/v1"}

// FuzzParse: any input either loads into routes the planner accepts,
// or fails with a FieldError that names no Go type and shows no key the
// file configures from the environment.
func FuzzParse(f *testing.F) {
	f.Add([]byte(routes.ValidRoutes))
	f.Add([]byte("providers: [{name: a}]"))
	f.Add([]byte(routes.ErrorsBase))
	f.Add([]byte("providers:\n  - name: a\n    base_url: http://h/${K1}?q=${K2}\n    api_keys: [\"${K1}\", \"x${K2}\"]\n    max_concurrency: 1\nmodels: [{name: m, candidates: [{provider: a}]}]\n"))
	f.Add([]byte("providers:\n  - name: a\n    base_url: ${U:-http://127.0.0.1:2/v1}\n    api_keys: [\"${NOPE:-k}\"]\n    max_concurrency: 1\nmodels: [{name: m, candidates: [{provider: a}]}]\n"))
	f.Add([]byte("base: &b {format: openai, max_concurrency: 2, api_keys: [\"${K1}\"]}\nproviders:\n  - {<<: *b, name: a, base_url: \"http://${K1}/\"}\n"))
	f.Add([]byte("providers:\n  - &p {name: a, <<: *p}\n"))
	f.Add([]byte("providers:\n  - name: a\n    api_key: x\n    max_concurrency: \"8\"\n    timeouts: {connect: 1.5}\n"))
	f.Add([]byte(routes.CostRoutes))
	f.Add([]byte("providers:\n  - name: a\n    base_url: http://h/\n    api_keys: [k]\n    max_concurrency: 1\n    prices: {m: {input: .nan, output: \"1\"}, \"\": {input: 1e400}}\nmodels: [{name: m, max_tokens_estimate: 0, candidates: [{provider: a}]}]\nteams: [{name: t, budget: {usd: -0, per: weak}}]\nclients: [{name: c, key_sha256: x, team: u, budget: 5}]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := routes.Parse(b, routes.Env(fuzzEnv))
		if err != nil {
			var fe *routes.FieldError
			if !errors.Is(err, routes.ErrInvalid) || !errors.As(err, &fe) {
				t.Fatalf("error %T %v: want a *routes.FieldError matching ErrInvalid", err, err)
			}
			msg := err.Error()
			if goTypeName.MatchString(msg) || strings.Contains(msg, "does not fit the routes format") {
				t.Fatalf("error not mapped to a YAML path: %v", err)
			}
			for _, k := range envKeys(b) {
				if strings.Contains(msg, k) {
					t.Fatalf("error shows the configured key %q: %v", k, err)
				}
			}
			return
		}
		if _, err := candidates.NewPlanner(r, candidates.PlannerOptions{}); err != nil {
			t.Fatalf("valid routes did not plan: %v", err)
		}
	})
}

// envKeys is an oracle independent of Parse: the keys a file lists
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
			v, _ := routes.ExpandString(strings.TrimSpace(k), routes.Env(fuzzEnv))
			v = strings.TrimSpace(v)
			if len(v) >= routes.MinRedactedKey && (strings.Contains(v, fuzzEnv["K1"]) || strings.Contains(v, fuzzEnv["K2"])) {
				keys = append(keys, v)
			}
		}
	}
	return keys
}
