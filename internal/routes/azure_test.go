package routes

import (
	"errors"
	"strings"
	"testing"
)

const azureSrc = `
providers:
  - name: az
    base_url: https://my-res.openai.azure.com
    api_keys: [k1]
    azure: { deployment: gpt-4o-prod, api_version: "2024-10-21" }
    max_concurrency: 4
models:
  - name: gpt-4o
    candidates:
      - { provider: az, model: gpt-4o }
`

// TestParseAzureProvider: an azure block turns the resource's endpoint
// into the deployment's URL with its api-version, and the key goes in
// api-key unless auth says otherwise; without a deployment it is the v1
// API, plain OpenAI under /openai/v1.
func TestParseAzureProvider(t *testing.T) {
	r, err := Parse([]byte(azureSrc), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	p := r.Providers[0]
	if p.BaseURL != "https://my-res.openai.azure.com/openai/deployments/gpt-4o-prod" || p.Query["api-version"] != "2024-10-21" {
		t.Fatalf("deployment addressing: base_url %q query %v", p.BaseURL, p.Query)
	}
	if p.Auth.Style != AuthHeader || p.Auth.Header != "api-key" {
		t.Fatalf("auth %+v, want {header: api-key}", p.Auth)
	}
	v1 := strings.Replace(azureSrc, `{ deployment: gpt-4o-prod, api_version: "2024-10-21" }`, "{}", 1)
	v1 = strings.Replace(v1, "    max_concurrency: 4\n", "    max_concurrency: 4\n    auth: bearer\n", 1)
	r, err = Parse([]byte(v1), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	p = r.Providers[0]
	if p.BaseURL != "https://my-res.openai.azure.com/openai/v1" || len(p.Query) != 0 || p.Auth.Style != AuthBearer {
		t.Fatalf("v1 API: base_url %q query %v auth %+v", p.BaseURL, p.Query, p.Auth)
	}
}

// TestParseAzureErrors: each mistake names its field path.
func TestParseAzureErrors(t *testing.T) {
	for _, c := range []struct{ name, src, path, want string }{
		{"no api_version", strings.Replace(azureSrc, `, api_version: "2024-10-21"`, "", 1), "providers[0].azure.api_version", "required with a deployment"},
		{"bad api_version", strings.Replace(azureSrc, `"2024-10-21"`, "v1", 1), "providers[0].azure.api_version", "not an Azure api-version"},
		{"bad deployment", strings.Replace(azureSrc, "gpt-4o-prod", "../x", 1), "providers[0].azure.deployment", "not an Azure deployment name"},
		{"path in base_url", strings.Replace(azureSrc, "azure.com", "azure.com/openai/deployments/x", 1), "providers[0].azure", "already has an /openai path"},
		{"api-version twice", strings.Replace(azureSrc, "    max_concurrency: 4\n", "    max_concurrency: 4\n    query: { api-version: \"2024-06-01\" }\n", 1), "providers[0].azure.api_version", "set it in one place"},
		{"azure on anthropic", strings.Replace(azureSrc, "    api_keys: [k1]\n", "    api_keys: [k1]\n    format: anthropic\n", 1), "providers[0].azure", "only to format openai"},
	} {
		_, err := Parse([]byte(c.src), env(nil))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Path != c.path || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %s: ...%s", c.name, err, c.path, c.want)
		}
	}
}
