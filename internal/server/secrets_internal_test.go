package server

import (
	"slices"
	"testing"

	"github.com/llmgw/gateway/internal/config"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/secret"
)

// TestSecretsOf protects the list the Redactor is built from: every
// credential of the configuration and the routes file is in it (the
// passwords of both DSN forms and of the Redis URL included), and protocol
// settings such as anthropic-version and api-version are not, or their
// values would be blanked out of every log and record.
func TestSecretsOf(t *testing.T) {
	for _, tc := range []struct {
		name, dsn, want string
	}{
		{"url", "postgres://gw:pg-Pass%2Fword1@db:5432/gw", "pg-Pass/word1"},
		{"keywords", "host=db user=gw password='kw pass 12345' dbname=gw", "kw pass 12345"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Config{AdminToken: secret.New("admin-token-123"), DatabaseURL: secret.New(tc.dsn),
				RedisURL: secret.New("redis://:redis-Pass-9876@redis:6379/0")}
			routes := &routes.Routes{Providers: []routes.ProviderConfig{{
				Name: "p", APIKeys: []secret.String{secret.New("gsk_key0123456789"), secret.New("gsk_key9876543210")},
				Headers: map[string]string{"OpenAI-Organization": "org-0123456789", "anthropic-version": "2023-06-01",
					"HTTP-Referer": "https://myapp.example", "X-Title": "My very own application", "X-Portkey-Api-Key": "pk-0123456789ab"},
				Query: map[string]string{"key": "AIzaQueryKey0123", "api-version": "2024-10-21", "sig": "sas-sig-0123456789"},
			}}}
			got := secretsOf(cfg, routes)
			for _, want := range []string{tc.want, "admin-token-123", "redis-Pass-9876", "gsk_key0123456789",
				"gsk_key9876543210", "org-0123456789", "AIzaQueryKey0123", "pk-0123456789ab", "sas-sig-0123456789"} {
				if !slices.Contains(got, want) {
					t.Errorf("secretsOf lacks %q: %q", want, got)
				}
			}
			// Settings, not credentials: their heads would blank every
			// URL or title out of the logs.
			for _, public := range []string{"2023-06-01", "2024-10-21", "https://myapp.example", "My very own application"} {
				if slices.Contains(got, public) {
					t.Errorf("secretsOf holds the protocol setting %q", public)
				}
			}
		})
	}
}
