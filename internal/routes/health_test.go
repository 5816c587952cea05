package routes

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestHealthBlockValidation: a malformed health block or strategy is refused
// with the field's path, and a provider without one gets the defaults.
func TestHealthBlockValidation(t *testing.T) {
	const head = "providers:\n  - name: a\n    base_url: http://a.example/v1\n    api_keys: [ka]\n    max_concurrency: 1\n"
	const model = "models:\n  - name: m\n    candidates: [ { provider: a } ]\n"
	tests := []struct{ extra, model, want string }{
		{"    health: { failures: 0 }\n", model, "providers[0].health.failures must be at least 1, got 0"},
		{"    health: { failures: -2 }\n", model, "providers[0].health.failures must be at least 1, got -2"},
		{"    health: { cooldown: 0s }\n", model, "providers[0].health.cooldown must be a positive duration, got 0s"},
		{"    health: { auth_cooldown: -1s }\n", model, "providers[0].health.auth_cooldown"},
		{"    health: { max_cooldown: 0s }\n", model, "providers[0].health.max_cooldown must be a positive duration"},
		{"    health: { cooldown: 1m, max_cooldown: 30s }\n", model, "providers[0].health.max_cooldown (30s) must not be shorter than cooldown (1m0s)"},
		{"    health: { failure: 3 }\n", model, `unknown field "failure"`},
		{"", "models:\n  - name: m\n    strategy: fastest\n    candidates: [ { provider: a } ]\n", `models[0].strategy: "fastest" is unknown (known: weighted, least_latency)`},
		{"", "models:\n  - name: m\n    deadline: 0s\n    candidates: [ { provider: a } ]\n", `models[0].deadline must be a positive duration, got 0s`},
		{"", "models:\n  - name: m\n    hedge: { max: 1 }\n    candidates: [ { provider: a } ]\n", `models[0].hedge.after is required`},
		{"", "models:\n  - name: m\n    hedge: { after: p100 }\n    candidates: [ { provider: a } ]\n", `models[0].hedge.after: "p100" is not a percentile`},
		{"", "models:\n  - name: m\n    hedge: { after: soon }\n    candidates: [ { provider: a } ]\n", `models[0].hedge.after: "soon" is neither`},
		{"", "models:\n  - name: m\n    hedge: { after: 1s, max: 0 }\n    candidates: [ { provider: a } ]\n", `models[0].hedge.max must be at least 1, got 0`},
		{"    stream_commit: { events: 0 }\n", model, `providers[0].stream_commit.events must be at least 1, got 0`},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(head+tt.extra+tt.model), env(map[string]string{}))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalid) {
			t.Errorf("health %q: error %v, want one containing %q", tt.extra, err, tt.want)
		}
	}
	r, err := Parse([]byte(head+"    health: { failures: 5, cooldown: 2s }\n"+model), env(map[string]string{}))
	if err != nil {
		t.Fatal(err)
	}
	got := r.Providers[0].Health
	want := HealthConfig{Failures: 5, Cooldown: Duration(2 * time.Second), MaxCooldown: DefaultHealth.MaxCooldown, AuthCooldown: DefaultHealth.AuthCooldown}
	if got != want || r.Models[0].Strategy != StrategyWeighted {
		t.Fatalf("effective health %+v strategy %q, want %+v weighted", got, r.Models[0].Strategy, want)
	}
}
