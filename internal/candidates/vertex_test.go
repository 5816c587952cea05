package candidates

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/mockupstream"
	"github.com/llmgw/gateway/internal/upstream"
)

// TestVertexProviderPlan: a vertex provider resolves to its project's
// models path under base_url, one service-account target with a token
// source, no embeddings (a route of vertex alone refuses them), and the
// gemini price table.
func TestVertexProviderPlan(t *testing.T) {
	key, _, err := mockupstream.New(mockupstream.Behavior{}).VertexServiceAccount("http://127.0.0.1:9/token", nil)
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(creds, key, 0o600); err != nil {
		t.Fatal(err)
	}
	p := mustPlanner(t, `
providers:
  - name: vx
    format: vertex
    base_url: https://private.example
    vertex: { project: proj, location: us-east5 }
    credentials_file: `+creds+`
    max_concurrency: 1
  - { name: oa, base_url: "http://oa.example/v1", api_keys: [k1], max_concurrency: 1 }
models:
  - name: flash
    candidates:
      - { provider: vx, model: gemini-2.5-flash }
  - name: mixed
    candidates:
      - { provider: vx, model: gemini-2.5-flash }
      - { provider: oa, priority: 1 }
`, 1)
	var vx *Provider
	for _, prov := range p.Providers() {
		if prov.Name == "vx" {
			vx = prov
		}
	}
	ep := vx.Endpoint
	const models = "https://private.example/v1/projects/proj/locations/us-east5/publishers/google/models"
	if ep.URLs[upstream.RouteChat] != models || ep.URLs[upstream.RouteMessages] != models || ep.Serves(upstream.RouteEmbeddings) || !ep.Serves(upstream.RouteResponses) {
		t.Fatalf("urls %q", ep.URLs)
	}
	if ep.Auth.Style != upstream.AuthGoogle || ep.Auth.Tokens == nil {
		t.Fatalf("auth %+v", ep.Auth)
	}
	if len(vx.Targets) != 1 || !strings.HasPrefix(vx.Targets[0].KeyID, "sa-") {
		t.Fatalf("targets %+v", vx.Targets)
	}
	if _, _, err := p.PlanRoute("flash", upstream.RouteEmbeddings); err == nil {
		t.Fatal("embeddings planned on a vertex provider")
	}
	_, plan, err := p.PlanRoute("mixed", upstream.RouteEmbeddings)
	if err != nil || len(plan) != 1 || plan[0].Provider().Name != "oa" {
		t.Fatalf("mixed embeddings: %v %v", plan, err)
	}
	if vendorOf(upstream.FormatVertex) != "gemini" {
		t.Fatal("vertex is not priced from the gemini table")
	}
}
