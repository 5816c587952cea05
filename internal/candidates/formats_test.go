package candidates

import (
	"errors"
	"testing"

	"github.com/llmgw/gateway/internal/upstream"
)

const formatRoutes = `
providers:
  - { name: oa, base_url: "http://oa.example/v1", api_keys: [k1], max_concurrency: 1 }
  - name: an
    format: anthropic
    base_url: "https://an.example/v1/"
    api_keys: [k2]
    max_concurrency: 1
    default_max_tokens: 1024
  - { name: az, base_url: "https://az.example/openai", api_keys: [k3], max_concurrency: 1, auth: { header: api-key }, query: { api-version: "2024-10-21" } }
  - { name: local, base_url: "http://127.0.0.1:8000/v1", auth: none, max_concurrency: 1 }
  - { name: an2, format: anthropic, base_url: "https://an2.example/v1", api_keys: [k4], max_concurrency: 1, auth: bearer, headers: { anthropic-version: "2024-01-01" } }
models:
  - name: mixed
    candidates:
      - { provider: an }
      - { provider: oa, priority: 1 }
  - name: claude
    candidates:
      - { provider: an }
      - { provider: an2 }
  - name: local
    candidates:
      - { provider: local }
      - { provider: az, priority: 1 }
`

// TestProviderEndpoints: each format and auth style resolves to the URLs,
// auth and default headers the contract gives it.
func TestProviderEndpoints(t *testing.T) {
	p := mustPlanner(t, formatRoutes, 1)
	byName := map[string]*Provider{}
	for _, prov := range p.Providers() {
		byName[prov.Name] = prov
	}
	tests := []struct {
		provider   string
		auth       upstream.Auth
		urls       [upstream.NumRoutes]string
		version    string // anthropic-version sent unless the client or headers set one
		maxTokens  int64
		keyTargets int
	}{
		{"oa", upstream.Auth{Style: upstream.AuthBearer},
			[upstream.NumRoutes]string{"http://oa.example/v1/chat/completions", "http://oa.example/v1/chat/completions", "http://oa.example/v1/embeddings", "http://oa.example/v1/responses"},
			"", 0, 1},
		{"an", upstream.Auth{Style: upstream.AuthXAPIKey},
			[upstream.NumRoutes]string{"https://an.example/v1/messages", "https://an.example/v1/messages", "", "https://an.example/v1/messages"},
			upstream.AnthropicVersion, 1024, 1},
		{"az", upstream.Auth{Style: upstream.AuthHeader, Header: "api-key"},
			[upstream.NumRoutes]string{"https://az.example/openai/chat/completions?api-version=2024-10-21", "https://az.example/openai/chat/completions?api-version=2024-10-21",
				"https://az.example/openai/embeddings?api-version=2024-10-21", "https://az.example/openai/responses?api-version=2024-10-21"},
			"", 0, 1},
		{"local", upstream.Auth{Style: upstream.AuthNone},
			[upstream.NumRoutes]string{"http://127.0.0.1:8000/v1/chat/completions", "http://127.0.0.1:8000/v1/chat/completions", "http://127.0.0.1:8000/v1/embeddings", "http://127.0.0.1:8000/v1/responses"},
			"", 0, 1},
		{"an2", upstream.Auth{Style: upstream.AuthBearer},
			[upstream.NumRoutes]string{"https://an2.example/v1/messages", "https://an2.example/v1/messages", "", "https://an2.example/v1/messages"},
			upstream.AnthropicVersion, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.provider, func(t *testing.T) {
			ep := byName[tt.provider].Endpoint
			if ep.Auth != tt.auth {
				t.Errorf("auth %+v, want %+v", ep.Auth, tt.auth)
			}
			if ep.URLs != tt.urls {
				t.Errorf("urls %q, want %q", ep.URLs, tt.urls)
			}
			if got := ep.Defaults.Get("Anthropic-Version"); got != tt.version {
				t.Errorf("default anthropic-version %q, want %q", got, tt.version)
			}
			if ep.DefaultMaxTokens != tt.maxTokens {
				t.Errorf("default_max_tokens %d, want %d", ep.DefaultMaxTokens, tt.maxTokens)
			}
			if n := len(byName[tt.provider].Targets); n != tt.keyTargets {
				t.Errorf("%d targets, want %d", n, tt.keyTargets)
			}
		})
	}
	if got := byName["an2"].Endpoint.Extra.Get("Anthropic-Version"); got != "2024-01-01" {
		t.Errorf("headers' anthropic-version %q: the routes file's must be kept", got)
	}
	if k := byName["local"].Targets[0]; k.KeyID != "nokey" || !k.Key.Empty() {
		t.Errorf("auth none target: key id %q, key empty %v", k.KeyID, k.Key.Empty())
	}
}

// TestPlanRouteByFormat: a route plans only the candidates whose format
// serves it; a model none of whose providers can is refused, not planned
// empty.
func TestPlanRouteByFormat(t *testing.T) {
	p := mustPlanner(t, formatRoutes, 1)
	tests := []struct {
		model string
		route upstream.Route
		want  string // providers in plan order, or the error
	}{
		{"mixed", upstream.RouteChat, "an oa"},
		{"mixed", upstream.RouteMessages, "an oa"},
		{"mixed", upstream.RouteEmbeddings, "oa"},
		{"mixed", upstream.RouteResponses, "an oa"}, // anthropic through the chat form
		{"claude", upstream.RouteEmbeddings, ErrRouteNotServed.Error()},
		{"claude", upstream.RouteResponses, "an2 an"},
		{"local", upstream.RouteEmbeddings, "local az"},
		{"nope", upstream.RouteChat, ErrModelNotFound.Error()},
	}
	for _, tt := range tests {
		_, plan, err := p.PlanRoute(tt.model, tt.route)
		got := ""
		if err != nil {
			got = err.Error()
		}
		for i, c := range plan {
			if i > 0 {
				got += " "
			}
			got += c.Provider().Name
		}
		if got != tt.want {
			t.Errorf("%s on %s: %q, want %q", tt.model, tt.route, got, tt.want)
		}
		if err != nil && !errors.Is(err, ErrRouteNotServed) && !errors.Is(err, ErrModelNotFound) {
			t.Errorf("unexpected error %v", err)
		}
	}
}
